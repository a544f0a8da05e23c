//go:build unix

package wal

import (
	"errors"
	"os"
	"syscall"
)

// lockDir takes an exclusive, non-blocking flock on the directory d. The lock
// is released when d is closed (or the process exits).
func lockDir(d *os.File) error {
	rc, err := d.SyscallConn()
	if err != nil {
		return err
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) {
		for {
			lerr = syscall.Flock(int(fd), syscall.LOCK_EX|syscall.LOCK_NB)
			if lerr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if errors.Is(lerr, syscall.EWOULDBLOCK) {
		return ErrLocked
	}
	return lerr
}
