package hw

import (
	"fmt"
	"syscall"
)

// Filesystem is the size of a filesystem and the space left on it, in
// bytes.
type Filesystem struct {
	Size int64
	// Available is what an unprivileged writer may still use (the blocks
	// reserved for root excluded), as df reports it.
	Available int64
}

// ReadFilesystem reads the filesystem that holds path.
func ReadFilesystem(path string) (Filesystem, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return Filesystem{}, fmt.Errorf("hw: filesystem of %q: %w", path, err)
	}
	// Block counts are in fragment-size units; Bsize is only the preferred
	// I/O size (they are equal on ext4, not on every filesystem).
	unit := int64(st.Frsize)
	if unit <= 0 {
		unit = int64(st.Bsize)
	}
	return Filesystem{Size: int64(st.Blocks) * unit, Available: int64(st.Bavail) * unit}, nil
}
