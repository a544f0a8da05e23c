package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
	"github.com/isle-cluster/isle/node/netns"
)

// goMemory is the Go runtime's account of a process's memory, in bytes,
// from its /metrics (the collector of runtime.MemStats).
type goMemory struct {
	heapAlloc uint64 // go_memstats_heap_alloc_bytes: the heap's objects, live and not yet swept
	live      uint64 // go_gc_heap_live_bytes: the heap's objects the last collection found live
	heapInuse uint64 // go_memstats_heap_inuse_bytes: the heap's spans that hold objects
	goal      uint64 // go_memstats_next_gc_bytes: the heap size at which the next GC starts
	stacks    uint64 // go_memstats_stack_inuse_bytes: the goroutines' stacks
	routines  uint64 // go_goroutines: the goroutines, whose stacks those are
}

// metricsURL is where an island's board serves its /metrics, on the
// loopback of its own network namespace (node/island).
const metricsURL = "http://127.0.0.1:10249/metrics"

// goMemoryOf scrapes the /metrics at url from inside the network
// namespace ns (a path such as /run/netns/isle-pi2).
func goMemoryOf(ctx context.Context, ns, url string) (goMemory, error) {
	dial := func(ctx context.Context, network, addr string) (c net.Conn, err error) {
		// The socket is made in the namespace, and stays in it.
		err = netns.Do(ns, func() (err error) {
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}, Timeout: 10 * time.Second}
	vals, err := benchkit.Scrape(ctx, hc, url)
	if err != nil {
		return goMemory{}, fmt.Errorf("go memory in %s: %w", ns, err)
	}
	return goMemoryFrom(vals)
}

// goMemoryFrom picks the Go runtime's memory from scraped samples.
func goMemoryFrom(vals map[string]float64) (goMemory, error) {
	names := []string{"go_memstats_heap_alloc_bytes", "go_memstats_heap_inuse_bytes", "go_memstats_next_gc_bytes", "go_memstats_stack_inuse_bytes",
		"go_gc_heap_live_bytes", "go_goroutines"}
	v := make([]uint64, len(names))
	for i, n := range names {
		f, ok := vals[n]
		if !ok {
			return goMemory{}, fmt.Errorf("go memory: no %s in /metrics", n)
		}
		v[i] = uint64(f)
	}
	return goMemory{heapAlloc: v[0], heapInuse: v[1], goal: v[2], stacks: v[3], live: v[4], routines: v[5]}, nil
}
