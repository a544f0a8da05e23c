// Command apibench measures isle's Kubernetes API through the real HTTPS
// path of one real `isle server` process on loopback, with its data
// directory on disk: Pod creates with concurrent writers, GETs of single
// Pods, and LISTs of all Pods as kubectl asks for them (a Table, whole and
// in pages of 500) and as plain JSON; then the server's memory (VmRSS,
// VmHWM, Go heap). It prints markdown tables and the targets to stdout and
// progress to stderr. `make bench-api` runs it:
//
//	go run ./control/apibench -isle out/isle [-pods 1000] [-writers 16] [-keep]
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
	isle    string
	pods    int
	writers int
	gets    int
	readers int
	lists   int
	keep    bool
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("apibench", flag.ContinueOnError)
	fs.StringVar(&o.isle, "isle", "", "path of the isle binary (required)")
	fs.IntVar(&o.pods, "pods", 1000, "Pods to create")
	fs.IntVar(&o.writers, "writers", 16, "concurrent writers for the creates")
	fs.IntVar(&o.gets, "gets", 2000, "GETs of random Pods")
	fs.IntVar(&o.readers, "readers", 4, "concurrent readers for the GETs")
	fs.IntVar(&o.lists, "lists", 100, "LISTs of all Pods, of each kind")
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
	if o.pods < 1 || o.writers < 1 || o.gets < 1 || o.readers < 1 || o.lists < 1 {
		return o, errors.New("flags: -pods, -writers, -gets, -readers and -lists must be positive")
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
		fmt.Fprintln(os.Stderr, "apibench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "apibench:", err)
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
		// The server's log helps only when something broke, not after Ctrl-C.
		srv.teardown(err != nil && ctx.Err() == nil, o.keep)
	}()

	slog.Info("starting isle server", "dir", env.tempDir)
	if err := srv.start(ctx, o.isle); err != nil {
		return err
	}
	api, err := newAdminClient(ctx, o.isle, srv.dataDir(), srv.apiURL())
	if err != nil {
		return err
	}
	defer api.close()
	if err := srv.waitReady(ctx, api); err != nil {
		return err
	}
	env.protocol, err = api.protocol(ctx)
	if err != nil {
		return err
	}

	var res results
	if res.memIdle, err = srv.memory(ctx); err != nil {
		return err
	}
	slog.Info("creating pods", "pods", o.pods, "writers", o.writers)
	created, err := createPods(ctx, api, o.pods, o.writers)
	if err != nil {
		return err
	}
	res.ops = append(res.ops, created.stat)
	if res.memCreated, err = srv.memory(ctx); err != nil {
		return err
	}
	slog.Info("getting pods", "gets", o.gets, "readers", o.readers)
	gets, err := getPods(ctx, api, created.names, o.gets, o.readers)
	if err != nil {
		return err
	}
	res.ops = append(res.ops, gets)
	for _, k := range listKinds {
		slog.Info("listing pods", "kind", k.name, "lists", o.lists)
		st, err := listPods(ctx, api, k, o.lists, len(created.names))
		if err != nil {
			return err
		}
		res.ops = append(res.ops, st)
	}
	if res.memListed, err = srv.memory(ctx); err != nil {
		return err
	}
	printReport(os.Stdout, env, o, res)
	return nil
}
