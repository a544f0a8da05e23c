// Command trafficbench is `make bench-traffic`: what Service traffic costs
// on an island of one server and two agents (node/proxy, node/dns and
// node/ingress in every board's agent).
//
// It starts one hello replica on agent pi3 behind a ClusterIP Service and
// an Ingress, and from agent pi2's own network namespace sends HTTP/1.1
// GET /hello over -conns keep-alive connections, each one request at a
// time, by three paths: to the pod IP (the baseline), to the cluster IP,
// and to pi2's own ingress controller. The paths take turns, -trials
// rounds of -duration each, so that noise hits all alike; the report gives
// the medians over the rounds of requests/s and of the p50 and p99
// latencies, the median of each round's ratio of a path's requests/s to
// the baseline's (the two ran back to back), and the CPU time pi2's isle
// spent per request through its ingress controller. Then -dns-clients
// clients query the cluster DNS for the Service's A record from pi2.
// Before the island, it times the Service rules' Syncs for a Service of
// 100 endpoints (one endpoint replaced, and the whole table written), in
// a network namespace of its own. Whatever happens, the island is removed
// at the end (also on SIGINT or SIGTERM).
//
// Targets: requests/s through the cluster IP at least 0.95 of the pod
// IP's, through the Ingress at least 0.6; every answer a 200 with the
// hello body, every DNS answer the Service's address.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
	"github.com/isle-cluster/isle/e2e/bench/islandbench"
	"github.com/isle-cluster/isle/node/island"
)

// The island: pi1 the server, pi2 and pi3 agents. The client runs in
// pi2's namespace, the hello replica on pi3.
const (
	servers, agents         = 1, 2
	clientBoard, helloBoard = "pi2", "pi3"
)

// options are trafficbench's command line.
type options struct {
	isle       string        // -isle: the isle binary
	dir        string        // -dir: the island's directory, absolute
	trials     int           // -trials: rounds of every path, and DNS runs
	duration   time.Duration // -duration: one round of one path, one DNS run
	conns      int           // -conns: HTTP connections
	dnsClients int           // -dns-clients: concurrent DNS clients
}

// maxClients bounds -conns and -dns-clients: more would measure the
// bench's own two CPUs.
const maxClients = 1024

func main() {
	benchkit.Main("trafficbench", parse, run)
}

func parse(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("trafficbench", flag.ContinueOnError)
	fs.StringVar(&o.isle, "isle", "out/isle", "the isle binary")
	fs.StringVar(&o.dir, "dir", "/tmp/isle-trafficbench", "the island's directory (removed at the end)")
	fs.IntVar(&o.trials, "trials", 5, "rounds of HTTP load over every path, and DNS runs")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "how long one round of one path, or one DNS run, lasts")
	fs.IntVar(&o.conns, "conns", 16, "HTTP keep-alive connections, each sending one request at a time")
	fs.IntVar(&o.dnsClients, "dns-clients", 8, "DNS clients, each sending one query at a time")
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
	case o.conns < 1 || o.conns > maxClients:
		return o, fmt.Errorf("flags: -conns %d: want 1 to %d", o.conns, maxClients)
	case o.dnsClients < 1 || o.dnsClients > maxClients:
		return o, fmt.Errorf("flags: -dns-clients %d: want 1 to %d", o.dnsClients, maxClients)
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
	if err := islandbench.Preflight(ctx, o.isle, o.dir, "bench-traffic"); err != nil {
		return err
	}

	var res results
	res.conns, res.dnsClients = o.conns, o.dnsClients
	if res.rules, err = measureRules(ctx); err != nil {
		return err
	}

	isl := &islandbench.Island{Bin: o.isle, Dir: o.dir, Servers: servers, Agents: agents}
	if err := isl.Down(); err != nil { // what an earlier run left
		return err
	}
	defer func() { err = errors.Join(err, isl.Down()) }()
	if _, err := isl.Up(ctx); err != nil {
		return err
	}
	st, err := island.Load(o.dir)
	if err != nil {
		return err
	}
	a, err := startApp(ctx, st)
	if err != nil {
		return err
	}
	if res.paths, err = measureHTTP(ctx, append(a.paths(), a.policyPath(st)), o.trials, o.conns, o.duration); err != nil {
		return err
	}
	if res.dns, err = measureDNS(ctx, a, o.trials, o.dnsClients, o.duration); err != nil {
		return err
	}
	fmt.Printf("\nisland of %d server and %d agents; hello on %s (pod %s); clients in %s's namespace; the Ingress is %s's own controller (%s:80)\n",
		servers, agents, helloBoard, a.podIP, clientBoard, clientBoard, a.ingressAddr)
	fmt.Printf("HTTP: %d rounds of %v per path; DNS: %d runs of %v; Service rules: %d Syncs replacing an endpoint, %d whole-table Syncs, in a namespace of the bench's\n\n",
		o.trials, o.duration, o.trials, o.duration, len(res.rules.change), len(res.rules.rewrite))
	report(res).Write(os.Stdout)
	return res.failures()
}
