package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
	"github.com/isle-cluster/isle/e2e/bench/benchkit/isleserver"
)

// Targets isle is held to (README: a server within 64 MiB).
const (
	targetListP99   = 100 * time.Millisecond // LIST of all Pods as a Table
	targetCreates   = 500.0                  // creates/s
	targetRSS       = 64 << 20               // peak RSS, bytes
	targetPodsCount = 1000                   // the Pod count the list target is stated for
)

// results is everything measured.
type results struct {
	protocol                       string   // HTTP protocol the API answered with
	user                           string   // the user impersonated, "" for the administrator
	ops                            []opStat // creates, gets, then one per listKinds entry
	memIdle, memCreated, memListed isleserver.Memory
}

// printReport writes the environment, the operations, the memory and the
// targets as markdown.
func printReport(w io.Writer, env benchkit.Env, o options, r results) {
	who := "admin certificate (system:masters)"
	if r.user != "" {
		who = fmt.Sprintf("admin certificate impersonating %s, whom RBAC authorizes (edit in default) among %d ClusterRoles and %d RoleBindings",
			r.user, policyClusterRoles, policyRoleBindings)
	}
	fmt.Fprintf(w, "## API benchmark: one isle server, HTTPS on loopback\n\n")
	env.WriteMarkdown(w)
	fmt.Fprintf(w, "- client: %s, %s (one shared connection, as kubectl), no compression\n", who, r.protocol)
	fmt.Fprintf(w, "- %d Pods (~%s B of JSON each) created by %d writers; %d GETs of random Pods by %d readers; "+
		"%d LISTs of each kind, one at a time\n\n",
		o.pods, benchkit.Group(float64(r.ops[0].reqBodies)/float64(max(1, r.ops[0].requests))), o.writers, o.gets, o.readers, o.lists)

	fmt.Fprintln(w, "| operation | count | p50 ms | p99 ms | rate/s | answer KiB |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: |")
	for _, s := range r.ops {
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %.1f |\n", s.name, s.count, ms(s.p(0.50)), ms(s.p(0.99)),
			benchkit.Group(s.perSec()), float64(s.bytes)/float64(max(1, s.count))/1024)
	}
	fmt.Fprintln(w, "\nrate/s: creates and GETs, operations per second of wall time at their concurrency; "+
		"LISTs, listings per second of request time (a paged listing's latency is the sum of its pages').")
	for _, s := range r.ops {
		if s.failed > 0 {
			fmt.Fprintf(w, "\n%s: %d of %d failed (first: %v)\n", s.name, s.failed, s.failed+s.count, s.firstErr)
		}
	}

	fmt.Fprintln(w, "\nServer memory (/proc/PID/status; Go heap from its /metrics; live heap: allocated right after a collection, from pprof):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| when | VmRSS MiB | VmHWM MiB | Go heap in use MiB | Go heap from OS MiB | live heap MiB |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: |")
	for _, m := range []struct {
		when string
		s    isleserver.Memory
	}{
		{"ready, empty", r.memIdle},
		{fmt.Sprintf("after %d Pods stored", r.ops[0].count), r.memCreated},
		{"after the GETs and LISTs", r.memListed},
	} {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", m.when, mib(m.s.RSS), mib(m.s.Peak), mib(m.s.HeapInuse), mib(m.s.HeapSys), mib(m.s.Live))
	}

	fmt.Fprintln(w, "\nTargets:")
	fmt.Fprintln(w)
	if o.pods != targetPodsCount {
		fmt.Fprintf(w, "- (the list target is stated for %d Pods; this run stored %d)\n", targetPodsCount, o.pods)
	}
	for _, s := range r.ops {
		if strings.Contains(s.name, "as Table") {
			fmt.Fprintf(w, "- %s, p99 ≤ %s ms: %s (%s ms)\n", s.name, ms(targetListP99),
				benchkit.Verdict(s.count > 0 && s.p(0.99) <= targetListP99), ms(s.p(0.99)))
		}
	}
	c := r.ops[0]
	fmt.Fprintf(w, "- creates ≥ %.0f/s with %d writers: %s (%s/s)\n", targetCreates, o.writers,
		benchkit.Verdict(c.perSec() >= targetCreates && c.failed == 0), benchkit.Group(c.perSec()))
	peak := max(r.memIdle.Peak, r.memCreated.Peak, r.memListed.Peak)
	fmt.Fprintf(w, "- server peak RSS (VmHWM) ≤ %s MiB: %s (%s MiB; %s MiB after the LISTs)\n", mib(targetRSS),
		benchkit.Verdict(peak <= targetRSS), mib(peak), mib(r.memListed.RSS))
}

// printComparison sets the RBAC round beside the administrator's: the
// cost of authorization (target: within 10%).
func printComparison(w io.Writer, admin, user results) {
	fmt.Fprintf(w, "\n## Authorization's cost: %s (RBAC, %d ClusterRoles, %d RoleBindings) against the administrator\n\n",
		user.user, policyClusterRoles, policyRoleBindings)
	fmt.Fprintln(w, "| operation | admin p50 ms | RBAC p50 ms | admin rate/s | RBAC rate/s | RBAC/admin rate |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: |")
	worst := 1.0
	for i := range min(len(admin.ops), len(user.ops)) {
		a, u := admin.ops[i], user.ops[i]
		ratio := u.perSec() / max(a.perSec(), 1e-9)
		worst = min(worst, ratio)
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %.2f |\n", a.name, ms(a.p(0.50)), ms(u.p(0.50)),
			benchkit.Group(a.perSec()), benchkit.Group(u.perSec()), ratio)
	}
	fmt.Fprintf(w, "\n- every operation's rate as the RBAC user ≥ 0.90 of the administrator's: %s (lowest %.2f)\n",
		benchkit.Verdict(worst >= 0.90), worst)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }

func mib(b uint64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }
