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
	rbac    bool
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := o.NewFlagSet("apibench")
	fs.IntVar(&o.pods, "pods", 1000, "Pods to create")
	fs.IntVar(&o.writers, "writers", 16, "concurrent writers for the creates")
	fs.IntVar(&o.gets, "gets", 2000, "GETs of random Pods")
	fs.IntVar(&o.readers, "readers", 4, "concurrent readers for the GETs")
	fs.IntVar(&o.lists, "lists", 100, "LISTs of all Pods, of each kind")
	fs.BoolVar(&o.rbac, "rbac", true, "a second round, on a fresh server, as a user RBAC authorizes with 100 ClusterRoles and 500 RoleBindings stored")
	if err := o.Parse(fs, args); err != nil {
		return o, err
	}
	if o.pods < 1 || o.writers < 1 || o.gets < 1 || o.readers < 1 || o.lists < 1 {
		return o, errors.New("flags: -pods, -writers, -gets, -readers and -lists must be positive")
	}
	return o, nil
}

func main() { benchkit.Main("apibench", parseFlags, run) }

// run runs the benchmark on one server and prints the report; with -rbac
// it runs it again on a fresh server as a user RBAC authorizes, and
// compares the two.
func run(ctx context.Context, o options) error {
	var rounds []results
	for _, asUser := range []bool{false, true}[:1+btoi(o.rbac)] {
		// Name "bench" is in every Pod's spec.nodeName once bound, so it
		// sizes the answers: kept as earlier runs had it, for comparison.
		srv := &isleserver.Server{Name: "bench"}
		err := srv.Run(ctx, o.Flags, "isle-apibench-", func(ctx context.Context, env benchkit.Env) error {
			res, err := measure(ctx, srv, o, asUser)
			if err != nil {
				return err
			}
			printReport(os.Stdout, env, o, res)
			rounds = append(rounds, res)
			return nil
		})
		if err != nil {
			return err
		}
	}
	if len(rounds) == 2 {
		printComparison(os.Stdout, rounds[0], rounds[1])
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// measure connects to the server and runs the creates, GETs and LISTs,
// reading its memory before and after; asUser stores the RBAC policy
// first and makes the requests as benchUser.
func measure(ctx context.Context, srv *isleserver.Server, o options, asUser bool) (results, error) {
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
	if asUser {
		slog.Info("storing the RBAC policy", "clusterroles", policyClusterRoles, "rolebindings", policyRoleBindings)
		if err := storePolicy(ctx, api); err != nil {
			return res, err
		}
		api.impersonate, res.user = benchUser, benchUser
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
