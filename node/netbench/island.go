package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/isle-cluster/isle/node/island"
)

// islands makes and removes the bench's island with the isle binary.
type islands struct {
	bin, dir string
}

// up runs `isle up` and returns how long it took to return, every Node
// Ready.
func (i *islands) up(ctx context.Context) (time.Duration, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, i.bin, "up", "--dir", i.dir,
		"--servers", strconv.Itoa(servers), "--agents", strconv.Itoa(agents))
	cmd.Stdout, cmd.Stderr = &out, &out
	began := time.Now()
	err := cmd.Run()
	took := time.Since(began)
	switch {
	case err == nil:
		return took, nil
	case ctx.Err() != nil:
		return 0, fmt.Errorf("isle up: %w", ctx.Err())
	case strings.Contains(out.String(), island.ErrRunning.Error()):
		return 0, fmt.Errorf("isle up: %s\nstop that island, or wait for it to end, and run again", strings.TrimSpace(out.String()))
	}
	return 0, fmt.Errorf("isle up: %w:\n%s", err, strings.TrimSpace(out.String()))
}

// down runs `isle down` if the directory holds an island (isle down says
// what it could not remove). It runs after the bench's context has ended
// too.
func (i *islands) down() error {
	if _, err := os.Stat(filepath.Join(i.dir, "island.json")); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, i.bin, "down", "--dir", i.dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("isle down --dir %s: %w:\n%s", i.dir, err, strings.TrimSpace(string(out)))
	}
	slog.Info("isle down", "dir", i.dir)
	return nil
}
