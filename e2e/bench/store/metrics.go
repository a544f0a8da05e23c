package main

import (
	"context"
	"fmt"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
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
	return benchkit.Scrape(ctx, scrapeClient, url)
}
