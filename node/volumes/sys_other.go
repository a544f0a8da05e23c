//go:build !linux

package volumes

import (
	"errors"
	"fmt"
	"io/fs"
)

// Volumes are mounted on Linux only; elsewhere the package builds, and
// what needs the kernel says so.
var errNotLinux = fmt.Errorf("volumes: %w: mounts need Linux", errors.ErrUnsupported)

func mountTmpfs(dir, opts string, hardened bool) error        { return errNotLinux }
func isTmpfs(dir string) (bool, error)                        { return false, errNotLinux }
func UnmountUnder(dir string) error                           { return errNotLinux }
func diskUsage(dir string) (int64, error)                     { return 0, errNotLinux }
func bindSubPath(root, sub, target string, create bool) error { return errNotLinux }
func fileGroup(fi fs.FileInfo) (int64, bool)                  { return 0, false }
