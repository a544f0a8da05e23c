package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
	"github.com/isle-cluster/isle/e2e/bench/islandbench"
)

// report makes the table from the isle up times (seconds) and the paths'
// results; without a pod path (podErr says why) its rows are n/a.
func report(ups []float64, paths []pathResult, podErr error) benchkit.Table {
	var t benchkit.Table
	up := islandbench.Median(ups)
	t.Row(fmt.Sprintf("isle up, %d servers + %d agents, median", servers, agents), fmt.Sprintf("%.1f s", up), "≤ 20 s", up <= 20)
	t.Row("isle up, max", fmt.Sprintf("%.1f s", slices.Max(ups)), "", true)

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
			t.Missing(measure, target)
			return
		}
		v, ok := value()
		t.Row(measure, v, target, ok)
	}
	podRow("TCP throughput pod → pod, median", "", func() (string, bool) { return gbit(islandbench.Median(pod.gbits)), true })
	t.Row("TCP throughput board → board (LAN), median", gbit(islandbench.Median(board.gbits)), "", true)
	podRow("  pod / board", "≥ 0.9x", func() (string, bool) {
		p, b := islandbench.Median(pod.gbits), islandbench.Median(board.gbits)
		return ratio(p, b), p/b >= 0.9
	})
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", 0.5}, {"p99", 0.99}} {
		podRow("TCP round trip pod → pod, "+q.name, "", func() (string, bool) { return rtt(benchkit.Quantile(pod.rtts, q.q)), true })
		t.Row("TCP round trip board → board, "+q.name, rtt(benchkit.Quantile(board.rtts, q.q)), "", true)
		podRow("  pod / board, "+q.name, "", func() (string, bool) {
			return ratio(float64(benchkit.Quantile(pod.rtts, q.q)), float64(benchkit.Quantile(board.rtts, q.q))), true
		})
	}
	return t
}
