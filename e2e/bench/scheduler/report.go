package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
)

// Targets the scheduler is held to.
const (
	targetDecisions = 1000.0          // placement decisions per second, 100 nodes
	targetAnti      = 500.0           // the same with required anti-affinity on every pod
	targetDeploy    = 2 * time.Second // Deployment create to all pods bound
)

// printReport writes the environment, the measurements and the targets as
// markdown.
func printReport(w io.Writer, env benchkit.Env, o options, r results) {
	fmt.Fprintf(w, "## Scheduler benchmark: one isle server, HTTPS on loopback\n\n")
	env.WriteMarkdown(w)
	fmt.Fprintf(w, "- %d Nodes (Node objects with a Ready status, no agents; half arm64 with 8 GiB, half arm with 1 GiB, "+
		"4 CPUs and %d pods each); Pods request 10m CPU and 16 MiB and select those Nodes (not the server's own), "+
		"every other pending one selects arm64 too; "+
		"creates from %d writers through client-go\n\n", o.nodes, podsPerNode, o.writers)

	fmt.Fprintln(w, "| step | count | time s | rate/s | raft writes per pod |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: |")
	fmt.Fprintf(w, "| create pending Pods (each tried: no node of theirs) | %d | %.2f | %s | |\n", r.pods.count, r.pods.elapsed.Seconds(), benchkit.Group(r.pods.perSec()))
	fmt.Fprintf(w, "| create Nodes | %d | %.2f | %s | |\n", r.nodes.count, r.nodes.elapsed.Seconds(), benchkit.Group(r.nodes.perSec()))
	p := r.placement
	fmt.Fprintf(w, "| place the pending Pods (first Node create → last Pod bound) | %d | %.2f | %s | %.2f |\n",
		p.pods, p.elapsed.Seconds(), benchkit.Group(float64(p.pods)/p.elapsed.Seconds()), p.writes/float64(max(1, p.pods)))
	d := r.deploy
	fmt.Fprintf(w, "| Deployment of %d replicas (create → last Pod bound) | %d | %.2f | %s | %.2f |\n",
		d.replicas, d.replicas, d.elapsed.Seconds(), benchkit.Group(float64(d.replicas)/d.elapsed.Seconds()), d.writes/float64(d.replicas))
	a := r.anti
	fmt.Fprintf(w, "| create pending Pods with anti-affinity (groups of %d) | %d | %.2f | %s | |\n", o.antiGroup, r.antiPods.count,
		r.antiPods.elapsed.Seconds(), benchkit.Group(r.antiPods.perSec()))
	fmt.Fprintf(w, "| place them on %d new Nodes of the loaded cluster (first Node create → last Pod bound) | %d | %.2f | %s | |\n", o.nodes,
		a.pods, a.elapsed.Seconds(), benchkit.Group(float64(a.pods)/a.elapsed.Seconds()))
	fmt.Fprintln(w, "\nraft writes per pod: entries the server applied (isle_raft_applied_index) from the start of the step "+
		"until it went quiet, divided by its pods; placement: binds, Scheduled Events and the status writes of pods "+
		"tried while few Nodes existed (the Node creates excluded); Deployment: the pod creates and binds, their Events, "+
		"the ReplicaSet and Deployment writes.")

	fmt.Fprintln(w, "\nChecks:")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "- pods per node: %d to %d; pods selecting arm64 bound to arm nodes: %d\n", p.minPerNode, p.maxPerNode, p.wrongArch)
	fmt.Fprintf(w, "- anti-affinity pods beside another of their group: %d\n", a.groupClash)
	fmt.Fprintf(w, "- scheduling attempts: %s\n", attemptsLine(r.attempts))
	fmt.Fprintf(w, "- Events dropped (a writer's queue full): %.0f\n", r.eventsDropped)
	fmt.Fprintf(w, "- Nodes not Ready at the end, %.0f s after they were created: %d of %d\n", r.nodesAge.Seconds(), r.notReady, r.nodes.count)
	for _, b := range []struct {
		what string
		b    batch
	}{{"pod creates", r.pods}, {"node creates", r.nodes}, {"anti-affinity pod creates", r.antiPods}} {
		if b.b.failed > 0 {
			fmt.Fprintf(w, "- %s: %d failed (first: %v)\n", b.what, b.b.failed, b.b.firstErr)
		}
	}

	fmt.Fprintln(w, "\nTargets:")
	fmt.Fprintln(w)
	rate := float64(p.pods) / p.elapsed.Seconds()
	fmt.Fprintf(w, "- placement ≥ %s decisions/s with %d nodes: %s (%s/s)\n", benchkit.Group(targetDecisions), o.nodes,
		benchkit.Verdict(rate >= targetDecisions && p.pods == r.pods.count && p.wrongArch == 0), benchkit.Group(rate))
	antiRate := float64(a.pods) / a.elapsed.Seconds()
	fmt.Fprintf(w, "- placement with required anti-affinity on every pod ≥ %s decisions/s: %s (%s/s)\n", benchkit.Group(targetAnti),
		benchkit.Verdict(antiRate >= targetAnti && a.pods == r.antiPods.count && a.groupClash == 0), benchkit.Group(antiRate))
	fmt.Fprintf(w, "- Deployment of %d replicas bound within %v: %s (%.2f s)\n", d.replicas, targetDeploy,
		benchkit.Verdict(d.elapsed <= targetDeploy), d.elapsed.Seconds())
}

func attemptsLine(a map[string]float64) string {
	var parts []string
	for _, result := range []string{"scheduled", "unschedulable", "error"} {
		parts = append(parts, fmt.Sprintf("%s %s", benchkit.Group(a[result]), result))
	}
	return strings.Join(parts, ", ")
}
