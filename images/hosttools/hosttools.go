// Package hosttools finds the programs that the image builder and a
// board's first boot run (mkfs.vfat, sfdisk, resize2fs, ...), and names
// the Debian packages that hold the missing ones.
package hosttools

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// ErrMissing is wrapped by Missing's error.
var ErrMissing = errors.New("tool missing")

// Tool is a program and the Debian package that holds it.
type Tool struct{ Name, Package string }

// Look finds a program in PATH or, as an ordinary user's PATH on Debian
// lacks them, in the sbin directories.
func Look(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		if p, err := exec.LookPath(filepath.Join(dir, name)); err == nil {
			return p, nil
		}
	}
	return "", err
}

// Missing reports, in one error wrapping ErrMissing, every tool that look
// does not find, with the packages to install; nil if look finds them all.
func Missing(tools []Tool, look func(string) (string, error)) error {
	var names, pkgs []string
	for _, t := range tools {
		if _, err := look(t.Name); err != nil {
			names = append(names, t.Name)
			pkgs = append(pkgs, t.Package)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s not found: install them with apt-get install %s", ErrMissing, strings.Join(names, ", "), strings.Join(pkgs, " "))
}
