package rafttest

import (
	"sync"
	"time"

	"github.com/isle-cluster/isle/raft"
)

// Clock is an injected clock for one member: its tickers fire only when the
// test (or the cluster's driver) calls Tick, and not at all while paused.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	paused  bool
	tickers []*ticker
}

var _ raft.Clock = (*Clock)(nil)

// NewClock returns a clock at an arbitrary fixed instant.
func NewClock() *Clock {
	return &Clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// NewTicker returns a ticker that fires on every Tick.
func (c *Clock) NewTicker(time.Duration) raft.Ticker {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &ticker{c: make(chan time.Time, 1), clock: c}
	c.tickers = append(c.tickers, t)
	return t
}

// Tick advances time by one tick and fires every ticker (unless paused).
// Like time.Ticker, a tick is dropped if the last one was not yet taken.
func (c *Clock) Tick(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paused {
		return
	}
	c.now = c.now.Add(d)
	for _, t := range c.tickers {
		select {
		case t.c <- c.now:
		default:
		}
	}
}

// Pause stops time for this member (a stalled board); Resume restarts it.
func (c *Clock) Pause() { c.mu.Lock(); c.paused = true; c.mu.Unlock() }

// Resume restarts a paused clock.
func (c *Clock) Resume() { c.mu.Lock(); c.paused = false; c.mu.Unlock() }

type ticker struct {
	c     chan time.Time
	clock *Clock
}

func (t *ticker) C() <-chan time.Time { return t.c }

func (t *ticker) Stop() {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	for i, o := range t.clock.tickers {
		if o == t {
			t.clock.tickers = append(t.clock.tickers[:i], t.clock.tickers[i+1:]...)
			return
		}
	}
}
