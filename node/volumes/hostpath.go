package volumes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// makeHostDir makes a missing directory with mode (past the umask), and
// its missing parents 0755.
func makeHostDir(p string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(p, mode); err != nil {
		return err
	}
	return os.Chmod(p, mode)
}

// checkHostPath checks a hostPath against its type as the kubelet does,
// making a DirectoryOrCreate directory (with dirMode, parents 0755) or a FileOrCreate
// file (0644, in an existing directory) that is missing, and gives the
// path to bind.
func checkHostPath(hp *corev1.HostPathVolumeSource, dirMode os.FileMode) (string, error) {
	p := hp.Path
	if !filepath.IsAbs(p) || slices.Contains(strings.Split(p, "/"), "..") {
		return "", fmt.Errorf("hostPath %q must be an absolute path without ..", p)
	}
	p = filepath.Clean(p)
	t := corev1.HostPathUnset
	if hp.Type != nil {
		t = *hp.Type
	}
	fi, err := os.Stat(p)
	missing := errors.Is(err, fs.ErrNotExist)
	if err != nil && !missing {
		return "", fmt.Errorf("hostPath type check: %w", err)
	}
	fail := func(what string) (string, error) {
		return "", fmt.Errorf("hostPath type check failed: %s is not %s", p, what)
	}
	switch t {
	case corev1.HostPathUnset:
	case corev1.HostPathDirectoryOrCreate:
		if missing {
			if err := makeHostDir(p, dirMode); err != nil {
				return "", fmt.Errorf("hostPath %s: %w", t, err)
			}
		} else if !fi.IsDir() {
			return fail("a directory")
		}
	case corev1.HostPathDirectory:
		if missing || !fi.IsDir() {
			return fail("a directory")
		}
	case corev1.HostPathFileOrCreate:
		if missing {
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return "", fmt.Errorf("hostPath %s: %w", t, err)
			}
			if err := f.Close(); err != nil {
				return "", fmt.Errorf("hostPath %s: %w", t, err)
			}
		} else if !fi.Mode().IsRegular() {
			return fail("a file")
		}
	case corev1.HostPathFile:
		if missing || !fi.Mode().IsRegular() {
			return fail("a file")
		}
	case corev1.HostPathSocket:
		if missing || fi.Mode().Type() != fs.ModeSocket {
			return fail("a socket file")
		}
	case corev1.HostPathCharDev:
		if missing || fi.Mode().Type() != fs.ModeDevice|fs.ModeCharDevice {
			return fail("a character device")
		}
	case corev1.HostPathBlockDev:
		if missing || fi.Mode().Type() != fs.ModeDevice {
			return fail("a block device")
		}
	default:
		return "", fmt.Errorf("hostPath type %q is not supported", t)
	}
	return p, nil
}
