package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
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

// scrape returns the unlabelled samples of the server's /metrics page
// (Prometheus text format) on its store address.
func (s *server) scrape(ctx context.Context) (map[string]float64, error) {
	url := "http://" + s.storeAddr + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	resp, err := s.metrics.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: HTTP %d", url, resp.StatusCode)
	}
	vals := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || strings.Contains(line, "{") {
			continue
		}
		name, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if f, err := strconv.ParseFloat(strings.Fields(v)[0], 64); err == nil {
			vals[name] = f
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	return vals, nil
}
