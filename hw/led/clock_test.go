package led

import (
	"sync"
	"testing"
	"time"

	"k8s.io/utils/clock"
)

// waitLimit bounds every wait on the Board's loop (generous for QEMU).
const waitLimit = 30 * time.Second

// stepClock is a fake Clock that keeps a test in lockstep with the Board's
// loop. Every pass of the loop ends with NewTimer or Reset, which the
// clock counts; Step hands a due timer to the loop (its channel is
// unbuffered, so the hand-over proves the loop took it) and waits for the
// pass that follows. A test that calls one Board input and then waitPass
// knows the loop is idle again. (k8s.io/utils/clock/testing.FakeClock
// fires timers into a buffer and cannot tell when the loop is done.)
type stepClock struct {
	t      *testing.T
	start  time.Time
	passes chan struct{}

	mu    sync.Mutex
	now   time.Time
	timer *stepTimer
}

type stepTimer struct {
	clk   *stepClock
	c     chan time.Time
	at    time.Time
	armed bool
}

func newStepClock(t *testing.T) *stepClock {
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	return &stepClock{t: t, start: start, now: start, passes: make(chan struct{}, 1000)}
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// elapsed is the time since the clock started.
func (c *stepClock) elapsed() time.Duration { return c.Now().Sub(c.start) }

func (c *stepClock) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	if c.timer != nil {
		c.t.Error("the Board made a second timer")
	}
	tm := &stepTimer{clk: c, c: make(chan time.Time)}
	c.timer = tm
	c.mu.Unlock()
	tm.Reset(d)
	return tm
}

func (tm *stepTimer) C() <-chan time.Time { return tm.c }

func (tm *stepTimer) Stop() bool {
	tm.clk.mu.Lock()
	defer tm.clk.mu.Unlock()
	was := tm.armed
	tm.armed = false
	return was
}

func (tm *stepTimer) Reset(d time.Duration) bool {
	c := tm.clk
	if d <= 0 {
		c.t.Errorf("timer reset to %v: the loop must always wait for a later edge", d)
	}
	c.mu.Lock()
	was := tm.armed
	tm.at, tm.armed = c.now.Add(d), true
	c.mu.Unlock()
	select {
	case c.passes <- struct{}{}:
	default:
		c.t.Error("too many passes of the loop unaccounted for")
	}
	return was
}

// Step moves the clock by d and, if that makes the timer due, waits for the
// loop's pass.
func (c *stepClock) Step(d time.Duration) {
	c.t.Helper()
	c.mu.Lock()
	c.now = c.now.Add(d)
	now, tm := c.now, c.timer
	due := tm != nil && tm.armed && !tm.at.After(now)
	if due {
		tm.armed = false
	}
	c.mu.Unlock()
	if !due {
		return
	}
	select {
	case tm.c <- now:
	case <-time.After(waitLimit):
		c.t.Fatal("the Board's loop did not take its timer")
	}
	c.waitPass()
}

// advance steps the clock by d in milliseconds, so that every edge lands on
// its exact millisecond.
func (c *stepClock) advance(d time.Duration) {
	c.t.Helper()
	for ; d > 0; d -= time.Millisecond {
		c.Step(time.Millisecond)
	}
}

// waitPass waits for one pass of the loop and checks that no other came.
func (c *stepClock) waitPass() {
	c.t.Helper()
	select {
	case <-c.passes:
	case <-time.After(waitLimit):
		c.t.Fatal("the Board's loop made no pass")
	}
	if n := len(c.passes); n != 0 {
		c.t.Fatalf("%d passes of the loop more than the test caused", n)
	}
}
