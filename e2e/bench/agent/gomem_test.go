package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

func TestGoMemoryOf(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("entering a network namespace needs root")
	}
	page := `# TYPE go_memstats_heap_alloc_bytes gauge
go_memstats_heap_alloc_bytes 5.5e+06
go_memstats_heap_inuse_bytes 7e+06
go_memstats_next_gc_bytes 1.1e+07
go_memstats_stack_inuse_bytes 1.048576e+06
go_gc_heap_live_bytes 4e+06
go_goroutines 245
`
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(page)) }))
	defer s.Close()
	// The test's own namespace: entered and left as a board's would be.
	m, err := goMemoryOf(context.Background(), "/proc/self/ns/net", s.URL)
	if err != nil {
		t.Fatal(err)
	}
	if want := (goMemory{heapAlloc: 5_500_000, heapInuse: 7_000_000, goal: 11_000_000, stacks: 1 << 20, live: 4_000_000, routines: 245}); m != want {
		t.Errorf("goMemoryOf = %+v, want %+v", m, want)
	}
	if _, err := goMemoryFrom(map[string]float64{"go_memstats_heap_alloc_bytes": 1}); err == nil ||
		!strings.Contains(err.Error(), "go_memstats_heap_inuse_bytes") {
		t.Errorf("goMemoryFrom(a page without the heap in use) = %v, want an error naming it", err)
	}
}
