package rootfs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// HostMirror returns the Debian mirror the machine's apt uses (under root:
// "/" here, a directory of fake files in tests): the URI of the first
// "deb" source whose path is a Debian archive's (ending in /debian) and
// that is not the security archive. Sources are read as apt reads them:
// etc/apt/sources.list, then etc/apt/sources.list.d/*.list and *.sources
// (deb822) in name order; disabled deb822 entries (Enabled: no) are passed
// by.
func HostMirror(root string) (string, error) {
	dir := filepath.Join(root, "etc/apt")
	files := []string{filepath.Join(dir, "sources.list")}
	parts, err := filepath.Glob(filepath.Join(dir, "sources.list.d", "*"))
	if err != nil {
		return "", fmt.Errorf("rootfs: apt sources: %w", err)
	}
	slices.Sort(parts)
	files = append(files, parts...)
	for _, f := range files {
		var uris []string
		switch {
		case strings.HasSuffix(f, ".sources"):
			uris, err = deb822URIs(f)
		case strings.HasSuffix(f, ".list"):
			uris, err = oneLineURIs(f)
		default:
			continue
		}
		if err != nil {
			return "", err
		}
		for _, u := range uris {
			if strings.HasSuffix(strings.TrimSuffix(u, "/"), "/debian") {
				return strings.TrimSuffix(u, "/"), nil
			}
		}
	}
	return "", errors.New("rootfs: no Debian mirror in the machine's apt sources (etc/apt/sources.list{,.d}): give one")
}

// oneLineURIs are the URIs of the "deb" lines of a sources.list file
// ("deb [options] URI SUITE COMPONENTS...").
func oneLineURIs(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("rootfs: %w", err)
	}
	var uris []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if strings.HasPrefix(f[0], "[") { // options, up to "]"
			for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
				f = f[1:]
			}
			if len(f) < 3 {
				continue
			}
			f = f[1:]
		}
		if !strings.Contains(f[1], "security") {
			uris = append(uris, f[0])
		}
	}
	return uris, nil
}

// deb822URIs are the URIs of the enabled "deb" entries of a .sources file.
func deb822URIs(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("rootfs: %w", err)
	}
	var uris []string
	for _, stanza := range strings.Split(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n\n") {
		fields := map[string]string{}
		key := ""
		for _, line := range strings.Split(stanza, "\n") {
			switch {
			case strings.HasPrefix(line, "#"):
			case strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t"): // a continuation
				if key != "" {
					fields[key] += " " + strings.TrimSpace(line)
				}
			default:
				k, v, ok := strings.Cut(line, ":")
				if !ok {
					continue
				}
				key = strings.ToLower(strings.TrimSpace(k))
				fields[key] = strings.TrimSpace(v)
			}
		}
		if !slices.Contains(strings.Fields(fields["types"]), "deb") || strings.EqualFold(fields["enabled"], "no") ||
			strings.Contains(fields["suites"], "security") {
			continue
		}
		uris = append(uris, strings.Fields(fields["uris"])...)
	}
	return uris, nil
}
