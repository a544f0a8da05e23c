package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/isle-cluster/isle/raft/benchkit"
)

// results are what the bench measured.
type results struct {
	pods      int
	interval  time.Duration
	board     string          // the agent board
	pull      time.Duration   // the first pod's start, pulling the image
	latencies []time.Duration // the pods' starts, image present
	before    memory          // the board's isle with no pods
	with      memory          // with the pods, after the idle time
	idleCPU   float64         // cores the board's isle used while the pods idled
}

// header says what ran.
func (r results) header(w io.Writer) {
	fmt.Fprintf(w, "%d pods (busybox sleep, image present) bound to agent board %s of an island (1 server, 1 agent), created every %v\n",
		r.pods, r.board, r.interval)
}

// table is the report: rows of measure, value, target and verdict.
type table [][4]string

// row adds a measure; with a target it adds the verdict too.
func (t *table) row(measure, value, target string, ok bool) {
	verdict := ""
	if target != "" {
		verdict = benchkit.Verdict(ok)
	}
	*t = append(*t, [4]string{measure, value, target, verdict})
}

// table makes the report's rows.
func (r results) table() table {
	lat := slices.Sorted(slices.Values(r.latencies))
	p99 := pct(lat, 0.99)
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	mib := func(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	var t table
	t.row("pod start, bound → Running, p50", ms(pct(lat, 0.5)), "", true)
	t.row("pod start, bound → Running, p99", ms(p99), "≤ 1s (kubelet SLO 5s)", p99 <= time.Second)
	t.row("pod start, max", ms(lat[len(lat)-1]), "", true)
	t.row("first pod, pulling the image", ms(r.pull), "", true)
	t.row(fmt.Sprintf("agent RSS with %d pods", r.pods), mib(r.with.rss), "≤ 24 MiB (k3s agent ~270 MB)", r.with.rss <= 24<<20)
	t.row("  of which anonymous (heap, stacks)", mib(r.with.anon), "", true)
	t.row("  of which file-backed (the binary)", mib(r.with.file), "", true)
	t.row("agent peak RSS (VmHWM)", mib(r.with.peak), "", true)
	t.row("agent RSS with no pods", mib(r.before.rss), "", true)
	t.row(fmt.Sprintf("agent CPU at idle with %d pods", r.pods), fmt.Sprintf("%.2f%% core", 100*r.idleCPU), "", true)
	return t
}

// pct is the q-quantile of sorted by nearest rank.
func pct(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// write writes t as a markdown table with aligned columns.
func (t table) write(w io.Writer) {
	head := [4]string{"measure", "isle", "target", ""}
	var width [4]int
	for _, r := range append(table{head}, t...) {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	line := func(r [4]string) {
		for i, c := range r {
			fmt.Fprintf(w, "| %-*s ", width[i], c)
		}
		fmt.Fprintln(w, "|")
	}
	line(head)
	for _, n := range width {
		fmt.Fprintf(w, "|%s", strings.Repeat("-", n+2))
	}
	fmt.Fprintln(w, "|")
	for _, r := range t {
		line(r)
	}
}
