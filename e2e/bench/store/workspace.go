package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
)

// workspace owns the temporary directory and every process started in it,
// so that one teardown stops them all, on success, failure or Ctrl-C.
type workspace struct {
	dir   string
	mu    sync.Mutex
	procs []*benchkit.Proc
}

func newWorkspace(dir string) *workspace { return &workspace{dir: dir} }

// start runs bin with args and environment env, its output going to
// NAME.log in the workspace.
func (ws *workspace) start(name string, env []string, bin string, args ...string) (*benchkit.Proc, error) {
	p, err := benchkit.StartProcEnv(name, filepath.Join(ws.dir, name+".log"), env, bin, args...)
	if err != nil {
		return nil, err
	}
	ws.mu.Lock()
	ws.procs = append(ws.procs, p)
	ws.mu.Unlock()
	slog.Debug("started", "member", name, "pid", p.Pid(), "args", args)
	return p, nil
}

// stopGrace is how long a member may take to stop before it is killed:
// the data is thrown away, so there is no point in waiting long.
const stopGrace = 2 * time.Second

// teardown stops every process, shows logs after a failure, and removes
// the directory unless keep.
func (ws *workspace) teardown(failed, keep bool) {
	ws.mu.Lock()
	procs := ws.procs
	ws.procs = nil
	ws.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(func() { p.Stop(stopGrace) })
	}
	wg.Wait()
	if failed {
		for _, p := range procs {
			fmt.Fprintf(os.Stderr, "--- %s log (tail) ---\n%s\n", p.Name(), p.Tail(10))
		}
	}
	if keep {
		slog.Info("kept data directories and logs", "dir", ws.dir)
		return
	}
	if err := os.RemoveAll(ws.dir); err != nil {
		slog.Warn("remove temporary directory", "dir", ws.dir, "err", err)
	}
}
