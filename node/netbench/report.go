package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/isle-cluster/isle/raft/benchkit"
)

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

// missing adds a measure that could not be taken.
func (t *table) missing(measure, target string) {
	verdict := ""
	if target != "" {
		verdict = "n/a"
	}
	*t = append(*t, [4]string{measure, "n/a", target, verdict})
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

// report makes the table from the isle up times (seconds) and the paths'
// results; without a pod path (podErr says why) its rows are n/a.
func report(ups []float64, paths []pathResult, podErr error) table {
	var t table
	up := median(ups)
	t.row(fmt.Sprintf("isle up, %d servers + %d agents, median", servers, agents), fmt.Sprintf("%.1f s", up), "≤ 20 s", up <= 20)
	t.row("isle up, max", fmt.Sprintf("%.1f s", slices.Max(ups)), "", true)

	var pod, board *pathResult
	for i := range paths {
		switch paths[i].name {
		case "pod":
			pod = &paths[i]
		case "board":
			board = &paths[i]
		}
	}
	gbit := func(g float64) string { return fmt.Sprintf("%.2f Gbit/s", g) }
	rtt := func(d time.Duration) string { return d.Round(time.Microsecond).String() }
	ratio := func(a, b float64) string { return fmt.Sprintf("%.2fx", a/b) }
	podRow := func(measure, target string, value func() (string, bool)) {
		if pod == nil || podErr != nil {
			t.missing(measure, target)
			return
		}
		v, ok := value()
		t.row(measure, v, target, ok)
	}
	podRow("TCP throughput pod → pod, median", "", func() (string, bool) { return gbit(median(pod.gbits)), true })
	t.row("TCP throughput board → board (LAN), median", gbit(median(board.gbits)), "", true)
	podRow("  pod / board", "≥ 0.9x", func() (string, bool) {
		p, b := median(pod.gbits), median(board.gbits)
		return ratio(p, b), p/b >= 0.9
	})
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", 0.5}, {"p99", 0.99}} {
		podRow("TCP round trip pod → pod, "+q.name, "", func() (string, bool) { return rtt(quantile(pod.rtts, q.q)), true })
		t.row("TCP round trip board → board, "+q.name, rtt(quantile(board.rtts, q.q)), "", true)
		podRow("  pod / board, "+q.name, "", func() (string, bool) {
			return ratio(float64(quantile(pod.rtts, q.q)), float64(quantile(board.rtts, q.q))), true
		})
	}
	return t
}

// median is the middle of xs (the mean of the two middle ones for an even
// count); xs is not changed.
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// quantile is the q-quantile of ds by nearest rank; ds is not changed.
func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}
