package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
)

func TestReport(t *testing.T) {
	board := pathResult{name: "board", gbits: []float64{10, 12, 11}, rtts: rtts(100, 30*time.Microsecond)}
	pod := pathResult{name: "pod", gbits: []float64{8, 10, 9}, rtts: rtts(100, 45*time.Microsecond)}
	var b strings.Builder
	report([]float64{12.5, 25, 13}, []pathResult{pod, board}, nil).Write(&b)
	want := `| measure                                    | isle         | target |        |
|--------------------------------------------|--------------|--------|--------|
| isle up, 3 servers + 2 agents, median      | 13.0 s       | ≤ 20 s | holds  |
| isle up, max                               | 25.0 s       |        |        |
| TCP throughput pod → pod, median           | 9.00 Gbit/s  |        |        |
| TCP throughput board → board (LAN), median | 11.00 Gbit/s |        |        |
|   pod / board                              | 0.82x        | ≥ 0.9x | MISSED |
| TCP round trip pod → pod, p50              | 45µs         |        |        |
| TCP round trip board → board, p50          | 30µs         |        |        |
|   pod / board, p50                         | 1.50x        |        |        |
| TCP round trip pod → pod, p99              | 45µs         |        |        |
| TCP round trip board → board, p99          | 30µs         |        |        |
|   pod / board, p99                         | 1.50x        |        |        |
`
	if b.String() != want {
		t.Errorf("report:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestReportWithoutPods(t *testing.T) {
	board := pathResult{name: "board", gbits: []float64{10}, rtts: rtts(10, time.Millisecond)}
	var b strings.Builder
	report([]float64{5}, []pathResult{board}, errors.New("no pod network")).Write(&b)
	out := b.String()
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "| n/a") {
			n++
		}
	}
	if n != 6 {
		t.Errorf("%d pod rows n/a, want 6:\n%s", n, out)
	}
	if !strings.Contains(out, "≥ 0.9x | n/a") {
		t.Errorf("the throughput target is not n/a:\n%s", out)
	}
	if !strings.Contains(out, "10.00 Gbit/s") || !strings.Contains(out, "holds") {
		t.Errorf("the board rows or the isle up verdict are missing:\n%s", out)
	}
}

func TestStats(t *testing.T) {
	ds := make([]time.Duration, 100)
	for i := range ds {
		ds[i] = time.Duration(100-i) * time.Millisecond // 100ms down to 1ms
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}, {0, time.Millisecond}} {
		if got := benchkit.Quantile(ds, c.q); got != c.want {
			t.Errorf("quantile %v = %v, want %v", c.q, got, c.want)
		}
	}
	if ds[0] != 100*time.Millisecond {
		t.Error("quantile sorted its argument")
	}
}

// rtts is n round trips of about d.
func rtts(n int, d time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}
