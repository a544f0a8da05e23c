package disk

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/isle-cluster/isle/images/hosttools"
)

// ErrToolMissing is wrapped by the error of Build and CheckTools when a host
// tool is not installed.
var ErrToolMissing = hosttools.ErrMissing

// tools are the host programs Build runs and the Debian packages that hold
// them, in the order Build needs them.
var tools = []hosttools.Tool{
	{Name: "mkfs.vfat", Package: "dosfstools"},
	{Name: "mcopy", Package: "mtools"},
	{Name: "mke2fs", Package: "e2fsprogs"},
	{Name: "sfdisk", Package: "fdisk"},
}

// CheckTools reports, in one error wrapping ErrToolMissing, every host tool
// Build needs that is not installed, with the Debian packages to install.
func CheckTools() error {
	return missingTools(hosttools.Look)
}

func missingTools(look func(string) (string, error)) error {
	if err := hosttools.Missing(tools, look); err != nil {
		return fmt.Errorf("images: disk: %w", err)
	}
	return nil
}

// run runs a tool with extra environment variables env and standard input
// stdin, failing with its output when it exits non-zero; ctx kills it. Its
// errors start with the tool's name, for the caller to say what it was doing.
func run(ctx context.Context, env []string, stdin string, name string, args ...string) error {
	p, err := hosttools.Look(name)
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
