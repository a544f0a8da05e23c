package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// parallelBuilds is how many `go build`s run at once: each takes a CPU
// and a few hundred MiB.
const parallelBuilds = 2

// compileAll cross-compiles pkg for every platform, parallelBuilds at a
// time, in a temporary directory, and returns the binaries in the order
// of platforms. The first failing build cancels the others and is the
// error returned.
func compileAll(ctx context.Context, pkg string, platforms []platform) ([][]byte, error) {
	dir, err := os.MkdirTemp("", "mkimage")
	if err != nil {
		return nil, fmt.Errorf("compile: %w", err)
	}
	defer os.RemoveAll(dir)

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	bins := make([][]byte, len(platforms))
	slots := make(chan struct{}, parallelBuilds)
	var wg sync.WaitGroup
	for i, p := range platforms {
		wg.Go(func() {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-slots }()
			out := filepath.Join(dir, strings.ReplaceAll(p.name, "/", "-"))
			bin, err := compile(ctx, pkg, p, out)
			if err != nil {
				cancel(err)
				return
			}
			bins[i] = bin
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); errors.Is(err, context.Canceled) {
		return nil, fmt.Errorf("compile: %w", err)
	} else if err != nil {
		return nil, err
	}
	return bins, nil
}

// compile builds pkg for p as a static, stripped binary at out and
// returns its bytes. The build depends on the source only: no cgo, no
// paths or VCS state in the binary, and the baseline instruction set of
// each architecture whatever the caller's environment says.
func compile(ctx context.Context, pkg string, p platform, out string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+p.goarch,
		"GOARM="+p.goarm, "GOAMD64=v1", "GOARM64=v8.0")
	if b, err := cmd.CombinedOutput(); err != nil {
		if cause := context.Cause(ctx); cause != nil {
			return nil, cause
		}
		return nil, fmt.Errorf("compile: go build %s for %s: %w\n%s", pkg, p.name, err, strings.TrimSpace(string(b)))
	}
	bin, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("compile: %w", err)
	}
	slog.Info("mkimage: built", "platform", p.name, "bytes", len(bin))
	return bin, nil
}
