package main

import (
	"strings"
	"testing"
	"time"
)

func TestReport(t *testing.T) {
	var lat []time.Duration
	for i := 50; i >= 1; i-- { // unsorted: the report sorts
		lat = append(lat, time.Duration(i)*25*time.Millisecond)
	}
	r := results{pods: 50, interval: 200 * time.Millisecond, board: "pi2", pull: 1234567 * time.Microsecond, latencies: lat,
		before:  memory{rss: 15 << 20},
		with:    memory{rss: 25 << 20, peak: 26 << 20, anon: 10 << 20, file: 15 << 20},
		idleCPU: 0.0123, usedFile: 6 << 20, idle: time.Minute}
	var b strings.Builder
	r.table().Write(&b)
	want := `| measure                             | isle       | target                       |        |
|-------------------------------------|------------|------------------------------|--------|
| pod start, bound → Running, p50     | 625ms      |                              |        |
| pod start, bound → Running, p99     | 1.25s      | ≤ 1s (kubelet SLO 5s)        | MISSED |
| pod start, max                      | 1.25s      |                              |        |
| first pod, pulling the image        | 1.235s     |                              |        |
| agent RSS with 50 pods              | 25.0 MiB   | ≤ 24 MiB (k3s agent ~270 MB) | MISSED |
|   of which anonymous (heap, stacks) | 10.0 MiB   |                              |        |
|   of which file-backed (the binary) | 15.0 MiB   |                              |        |
|     of which used in 1m0s at idle   | 6.0 MiB    |                              |        |
| agent peak RSS (VmHWM)              | 26.0 MiB   |                              |        |
| agent RSS with no pods              | 15.0 MiB   |                              |        |
| agent CPU at idle with 50 pods      | 1.23% core |                              |        |
`
	if b.String() != want {
		t.Errorf("report:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestReportHolds(t *testing.T) {
	r := results{pods: 1, latencies: []time.Duration{300 * time.Millisecond}, with: memory{rss: 20 << 20}}
	var b strings.Builder
	r.table().Write(&b)
	if n := strings.Count(b.String(), "holds"); n != 2 {
		t.Errorf("report has %d holds, want 2 (start p99, RSS):\n%s", n, b.String())
	}
	if strings.Contains(b.String(), "MISSED") {
		t.Errorf("report misses a target:\n%s", b.String())
	}
}
