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
//   - anti-affinity: pending pods in groups, each requiring a node without
//     another pod of its group, wait on the loaded cluster for nodes of
//     their own; as many nodes again are created, and the time until every
//     pod is bound gives decisions per second with anti-affinity on every
//     pod (each decision weighs every pod placed);
//   - raft writes per pod, from the server's isle_raft_applied_index.
//
// It prints markdown tables and the targets to stdout and progress to
// stderr. `make bench-scheduler` runs it:
//
//	go run ./e2e/bench/scheduler -isle out/isle [-nodes 100] [-pods 5000] [-replicas 100] [-anti-pods 2000] [-anti-group 50] [-keep]
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
	"fmt"
	"os"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
	"github.com/isle-cluster/isle/e2e/bench/benchkit/isleserver"
)

// options are the command-line flags.
type options struct {
	benchkit.Flags
	nodes     int
	pods      int
	replicas  int
	writers   int
	antiPods  int
	antiGroup int
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := o.NewFlagSet("schedbench")
	fs.IntVar(&o.nodes, "nodes", 100, "Nodes to create")
	fs.IntVar(&o.pods, "pods", 5000, "pending Pods to place")
	fs.IntVar(&o.replicas, "replicas", 100, "replicas of the Deployment")
	fs.IntVar(&o.writers, "writers", 16, "concurrent writers for the creates")
	fs.IntVar(&o.antiPods, "anti-pods", 2000, "pending Pods with required pod anti-affinity to place on the loaded cluster")
	fs.IntVar(&o.antiGroup, "anti-group", 50, "pods per anti-affinity group: no two of a group on one node")
	if err := o.Parse(fs, args); err != nil {
		return o, err
	}
	if o.nodes < 2 || o.pods < 1 || o.replicas < 1 || o.writers < 1 || o.antiPods < 1 || o.antiGroup < 1 {
		return o, errors.New("flags: -nodes must be at least 2; -pods, -replicas, -writers, -anti-pods and -anti-group positive")
	}
	if o.pods+o.replicas > o.nodes*podsPerNode || o.antiPods > o.nodes*podsPerNode {
		return o, fmt.Errorf("flags: %d pods, then %d, do not fit %d nodes of %d pods each", o.pods+o.replicas, o.antiPods, o.nodes, podsPerNode)
	}
	if o.antiGroup > o.nodes {
		return o, fmt.Errorf("flags: -anti-group %d: a group's pods need a node each, and there are %d", o.antiGroup, o.nodes)
	}
	return o, nil
}

func main() { benchkit.Main("schedbench", parseFlags, run) }

// run runs the benchmark on one server and prints the report.
func run(ctx context.Context, o options) error {
	srv := &isleserver.Server{}
	return srv.Run(ctx, o.Flags, "isle-schedbench-", func(ctx context.Context, env benchkit.Env) error {
		c, err := connect(ctx, srv)
		if err != nil {
			return err
		}
		res, err := measure(ctx, srv, c, o)
		if err != nil {
			return err
		}
		printReport(os.Stdout, env, o, res)
		return nil
	})
}
