package islandbench

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

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
	"github.com/isle-cluster/isle/node/island"
)

// Island makes and removes a bench's island with the isle binary.
type Island struct {
	Bin string // the isle binary
	Dir string // the island's directory (isle up --dir)
	// Servers and Agents are the boards isle up makes: pi1.. the servers,
	// then the agents.
	Servers, Agents int
	// Mirrors are registry hosts the boards pull from the island's
	// registry (isle up --mirror).
	Mirrors []string
}

// Up runs `isle up` and returns how long it took to return, every Node
// Ready.
func (i *Island) Up(ctx context.Context) (time.Duration, error) {
	var out bytes.Buffer
	args := []string{"up", "--dir", i.Dir, "--servers", strconv.Itoa(i.Servers), "--agents", strconv.Itoa(i.Agents)}
	for _, m := range i.Mirrors {
		args = append(args, "--mirror", m)
	}
	cmd := exec.CommandContext(ctx, i.Bin, args...)
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

// Down runs `isle down` if the directory holds an island (isle down says
// what it could not remove). It runs after the bench's context has ended
// too.
func (i *Island) Down() error {
	if _, err := os.Stat(filepath.Join(i.Dir, "island.json")); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, i.Bin, "down", "--dir", i.Dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("isle down --dir %s: %w:\n%s", i.Dir, err, strings.TrimSpace(string(out)))
	}
	slog.Info("isle down", "dir", i.Dir)
	return nil
}

// Preflight checks what an island bench needs (root, kubectl and go in
// PATH, the isle binary) and prints the machine line every bench starts
// with. target names the make target, for the root message.
func Preflight(ctx context.Context, isle, dir, target string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("makes an island of network namespaces: run as root (make %s)", target)
	}
	for _, tool := range []string{"kubectl", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("needs %s in PATH (kubectl talks to the island, go builds the hello image)", tool)
		}
	}
	version, err := benchkit.FirstLine(ctx, isle, "version")
	if err != nil {
		return fmt.Errorf("isle binary %s: %w: run make build", isle, err)
	}
	m := benchkit.ReadMachine()
	fmt.Printf("machine: %d CPUs (%s), kernel %s; %s; island in %s\n", m.CPUs, m.CPUModel, m.Kernel, version, dir)
	return nil
}
