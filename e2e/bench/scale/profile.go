package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
	"github.com/isle-cluster/isle/e2e/bench/benchkit/isleserver"
)

// selfCPU is the CPU time the bench process (the hollow boards and the
// bench's clients) has used so far.
func selfCPU() (time.Duration, error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, fmt.Errorf("own CPU time: %w", err)
	}
	d, err := benchkit.CPUTime(b)
	if err != nil {
		return 0, fmt.Errorf("own CPU time: %w", err)
	}
	return d, nil
}

// startCPUProfile profiles the bench process into path until stop.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// writeHeapProfile writes the bench process's live heap to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	defer f.Close()
	runtime.GC() // the live heap, not what the last collection saw
	if err := pprof.WriteHeapProfile(f); err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	return nil
}

// writeServerHeaps writes each server's live heap profile into dir, named
// for the server and the size.
func writeServerHeaps(ctx context.Context, servers []*server, dir string, boards, pods int) error {
	for _, s := range servers {
		path := filepath.Join(dir, fmt.Sprintf("%s-%d-%d.heap", s.name, boards, pods))
		if err := isleserver.WriteHeapProfile(ctx, s.adminSocket(), path); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return nil
}
