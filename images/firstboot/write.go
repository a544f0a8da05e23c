package firstboot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/isle-cluster/isle/raft/atomicfile"
)

// DoneFile marks a board's first boot done: `isle firstboot` does nothing
// where it exists (unless forced).
const DoneFile = "/var/lib/isle/firstboot.done"

// IsDone tells whether the first boot of the board under root is done.
func IsDone(root string) (bool, error) {
	_, err := os.Stat(filepath.Join(root, DoneFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("firstboot: %w", err)
	}
	return true, nil
}

// MarkDone marks the first boot of the board under root done, at now.
func MarkDone(root string, now time.Time) error {
	text := "isle firstboot applied isle.yaml on " + now.UTC().Format(time.RFC3339) + "\n"
	if err := writeFile(filepath.Join(root, DoneFile), []byte(text), 0o644); err != nil {
		return fmt.Errorf("firstboot: %w", err)
	}
	return nil
}

// writeFile writes data to path atomically and durably (mode, never
// looser), making its directory readable by all if need be: the board's
// services (systemd-networkd) read what first boot writes.
func writeFile(path string, data []byte, mode fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, data, mode)
}

// symlink makes link point to target, replacing what is there through a
// temporary link renamed over it, and syncs the directory.
func symlink(target, link string) error {
	dir := filepath.Dir(link)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := link + ".tmp"
	if err := remove(tmp); err != nil {
		return err
	}
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, link); err != nil {
		_ = os.Remove(tmp) // best effort: the error says what failed
		return err
	}
	return atomicfile.SyncDir(dir)
}

// remove removes path if it exists (and syncs its directory then).
func remove(path string) error {
	err := os.Remove(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	}
	return atomicfile.SyncDir(filepath.Dir(path))
}
