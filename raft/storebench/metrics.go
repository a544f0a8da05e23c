package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// fsyncTotals sums the fsync histograms of a cluster's members.
type fsyncTotals struct {
	count, sum float64
}

// scrapeFsyncs reads the WAL fsync histograms' _count and _sum from every
// member's /metrics (Prometheus text format; the histograms have no labels).
func scrapeFsyncs(ctx context.Context, c cluster) (fsyncTotals, error) {
	var t fsyncTotals
	wal := c.fsyncMetric()
	for _, u := range c.metricsURLs() {
		vals, err := scrape(ctx, u)
		if err != nil {
			return t, err
		}
		cnt, ok := vals[wal+"_count"]
		if !ok {
			return t, fmt.Errorf("scrape %s: no %s_count", u, wal)
		}
		t.count += cnt
		t.sum += vals[wal+"_sum"]
	}
	return t, nil
}

// scrapeClient is kept apart from the load's client and its connections.
var scrapeClient = newHTTPClient()

// scrape returns the unlabelled samples of one /metrics page.
func scrape(ctx context.Context, url string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	resp, err := scrapeClient.Do(req)
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
