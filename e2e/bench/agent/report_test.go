package main

import (
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
)

func TestReport(t *testing.T) {
	var lat []time.Duration
	for i := 50; i >= 1; i-- { // unsorted: the report sorts
		lat = append(lat, time.Duration(i)*25*time.Millisecond)
	}
	r := results{pods: 50, interval: 200 * time.Millisecond, board: "pi2", pull: 1234567 * time.Microsecond, latencies: lat,
		before:  benchkit.Memory{RSS: 15 << 20},
		with:    benchkit.Memory{RSS: 25 << 20, Peak: 26 << 20, Anon: 10 << 20, File: 15 << 20, PSS: 20 << 20},
		goMem:   goMemory{heapAlloc: 5 << 20, live: 4 << 20, heapInuse: 6 << 20, goal: 9 << 20, stacks: 1 << 20, routines: 245},
		idleCPU: 0.0123, faults: 41.6, usedFile: 6 << 20, mappings: 2600, idle: time.Minute}
	var b strings.Builder
	r.table().Write(&b)
	want := `| measure                                      | isle       | target                       |        |
|----------------------------------------------|------------|------------------------------|--------|
| pod start, bound → Running, p50              | 625ms      |                              |        |
| pod start, bound → Running, p99              | 1.25s      | ≤ 1s (kubelet SLO 5s)        | MISSED |
| pod start, max                               | 1.25s      |                              |        |
| first pod, pulling the image                 | 1.235s     |                              |        |
| agent RSS with 50 pods, most in 1m0s idle    | 25.0 MiB   | ≤ 24 MiB (k3s agent ~270 MB) | MISSED |
|   of which anonymous (RssAnon: heap, stacks) | 10.0 MiB   |                              |        |
|     Go heap allocated (live, not yet swept)  | 5.0 MiB    |                              |        |
|     Go heap live (at the last GC)            | 4.0 MiB    |                              |        |
|     Go heap in use (spans)                   | 6.0 MiB    |                              |        |
|     Go heap goal (next GC)                   | 9.0 MiB    |                              |        |
|     Go stacks (245 goroutines)               | 1.0 MiB    |                              |        |
|   of which file-backed (RssFile: the binary) | 15.0 MiB   |                              |        |
|     of which used in 1m0s at idle            | 6.0 MiB    |                              |        |
|   memory mappings (VMAs, ~200 B kernel each) | 2600       |                              |        |
| agent PSS with 50 pods                       | 20.0 MiB   |                              |        |
| agent peak RSS (VmHWM)                       | 26.0 MiB   |                              |        |
| agent RSS with no pods                       | 15.0 MiB   |                              |        |
| agent CPU at idle with 50 pods               | 1.23% core |                              |        |
| agent minor page faults at idle              | 42/s       |                              |        |
`
	if b.String() != want {
		t.Errorf("report:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestReportHolds(t *testing.T) {
	r := results{pods: 1, latencies: []time.Duration{300 * time.Millisecond}, with: benchkit.Memory{RSS: 20 << 20}}
	var b strings.Builder
	r.table().Write(&b)
	if n := strings.Count(b.String(), "holds"); n != 2 {
		t.Errorf("report has %d holds, want 2 (start p99, RSS):\n%s", n, b.String())
	}
	if strings.Contains(b.String(), "MISSED") {
		t.Errorf("report misses a target:\n%s", b.String())
	}
}
