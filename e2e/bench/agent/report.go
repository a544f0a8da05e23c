package main

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
)

// results are what the bench measured.
type results struct {
	pods      int
	interval  time.Duration
	board     string          // the agent board
	pull      time.Duration   // the first pod's start, pulling the image
	latencies []time.Duration // the pods' starts, image present
	before    benchkit.Memory // the board's isle with no pods
	with      benchkit.Memory // with the pods: the reading of the largest RSS while they idled
	goMem     goMemory        // the Go runtime's account, after the idle time
	idleCPU   float64         // cores the board's isle used while the pods idled
	faults    float64         // minor page faults per second the board's isle took while the pods idled
	usedFile  uint64          // the binary's pages the board's isle used while the pods idled
	mappings  int             // the board's isle's memory mappings (VMAs), after the idle time
	idle      time.Duration   // how long the pods idled
}

// header says what ran.
func (r results) header(w io.Writer) {
	fmt.Fprintf(w, "%d pods (busybox sleep, image present) bound to agent board %s of an island (1 server, 1 agent), created every %v\n",
		r.pods, r.board, r.interval)
}

// table makes the report's rows.
func (r results) table() benchkit.Table {
	lat := slices.Sorted(slices.Values(r.latencies))
	p99 := benchkit.Quantile(lat, 0.99)
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	mib := func(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	var t benchkit.Table
	t.Row("pod start, bound → Running, p50", ms(benchkit.Quantile(lat, 0.5)), "", true)
	t.Row("pod start, bound → Running, p99", ms(p99), "≤ 1s (kubelet SLO 5s)", p99 <= time.Second)
	t.Row("pod start, max", ms(lat[len(lat)-1]), "", true)
	t.Row("first pod, pulling the image", ms(r.pull), "", true)
	t.Row(fmt.Sprintf("agent RSS with %d pods, most in %v idle", r.pods, r.idle), mib(r.with.RSS), "≤ 24 MiB (k3s agent ~270 MB)", r.with.RSS <= 24<<20)
	t.Row("  of which anonymous (RssAnon: heap, stacks)", mib(r.with.Anon), "", true)
	t.Row("    Go heap allocated (live, not yet swept)", mib(r.goMem.heapAlloc), "", true)
	t.Row("    Go heap live (at the last GC)", mib(r.goMem.live), "", true)
	t.Row("    Go heap in use (spans)", mib(r.goMem.heapInuse), "", true)
	t.Row("    Go heap goal (next GC)", mib(r.goMem.goal), "", true)
	t.Row(fmt.Sprintf("    Go stacks (%d goroutines)", r.goMem.routines), mib(r.goMem.stacks), "", true)
	t.Row("  of which file-backed (RssFile: the binary)", mib(r.with.File), "", true)
	t.Row(fmt.Sprintf("    of which used in %v at idle", r.idle), mib(r.usedFile), "", true)
	t.Row("  memory mappings (VMAs, ~200 B kernel each)", fmt.Sprint(r.mappings), "", true)
	t.Row(fmt.Sprintf("agent PSS with %d pods", r.pods), mib(r.with.PSS), "", true)
	t.Row("agent peak RSS (VmHWM)", mib(r.with.Peak), "", true)
	t.Row("agent RSS with no pods", mib(r.before.RSS), "", true)
	t.Row(fmt.Sprintf("agent CPU at idle with %d pods", r.pods), fmt.Sprintf("%.2f%% core", 100*r.idleCPU), "", true)
	t.Row("agent minor page faults at idle", fmt.Sprintf("%.0f/s", r.faults), "", true)
	return t
}
