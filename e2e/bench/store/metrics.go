package main

import (
	"context"
	"fmt"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
)

// memberTotals sums the fsync histograms of a cluster's members, and the
// bytes of snapshot files they wrote where they count them.
type memberTotals struct {
	count, sum float64
	snapBytes  float64
	hasSnap    bool // a member reported snapshot file bytes
}

// scrapeTotals reads the WAL fsync histograms' _count and _sum and the
// snapshot file bytes counter from every member's /metrics (Prometheus
// text format; neither has labels).
func scrapeTotals(ctx context.Context, c cluster) (memberTotals, error) {
	var t memberTotals
	wal, snap := c.fsyncMetric(), c.snapshotBytesMetric()
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
		if b, ok := vals[snap]; ok && snap != "" {
			t.snapBytes, t.hasSnap = t.snapBytes+b, true
		}
	}
	return t, nil
}

// scrapeClient is kept apart from the load's client and its connections.
var scrapeClient = newHTTPClient()

// scrape returns the unlabelled samples of one /metrics page.
func scrape(ctx context.Context, url string) (map[string]float64, error) {
	return benchkit.Scrape(ctx, scrapeClient, url)
}
