// Command netbench is `make bench-network`: how long `isle up` takes to
// make an island of three servers and two agents, and what the pod
// network costs against the island's LAN.
//
// It runs `isle up` -trials times (`isle down` between) and keeps the last
// island. On it, it starts two hello pods, one on agent pi4 and one on
// agent pi5, and measures TCP between them from the bench process itself:
// it listens inside the server pod's network namespace and dials from the
// client pod's, so the pods need no tools. The same measurements between
// the two boards' own namespaces, over the LAN bridge, are the baseline;
// pod and board runs alternate so that noise hits both alike. Whatever
// happens, the island is removed at the end (also on SIGINT or SIGTERM).
//
// Targets: `isle up` in at most 20 s; pod-to-pod throughput at least 0.9
// of the boards'.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
	"github.com/isle-cluster/isle/e2e/bench/islandbench"
	"github.com/isle-cluster/isle/node/island"
)

// The island the bench makes: pi1..pi3 servers, pi4 and pi5 agents. The
// client runs on pi4, the server on pi5.
const (
	servers, agents          = 3, 2
	clientBoard, serverBoard = "pi4", "pi5"
)

// options are netbench's command line.
type options struct {
	isle     string        // -isle: the isle binary
	dir      string        // -dir: the island's directory, absolute
	trials   int           // -trials: isle up runs, and throughput runs each way
	duration time.Duration // -duration: one throughput run
}

func main() {
	benchkit.Main("netbench", parse, run)
}

func parse(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("netbench", flag.ContinueOnError)
	fs.StringVar(&o.isle, "isle", "out/isle", "the isle binary")
	fs.StringVar(&o.dir, "dir", "/tmp/isle-netbench", "the island's directory (removed at the end)")
	fs.IntVar(&o.trials, "trials", 5, "isle up runs, and throughput runs of pods and of boards")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "how long one throughput run sends")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("flags: unexpected arguments %q", fs.Args())
	case o.trials < 1:
		return o, fmt.Errorf("flags: -trials %d: want at least 1", o.trials)
	case o.duration < 100*time.Millisecond:
		return o, fmt.Errorf("flags: -duration %v: want at least 100ms", o.duration)
	case o.dir == "":
		return o, errors.New("flags: -dir: want a directory")
	}
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return o, fmt.Errorf("flags: -dir %q: %w", o.dir, err)
	}
	o.dir = dir
	return o, nil
}

func run(ctx context.Context, o options) (err error) {
	if err := islandbench.Preflight(ctx, o.isle, o.dir, "bench-network"); err != nil {
		return err
	}

	isl := &islandbench.Island{Bin: o.isle, Dir: o.dir, Servers: servers, Agents: agents}
	if err := isl.Down(); err != nil { // what an earlier run left
		return err
	}
	defer func() { err = errors.Join(err, isl.Down()) }()

	var ups []float64
	for i := range o.trials {
		if i > 0 {
			if err := isl.Down(); err != nil {
				return err
			}
		}
		took, err := isl.Up(ctx)
		if err != nil {
			return err
		}
		slog.Info("isle up", "trial", i+1, "took", took.Round(time.Millisecond))
		ups = append(ups, took.Seconds())
	}

	st, err := island.Load(o.dir)
	if err != nil {
		return err
	}
	bp, err := boardPair(st)
	if err != nil {
		return err
	}
	paths := []pathPair{bp}
	pp, podErr := startPods(ctx, st, "linux/"+runtime.GOARCH)
	if podErr == nil {
		paths = append([]pathPair{pp}, paths...)
	} else if ctx.Err() != nil {
		return podErr
	}
	res, err := measure(ctx, paths, o.trials, o.duration)
	if err != nil {
		return err
	}
	fmt.Printf("\nisland of %d servers and %d agents; TCP from %s to %s: %d throughput runs of %v each way, %d round trips each way\n\n",
		servers, agents, clientBoard, serverBoard, o.trials, o.duration, roundTrips)
	report(ups, res, podErr).Write(os.Stdout)
	return podErr
}
