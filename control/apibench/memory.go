package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/isle-cluster/isle/raft/benchkit"
)

// memSample is the server's memory at one moment.
type memSample struct {
	rss, hwm  uint64 // VmRSS and VmHWM (peak RSS) from /proc/PID/status, bytes
	heapInuse uint64 // go_memstats_heap_inuse_bytes from its /metrics
	heapSys   uint64 // go_memstats_heap_sys_bytes: heap memory obtained from the OS
}

// memory reads the server's /proc/PID/status and its Go heap metrics.
func (s *server) memory(ctx context.Context) (memSample, error) {
	var m memSample
	if err := s.dead(); err != nil {
		return m, fmt.Errorf("read server memory: %w", err)
	}
	path := "/proc/" + strconv.Itoa(s.cmd.Process.Pid) + "/status"
	b, err := os.ReadFile(path)
	if err != nil {
		return m, fmt.Errorf("read server memory: %w", err)
	}
	for _, f := range []struct {
		key string
		dst *uint64
	}{{"VmRSS:", &m.rss}, {"VmHWM:", &m.hwm}} {
		if *f.dst, err = statusKiB(b, f.key); err != nil {
			return m, fmt.Errorf("read server memory: %s: %w", path, err)
		}
	}
	vals, err := s.scrape(ctx)
	if err != nil {
		return m, fmt.Errorf("read server memory: %w", err)
	}
	m.heapInuse = uint64(vals["go_memstats_heap_inuse_bytes"])
	m.heapSys = uint64(vals["go_memstats_heap_sys_bytes"])
	return m, nil
}

// statusKiB finds "KEY   N kB" in a /proc status file and returns N KiB in bytes.
func statusKiB(status []byte, key string) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key); ok {
			n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s %q: %w", key, v, err)
			}
			return n << 10, nil
		}
	}
	return 0, fmt.Errorf("no %s line", key)
}

// scrape returns the unlabelled samples of the server's /metrics page on
// its store address.
func (s *server) scrape(ctx context.Context) (map[string]float64, error) {
	return benchkit.Scrape(ctx, s.metrics, "http://"+s.storeAddr+"/metrics")
}
