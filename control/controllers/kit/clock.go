package kit

import (
	"sync"
	"time"
)

// TestClock is a clock for tests that stands still until the test moves
// it; its Now is what a controller's injected clock (a func() time.Time
// that defaults to time.Now) takes.
type TestClock struct {
	mu sync.Mutex
	t  time.Time
}

// NewTestClock returns a clock at t.
func NewTestClock(t time.Time) *TestClock { return &TestClock{t: t} }

// Now is the clock's time.
func (c *TestClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock d forward.
func (c *TestClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
