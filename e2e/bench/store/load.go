package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// cellResult is one system at one writer count.
type cellResult struct {
	system    string
	writers   int
	writes    int64
	failed    int64
	firstErr  error
	elapsed   time.Duration
	p50, p99  time.Duration
	diskBytes uint64  // write_bytes of the three processes over the measured run
	fsyncs    float64 // WAL fsyncs of the three members over the measured run
	fsyncSecs float64 // time they took
	snapBytes float64 // bytes of snapshot files the three members wrote over the measured run
	hasSnap   bool    // snapBytes was measured
}

func (r cellResult) writesPerSec() float64 { return float64(r.writes) / r.elapsed.Seconds() }

func (r cellResult) bytesPerWrite() float64 {
	if r.writes == 0 {
		return 0
	}
	return float64(r.diskBytes) / float64(r.writes)
}

// settle lets deferred work land (etcd commits its backend every 100 ms) so
// that its disk writes are counted with the writes that caused them.
const settle = 500 * time.Millisecond

// cellSeq makes every cell's keys distinct from every other cell's.
var cellSeq atomic.Int64

// measureCell warms up, then runs the measured load and reads disk and
// fsync counters around it.
func measureCell(ctx context.Context, c cluster, writers int, o options, value []byte) (cellResult, error) {
	r := cellResult{system: c.system(), writers: writers}
	if o.warmup > 0 {
		slog.Info("warm-up", "system", r.system, "writers", writers, "for", o.warmup)
		if w := runLoad(ctx, c, writers, o.warmup, value); w.writes == 0 {
			return r, fmt.Errorf("warm-up %s with %d writers: no write succeeded: %v", r.system, writers, w.firstErr)
		}
	}
	io0, m0, err := settledCounters(ctx, c)
	if err != nil {
		return r, err
	}
	slog.Info("measuring", "system", r.system, "writers", writers, "for", o.duration)
	l := runLoad(ctx, c, writers, o.duration, value)
	io1, m1, err := settledCounters(ctx, c)
	if err != nil {
		return r, err
	}
	if l.writes == 0 {
		return r, fmt.Errorf("measure %s with %d writers: no write succeeded: %v", r.system, writers, l.firstErr)
	}
	r.writes, r.failed, r.firstErr, r.elapsed = l.writes, l.failed, l.firstErr, l.elapsed
	r.p50, r.p99 = percentile(l.lat, 0.50), percentile(l.lat, 0.99)
	r.diskBytes = io1 - io0
	r.fsyncs, r.fsyncSecs = m1.count-m0.count, m1.sum-m0.sum
	r.snapBytes, r.hasSnap = m1.snapBytes-m0.snapBytes, m1.hasSnap
	slog.Info("cell done", "system", r.system, "writers", writers, "writes/s", int(r.writesPerSec()),
		"p50", r.p50, "p99", r.p99, "max", l.lat[len(l.lat)-1], "failed", r.failed)
	return r, nil
}

// settledCounters lets the cluster settle, then reads the write_bytes of
// its processes and its members' fsync and snapshot totals.
func settledCounters(ctx context.Context, c cluster) (diskBytes uint64, fsyncs memberTotals, err error) {
	if err := sleep(ctx, settle); err != nil {
		return 0, fsyncs, err
	}
	if diskBytes, _, err = sumWriteBytes(c.procs()); err != nil {
		return 0, fsyncs, fmt.Errorf("measure %s: %w", c.system(), err)
	}
	if fsyncs, err = scrapeTotals(ctx, c); err != nil {
		return 0, fsyncs, fmt.Errorf("measure %s: %w", c.system(), err)
	}
	return diskBytes, fsyncs, nil
}

// loadResult is what the writers saw.
type loadResult struct {
	writes, failed int64
	firstErr       error
	elapsed        time.Duration
	lat            []time.Duration // sorted
}

// requestTimeout bounds one write, above both servers' own limits.
const requestTimeout = 15 * time.Second

// runLoad runs writers concurrent writers for d, each putting distinct keys
// and sending its successive writes round-robin to the three members.
func runLoad(ctx context.Context, c cluster, writers int, d time.Duration, value []byte) loadResult {
	cell := strconv.FormatInt(cellSeq.Add(1), 10)
	lats := make([][]time.Duration, writers)
	var failed atomic.Int64
	var errOnce sync.Once
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prefix := "/bench/" + c.system() + "/" + cell + "/" + strconv.Itoa(w) + "/"
			mine := make([]time.Duration, 0, 4096)
			for seq := 0; ctx.Err() == nil && time.Now().Before(deadline); seq++ {
				key := prefix + strconv.Itoa(seq)
				rctx, cancel := context.WithTimeout(ctx, requestTimeout)
				t0 := time.Now()
				err := c.put(rctx, (w+seq)%3, key, value)
				took := time.Since(t0)
				cancel()
				if err != nil {
					failed.Add(1)
					errOnce.Do(func() { firstErr = err })
					continue
				}
				mine = append(mine, took)
			}
			lats[w] = mine
		}()
	}
	wg.Wait()
	r := loadResult{failed: failed.Load(), firstErr: firstErr, elapsed: time.Since(start)}
	for _, l := range lats {
		r.lat = append(r.lat, l...)
	}
	slices.Sort(r.lat)
	r.writes = int64(len(r.lat))
	return r
}

// percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// fillValue fills v with incompressible bytes.
func fillValue(v []byte) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range v {
		v[i] = byte(r.UintN(256))
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// idleResult is one cluster's disk writes with no client traffic.
type idleResult struct {
	system  string
	names   []string
	perSec  []float64 // per member
	total   float64
	elapsed time.Duration
}

// idleWait is the quiet time between the last load and the idle window.
const idleWait = 5 * time.Second

// measureIdle waits, then measures all clusters' write_bytes over the same
// window with no client traffic.
func measureIdle(ctx context.Context, cs []cluster, d time.Duration) ([]idleResult, error) {
	slog.Info("idle: waiting before the idle window", "for", idleWait)
	if err := sleep(ctx, idleWait); err != nil {
		return nil, err
	}
	before := make([][]uint64, len(cs))
	for i, c := range cs {
		_, each, err := sumWriteBytes(c.procs())
		if err != nil {
			return nil, fmt.Errorf("measure idle writes: %w", err)
		}
		before[i] = each
	}
	start := time.Now()
	slog.Info("idle: measuring disk writes with no traffic", "for", d)
	if err := sleep(ctx, d); err != nil {
		return nil, err
	}
	var out []idleResult
	for i, c := range cs {
		_, each, err := sumWriteBytes(c.procs())
		elapsed := time.Since(start)
		if err != nil {
			return nil, fmt.Errorf("measure idle writes: %w", err)
		}
		r := idleResult{system: c.system(), elapsed: elapsed}
		for j, p := range c.procs() {
			bps := float64(each[j]-before[i][j]) / elapsed.Seconds()
			r.names = append(r.names, p.Name())
			r.perSec = append(r.perSec, bps)
			r.total += bps
		}
		out = append(out, r)
	}
	return out, nil
}
