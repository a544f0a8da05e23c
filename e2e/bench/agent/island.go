package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/isle-cluster/isle/node/island"
)

// islands makes and removes the bench's island with the isle binary.
type islands struct {
	bin, dir string
	// made: isle up ran for this bench (maybe in part), so down removes
	// what it made.
	made bool
}

// clearLeftover removes an island an earlier run left in the directory
// when none of its processes runs any more; one that runs may be another
// bench's, and is left alone.
func (i *islands) clearLeftover() error {
	st, err := island.Load(i.dir)
	if errors.Is(err, island.ErrNoIsland) {
		return nil
	}
	if err != nil {
		return err
	}
	live := st.Registry.Alive()
	for _, b := range st.Boards {
		live = live || b.Isle.Alive() || b.Containerd.Alive()
	}
	if live {
		return fmt.Errorf("island: an island runs in %s (another agentbench?): wait for it to end, or remove it with isle down --dir %s", i.dir, i.dir)
	}
	slog.Info("removing what an earlier run left", "dir", i.dir)
	i.made = true
	return i.down()
}

// up runs `isle up` with one server and one agent.
func (i *islands) up(ctx context.Context) error {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, i.bin, "up", "--dir", i.dir, "--servers", "1", "--agents", "1")
	cmd.Stdout, cmd.Stderr = &out, &out
	slog.Info("isle up", "dir", i.dir)
	i.made = true
	err := cmd.Run()
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("isle up: %w", ctx.Err())
	case strings.Contains(out.String(), island.ErrRunning.Error()),
		strings.Contains(out.String(), "another isle up, down or board command"):
		i.made = false // refused before it made anything: the island is someone else's
		return fmt.Errorf("isle up: %s\nstop that island, or wait for it to end, and run again", strings.TrimSpace(out.String()))
	}
	return fmt.Errorf("isle up: %w:\n%s", err, strings.TrimSpace(out.String()))
}

// down runs `isle down` if this bench made an island (isle down says what
// it could not remove). It runs after the bench's context has ended too.
func (i *islands) down() error {
	if !i.made {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, i.bin, "down", "--dir", i.dir).CombinedOutput()
	if err != nil && !strings.Contains(string(out), island.ErrNoIsland.Error()) {
		return fmt.Errorf("isle down --dir %s: %w:\n%s", i.dir, err, strings.TrimSpace(string(out)))
	}
	i.made = false
	slog.Info("isle down", "dir", i.dir)
	return nil
}

// tail is the last n lines of the file at path, indented.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "  (" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}
