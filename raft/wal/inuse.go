package wal

import (
	"errors"
	"fmt"
	"os"
)

// InUse reports whether an open WAL holds dir (in this process or another).
// A directory that does not exist is not in use.
func InUse(dir string) (bool, error) {
	d, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("wal: open directory %s: %w", dir, err)
	}
	defer d.Close()
	switch err := lockDir(d); {
	case errors.Is(err, ErrLocked):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("wal: lock directory %s: %w", dir, err)
	}
	return false, nil
}
