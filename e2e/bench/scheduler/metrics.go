package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/benchkit/isleserver"
)

// applied returns the index of the last raft entry the server applied:
// every write to the store is one entry.
func applied(ctx context.Context, srv *isleserver.Server) (float64, error) {
	vals, err := srv.Scrape(ctx)
	if err != nil {
		return 0, err
	}
	v, ok := vals["isle_raft_applied_index"]
	if !ok {
		return 0, fmt.Errorf("scrape: no isle_raft_applied_index")
	}
	return v, nil
}

// quiet waits until the server has applied no write for a while (the
// trailing Events and status writes of a step), and returns the applied
// index then.
func quiet(ctx context.Context, srv *isleserver.Server, still time.Duration) (float64, error) {
	last, err := applied(ctx, srv)
	if err != nil {
		return 0, err
	}
	since := time.Now()
	deadline := time.Now().Add(time.Minute)
	for time.Since(since) < still {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the server did not go quiet within a minute (applied index %v)", last)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		cur, err := applied(ctx, srv)
		if err != nil {
			return 0, err
		}
		if cur != last {
			last, since = cur, time.Now()
		}
	}
	return last, nil
}

// attempts returns the scheduler's attempts by result
// (scheduler_schedule_attempts_total).
func attempts(ctx context.Context, srv *isleserver.Server) (map[string]float64, error) {
	vals, err := srv.Scrape(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for series, v := range vals {
		labels, ok := strings.CutPrefix(series, "scheduler_schedule_attempts_total{")
		if !ok {
			continue
		}
		for l := range strings.SplitSeq(strings.TrimSuffix(labels, "}"), ",") {
			if result, ok := strings.CutPrefix(l, `result="`); ok {
				out[strings.TrimSuffix(result, `"`)] += v
			}
		}
	}
	return out, nil
}
