// Command apibench measures isle's Kubernetes API through the real HTTPS
// path of one real `isle server` process on loopback, with its data
// directory on disk: Pod creates with concurrent writers, GETs of single
// Pods, and LISTs of all Pods as kubectl asks for them (a Table, whole and
// in pages of 500) and as plain JSON; then the server's memory (VmRSS,
// VmHWM, Go heap). It prints markdown tables and the targets to stdout and
// progress to stderr. `make bench-api` runs it:
//
//	go run ./e2e/bench/api -isle out/isle [-pods 1000] [-writers 16] [-keep]
//
// It is a benchmark, not a test: it fails only when it cannot measure.
package main

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
	"github.com/isle-cluster/isle/e2e/bench/benchkit/isleserver"
)

// options are the command-line flags.
type options struct {
	benchkit.Flags
	pods    int
	writers int
	gets    int
	readers int
	lists   int
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := o.NewFlagSet("apibench")
	fs.IntVar(&o.pods, "pods", 1000, "Pods to create")
	fs.IntVar(&o.writers, "writers", 16, "concurrent writers for the creates")
	fs.IntVar(&o.gets, "gets", 2000, "GETs of random Pods")
	fs.IntVar(&o.readers, "readers", 4, "concurrent readers for the GETs")
	fs.IntVar(&o.lists, "lists", 100, "LISTs of all Pods, of each kind")
	if err := o.Parse(fs, args); err != nil {
		return o, err
	}
	if o.pods < 1 || o.writers < 1 || o.gets < 1 || o.readers < 1 || o.lists < 1 {
		return o, errors.New("flags: -pods, -writers, -gets, -readers and -lists must be positive")
	}
	return o, nil
}

func main() { benchkit.Main("apibench", parseFlags, run) }

// run runs the benchmark on one server and prints the report.
func run(ctx context.Context, o options) error {
	// Name "bench" is in every Pod's spec.nodeName once bound, so it sizes
	// the answers: kept as earlier runs had it, for comparison.
	srv := &isleserver.Server{Name: "bench"}
	return srv.Run(ctx, o.Flags, "isle-apibench-", func(ctx context.Context, env benchkit.Env) error {
		res, err := measure(ctx, srv, o)
		if err != nil {
			return err
		}
		printReport(os.Stdout, env, o, res)
		return nil
	})
}

// measure connects to the server and runs the creates, GETs and LISTs,
// reading its memory before and after.
func measure(ctx context.Context, srv *isleserver.Server, o options) (results, error) {
	var res results
	cfg, err := srv.RESTConfig(ctx)
	if err != nil {
		return res, err
	}
	api, err := newAdminClient(cfg)
	if err != nil {
		return res, err
	}
	defer api.close()
	if err := srv.WaitReady(ctx, api.http); err != nil {
		return res, err
	}

	if res.protocol, err = api.protocol(ctx); err != nil {
		return res, err
	}
	if res.memIdle, err = srv.Memory(ctx); err != nil {
		return res, err
	}
	slog.Info("creating pods", "pods", o.pods, "writers", o.writers)
	created, err := createPods(ctx, api, o.pods, o.writers)
	if err != nil {
		return res, err
	}
	res.ops = append(res.ops, created.stat)
	if res.memCreated, err = srv.Memory(ctx); err != nil {
		return res, err
	}
	slog.Info("getting pods", "gets", o.gets, "readers", o.readers)
	gets, err := getPods(ctx, api, created.names, o.gets, o.readers)
	if err != nil {
		return res, err
	}
	res.ops = append(res.ops, gets)
	for _, k := range listKinds {
		slog.Info("listing pods", "kind", k.name, "lists", o.lists)
		st, err := listPods(ctx, api, k, o.lists, len(created.names))
		if err != nil {
			return res, err
		}
		res.ops = append(res.ops, st)
	}
	if res.memListed, err = srv.Memory(ctx); err != nil {
		return res, err
	}
	return res, nil
}
