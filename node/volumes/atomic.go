package volumes

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Names inside a volume written by writeAtomic.
const (
	dataLink    = "..data"
	dataLinkTmp = "..data_tmp"
	// tsPrefix names the directories of contents; os.MkdirTemp appends a
	// random suffix.
	tsPrefix = "..2006_01_02_15_04_05."
)

// writeAtomic makes dir show exactly the files of p, the way the kubelet's
// atomic writer does, so that a container sees all of an update or none
// of it:
//
//	dir/..2024_05_01_10_00_00.123456/<files>   the contents
//	dir/..data -> ..2024_05_01_10_00_00.123456
//	dir/<top> -> ..data/<top>                  for each top-level name of p
//
// When the contents differ from p, they are written to a new timestamped
// directory, and a symlink to it replaces ..data by rename(2); then
// missing top-level symlinks are made, and top-level names no longer in p
// and the old contents are removed. When they do not differ, only the
// top-level symlinks are checked. changed says whether it wrote contents.
func writeAtomic(dir string, p payload) (changed bool, err error) {
	tops, err := checkPayload(p)
	if err != nil {
		return false, err
	}
	data := filepath.Join(dir, dataLink)
	current, err := os.Readlink(data)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		current = ""
	case err != nil || !isContentsName(current):
		// Not ours: neither a symlink nor one to a contents directory.
		if err := os.RemoveAll(data); err != nil {
			return false, fmt.Errorf("remove %s: %w", data, err)
		}
		current = ""
	}
	if current == "" || !sameContents(filepath.Join(dir, current), p) {
		ts, err := writeContents(dir, p)
		if err != nil {
			return false, err
		}
		tmp := filepath.Join(dir, dataLinkTmp)
		if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, err
		}
		if err := os.Symlink(ts, tmp); err != nil {
			return false, err
		}
		if err := os.Rename(tmp, data); err != nil {
			return false, err
		}
		current, changed = ts, true
	}
	for top := range tops {
		link, target := filepath.Join(dir, top), filepath.Join(dataLink, top)
		if t, err := os.Readlink(link); err == nil && t == target {
			continue
		}
		if err := os.RemoveAll(link); err != nil {
			return changed, err
		}
		if err := os.Symlink(target, link); err != nil {
			return changed, err
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return changed, err
	}
	for _, e := range entries {
		if n := e.Name(); n != dataLink && n != current && !tops[n] {
			// An old top-level symlink, old contents, or a leftover of a
			// write that was interrupted.
			if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
				return changed, err
			}
		}
	}
	return changed, nil
}

// isContentsName says whether ..data's target names a contents directory.
func isContentsName(s string) bool {
	return strings.HasPrefix(s, "..") && s != dataLink && s != dataLinkTmp && !strings.ContainsRune(s, '/')
}

// checkPayload checks that every path is clean, relative, inside the
// volume, not hidden behind the writer's own ".." names, and not below
// another file of p; it gives the set of top-level names.
func checkPayload(p payload) (map[string]bool, error) {
	tops := make(map[string]bool, len(p))
	for path := range p {
		bad := func(why string) (map[string]bool, error) {
			return nil, fmt.Errorf("file path %q: %s", path, why)
		}
		switch {
		case path == "" || path == ".":
			return bad("is empty")
		case filepath.IsAbs(path):
			return bad("must be relative")
		case filepath.Clean(path) != path:
			return bad("must be a clean path (no ./, //, or trailing /)")
		case strings.HasPrefix(path, ".."):
			return bad("must not start with ..")
		case len(path) > 4096:
			return bad("is longer than 4096 bytes")
		}
		elems := strings.Split(path, "/")
		for i, e := range elems {
			switch {
			case e == "..":
				return bad("must not contain ..")
			case len(e) > 255:
				return bad("has an element longer than 255 bytes")
			case i < len(elems)-1:
				if _, isFile := p[strings.Join(elems[:i+1], "/")]; isFile {
					return bad("is below another file of the volume")
				}
			}
		}
		tops[elems[0]] = true
	}
	return tops, nil
}

// sameContents says whether the contents directory ts holds exactly the
// files of p, with their modes.
func sameContents(ts string, p payload) bool {
	errDiffer := errors.New("differ")
	n := 0
	err := filepath.WalkDir(ts, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(ts, path)
		if err != nil {
			return err
		}
		want, ok := p[rel]
		if !ok || !d.Type().IsRegular() {
			return errDiffer
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode().Perm() != want.mode || fi.Size() != int64(len(want.data)) {
			return errDiffer
		}
		if gid, ok := fileGroup(fi); want.group != nil && (!ok || gid != *want.group) {
			return errDiffer
		}
		got, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, want.data) {
			return errDiffer
		}
		n++
		return nil
	})
	return err == nil && n == len(p)
}

// writeContents writes p into a new timestamped directory of dir and gives
// its name.
func writeContents(dir string, p payload) (string, error) {
	ts, err := os.MkdirTemp(dir, time.Now().UTC().Format(tsPrefix))
	if err != nil {
		return "", err
	}
	if err := writeFiles(ts, p); err != nil {
		return "", errors.Join(err, os.RemoveAll(ts))
	}
	return filepath.Base(ts), nil
}

func writeFiles(ts string, p payload) error {
	if err := os.Chmod(ts, 0o755); err != nil {
		return err
	}
	for _, rel := range slices.Sorted(maps.Keys(p)) {
		f := p[rel]
		if err := makeDirs(ts, filepath.Dir(rel)); err != nil {
			return err
		}
		if err := writeFile(filepath.Join(ts, rel), f); err != nil {
			return err
		}
	}
	return nil
}

// makeDirs makes the directories of rel below base, 0755 past the umask.
func makeDirs(base, rel string) error {
	if rel == "." {
		return nil
	}
	d := base
	for _, e := range strings.Split(rel, "/") {
		d = filepath.Join(d, e)
		err := os.Mkdir(d, 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := os.Chmod(d, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// writeFile writes a new file with its mode, past the umask.
func writeFile(path string, f file) error {
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, f.mode)
	if err != nil {
		return err
	}
	_, err = w.Write(f.data)
	if err == nil && f.group != nil {
		err = w.Chown(-1, int(*f.group))
	}
	if err == nil {
		err = w.Chmod(f.mode)
	}
	return errors.Join(err, w.Close())
}
