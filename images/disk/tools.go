package disk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// ErrToolMissing is wrapped by the error of Build and CheckTools when a host
// tool is not installed.
var ErrToolMissing = errors.New("tool missing")

// tools are the host programs Build runs and the Debian packages that hold
// them, in the order Build needs them.
var tools = []struct{ name, pkg string }{
	{"mkfs.vfat", "dosfstools"},
	{"mcopy", "mtools"},
	{"mke2fs", "e2fsprogs"},
	{"sfdisk", "fdisk"},
}

// CheckTools reports, in one error wrapping ErrToolMissing, every host tool
// Build needs that is not installed, with the Debian packages to install.
func CheckTools() error {
	return missingTools(lookTool)
}

func missingTools(look func(string) (string, error)) error {
	var names, pkgs []string
	for _, tl := range tools {
		if _, err := look(tl.name); err != nil {
			names = append(names, tl.name)
			pkgs = append(pkgs, tl.pkg)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return fmt.Errorf("images: disk: %w: %s not found: install them with apt-get install %s",
		ErrToolMissing, strings.Join(names, ", "), strings.Join(pkgs, " "))
}

// lookTool finds a program in PATH or, as an ordinary user's PATH on Debian
// lacks them, in the sbin directories where mkfs.vfat, mke2fs and sfdisk live.
func lookTool(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		if p, err2 := exec.LookPath(filepath.Join(dir, name)); err2 == nil {
			return p, nil
		}
	}
	return "", err
}

// run runs a tool with extra environment variables env and standard input
// stdin, failing with its output when it exits non-zero; ctx kills it. Its
// errors start with the tool's name, for the caller to say what it was doing.
func run(ctx context.Context, env []string, stdin string, name string, args ...string) error {
	p, err := lookTool(name)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrToolMissing, name)
	}
	cmd := exec.CommandContext(ctx, p, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdin = strings.NewReader(stdin)
	var output bytes.Buffer
	cmd.Stdout = &output
	cmd.Stderr = &output
	start := time.Now()
	err = cmd.Run()
	slog.DebugContext(ctx, "images: disk: ran", "tool", name, "args", args, "took", time.Since(start).Round(time.Millisecond))
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", name, ctx.Err())
		}
		return fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(output.String()))
	}
	return nil
}
