// Command schedbench measures isle's scheduler through one real `isle
// server` process on loopback, with its data directory on disk, driven
// through its Kubernetes API:
//
//   - placement: pending pods (half of them selecting kubernetes.io/arch
//     arm64) wait on a cluster without the benchmark's nodes (the server's
//     own node is not for them); then the nodes (Node objects with a Ready
//     status, half arm64, half arm: there are no node agents) are created,
//     and the time until every pod is bound gives placement decisions per
//     second;
//   - a Deployment: the time from its create to all its pods bound;
//   - raft writes per pod, from the server's isle_raft_applied_index.
//
// It prints markdown tables and the targets to stdout and progress to
// stderr. `make bench-scheduler` runs it:
//
//	go run ./control/scheduler/schedbench -isle out/isle [-nodes 100] [-pods 5000] [-replicas 100] [-keep]
//
// Nodes without a live board are marked NotReady by the node lifecycle
// controller once its grace period (40 s) has passed; the run creates its
// nodes last and reports any that were marked before it ended.
//
// It is a benchmark, not a test: it fails only when it cannot measure.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// options are the command-line flags.
type options struct {
	isle     string
	nodes    int
	pods     int
	replicas int
	writers  int
	keep     bool
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("schedbench", flag.ContinueOnError)
	fs.StringVar(&o.isle, "isle", "", "path of the isle binary (required)")
	fs.IntVar(&o.nodes, "nodes", 100, "Nodes to create")
	fs.IntVar(&o.pods, "pods", 5000, "pending Pods to place")
	fs.IntVar(&o.replicas, "replicas", 100, "replicas of the Deployment")
	fs.IntVar(&o.writers, "writers", 16, "concurrent writers for the creates")
	fs.BoolVar(&o.keep, "keep", false, "keep the data directory and the server's log")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("flags: unexpected arguments %q", fs.Args())
	}
	if o.isle == "" {
		return o, errors.New("flags: -isle PATH is required (make build puts it in out/isle)")
	}
	if o.nodes < 2 || o.pods < 1 || o.replicas < 1 || o.writers < 1 {
		return o, errors.New("flags: -nodes must be at least 2; -pods, -replicas and -writers positive")
	}
	if o.pods+o.replicas > o.nodes*podsPerNode {
		return o, fmt.Errorf("flags: %d pods do not fit %d nodes of %d pods each", o.pods+o.replicas, o.nodes, podsPerNode)
	}
	return o, nil
}

func main() {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	o, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "schedbench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "schedbench:", err)
		os.Exit(1)
	}
}

// run starts the server, measures, prints, and always tears down.
func run(ctx context.Context, o options) (err error) {
	if _, err := os.Stat(o.isle); err != nil {
		return fmt.Errorf("isle binary %s: %w: run make build", o.isle, err)
	}
	env, err := probeEnvironment(ctx, o.isle)
	if err != nil {
		return err
	}
	srv := &server{dir: env.tempDir}
	defer func() {
		if ctx.Err() != nil {
			err = errors.New("interrupted: stopped the server")
		}
		srv.teardown(err != nil && ctx.Err() == nil, o.keep)
	}()

	slog.Info("starting isle server", "dir", env.tempDir)
	if err := srv.start(ctx, o.isle); err != nil {
		return err
	}
	c, err := newClient(ctx, o.isle, srv.dataDir(), srv.apiURL())
	if err != nil {
		return err
	}
	if err := srv.waitReady(ctx, c); err != nil {
		return err
	}
	res, err := measure(ctx, srv, c, o)
	if err != nil {
		return err
	}
	printReport(os.Stdout, env, o, res)
	return nil
}
