package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
)

func testResults() results {
	return results{
		settle:     30 * time.Second,
		cache:      "/var/cache/isle-image",
		scratch:    &build{total: 5*time.Minute + 30*time.Second, rootfs: 4 * time.Minute},
		cached:     []time.Duration{20 * time.Second, 24 * time.Second, 22 * time.Second},
		compressed: compressed{took: 15 * time.Second, zst: 200 << 20, raw: 1400 << 20, rawAlloc: 700 << 20},
		boots: []boot{
			{first: 100 * time.Second, again: 60 * time.Second, notReady: 40 * time.Second},
			{first: 120 * time.Second, again: 70 * time.Second, notReady: 42 * time.Second},
		},
		memory: memory{rss: 20 << 20, heap: 6 << 20, anon: 12 << 20, file: 8 << 20},
	}
}

// row finds the table's row whose measure starts with prefix.
func row(t *testing.T, tab benchkit.Table, prefix string) [4]string {
	t.Helper()
	for _, r := range tab {
		if strings.HasPrefix(r[0], prefix) {
			return r
		}
	}
	t.Fatalf("no row %q in %q", prefix, tab)
	return [4]string{}
}

func TestReport(t *testing.T) {
	r := testResults()
	tab := report(r)
	for _, c := range []struct {
		prefix string
		want   [4]string
	}{
		{"build from scratch", [4]string{"", "5m30s", "≤ 5 min", "MISSED"}},
		{"  of which the root filesystem", [4]string{"", "4m0s", "", ""}},
		{"build, root filesystem cached, median of 3", [4]string{"", "22s", "≤ 30 s", "holds"}},
		{"build, root filesystem cached, max", [4]string{"", "24s", "", ""}},
		{"zstd compression", [4]string{"", "15s", "", ""}},
		{"compressed image", [4]string{"", "200.0 MiB", "— (RPi OS Lite ~0.5 GB xz)", ""}},
		{"raw image", [4]string{"", "1400.0 MiB / 700.0 MiB", "", ""}},
		{"first boot → Node Ready (-M virt, TCG), median of 2", [4]string{"", "1m50s", "—", ""}},
		{"reboot → Node Ready, median of 2", [4]string{"", "1m5s", "—", ""}},
		{"  power-off → Node NotReady", [4]string{"", "41s", "", ""}},
		{"isle's RSS in the VM", [4]string{"", "20.0 MiB", "≤ 24 MiB (k3s agent ~270 MB)", "holds"}},
		{"  of which anonymous / the binary's pages", [4]string{"", "12.0 MiB / 8.0 MiB", "", ""}},
		{"  Go heap", [4]string{"", "6.0 MiB", "", ""}},
	} {
		got := row(t, tab, c.prefix)
		got[0] = ""
		if got != c.want {
			t.Errorf("row %q: %q, want %q", c.prefix, got, c.want)
		}
	}
	if len(tab) != 13 {
		t.Errorf("%d rows, want 13: %q", len(tab), tab)
	}

	r.scratch = nil
	r.memory.rss = 30 << 20
	r.cached = []time.Duration{40 * time.Second}
	tab = report(r)
	if got := row(t, tab, "build from scratch"); got[1] != "n/a" || got[3] != "n/a" || !strings.Contains(got[0], "-scratch=false") {
		t.Errorf("no scratch build: %q", got)
	}
	if got := row(t, tab, "isle's RSS"); got[3] != "MISSED" {
		t.Errorf("RSS over the target: %q", got)
	}
	if got := row(t, tab, "build, root filesystem cached, median of 1"); got[1] != "40s" || got[3] != "MISSED" {
		t.Errorf("one slow cached build: %q", got)
	}
	var out bytes.Buffer
	tab.Write(&out)
	if lines := strings.Count(out.String(), "\n"); lines != 2+12 {
		t.Errorf("the markdown has %d lines:\n%s", lines, out.String())
	}
}

func TestHeader(t *testing.T) {
	var out bytes.Buffer
	testResults().header(&out)
	for _, s := range []string{"rpi4 agent", "cached builds: 3", "/var/cache/isle-image", "2 trials",
		"qemu-system-aarch64 -M virt -cpu cortex-a72 -smp 2 -m 1024 (TCG)", "30s after its pod"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("header lacks %q:\n%s", s, out.String())
		}
	}
}

func TestMemoryOf(t *testing.T) {
	m, err := memoryOf(map[string]float64{
		"process_resident_memory_bytes": 21.5 * (1 << 20), "go_memstats_heap_inuse_bytes": 7 << 20, `other{a="b"}`: 1,
	})
	if err != nil || m != (memory{rss: 21.5 * (1 << 20), heap: 7 << 20}) {
		t.Errorf("memoryOf: %+v %v", m, err)
	}
	for _, c := range []struct {
		vals map[string]float64
		want string
	}{
		{map[string]float64{}, "no process_resident_memory_bytes and no go_memstats_heap_inuse_bytes"},
		{map[string]float64{"process_resident_memory_bytes": 1}, "no go_memstats_heap_inuse_bytes"},
		{map[string]float64{"process_resident_memory_bytes": 0, "go_memstats_heap_inuse_bytes": 1}, "process_resident_memory_bytes 0"},
		{map[string]float64{"process_resident_memory_bytes": 1, "go_memstats_heap_inuse_bytes": -5}, "want a size in bytes"},
	} {
		if _, err := memoryOf(c.vals); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("memoryOf(%v): %v, want an error with %q", c.vals, err, c.want)
		}
	}
}

// TestScrapedMemory reads the memory out of a /metrics page as isle's
// Prometheus registry writes it.
func TestScrapedMemory(t *testing.T) {
	page := `# HELP go_memstats_heap_inuse_bytes Number of heap bytes that are in use.
# TYPE go_memstats_heap_inuse_bytes gauge
go_memstats_heap_inuse_bytes 7.64928e+06
# HELP go_gc_duration_seconds A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0"} 2.7e-05
# HELP process_resident_memory_bytes Resident memory size in bytes.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 2.2736896e+07
`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		io.WriteString(w, page)
	}))
	defer srv.Close()
	vals, err := benchkit.Scrape(context.Background(), srv.Client(), srv.URL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, err := memoryOf(vals)
	if err != nil || m != (memory{rss: 22736896, heap: 7649280}) {
		t.Errorf("memoryOf: %+v %v", m, err)
	}
}

func TestMedian(t *testing.T) {
	if got := median([]time.Duration{3, 1, 2}); got != 2 {
		t.Errorf("odd count: %v", got)
	}
	if got := median([]time.Duration{4 * time.Second, time.Second}); got != 2500*time.Millisecond {
		t.Errorf("even count: %v", got)
	}
}
