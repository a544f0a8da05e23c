// Package clock is a board's wall clock. A Raspberry Pi has no real-time
// clock: after a power cut without network time it boots in 1970, or at
// the time fake-hwclock saved, and every certificate of the cluster looks
// "not yet valid". Before a board checks a certificate (its join, its
// agent's start, its server's start) it brings its clock up to the best
// time it knows (Clock.Advance): the servers' (read over /isle/v1, see
// wire.TimePath), or, when no server answers, the latest of what it knows
// the time cannot be before (Floor): a day before isle's build (Earliest),
// the time it saved at its last stop (Save), its certificates' start of
// validity.
//
// A Clock only ever moves forward, and only when it is behind by more than
// MaxBehind: NTP, when the board has it, does the fine work. It sets the
// system clock (CAP_SYS_TIME); without the capability it keeps the
// correction to itself, so isle's own certificate checks (which all take
// their time from the board's Clock) still work, and says so.
//
// The saved time costs no idle SD-card writes: it is written at a clean
// stop and when a server first tells the time after a start, never
// periodically (the boards' idle write target is 0 B/s). Between those
// moments the certificates the board holds are a floor that costs
// nothing.
package clock

import (
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// MaxBehind is how far behind the best known time a board's clock may be
// before it is set: more than a round trip's error, far less than the
// hour every certificate of the cluster is backdated by.
const MaxBehind = time.Minute

// Clock is the board's wall clock: the system's, plus an offset that is
// zero unless the system clock cannot be set (or in a test, see Shifted).
type Clock struct {
	// set sets the system clock; nil for a clock that never touches it.
	set func(time.Time) error
	// now is the system clock.
	now func() time.Time

	mu     sync.Mutex
	offset time.Duration
}

// System is the system clock, which Advance sets.
func System() *Clock { return &Clock{set: setSystem, now: time.Now} }

// Shifted is the system clock shifted by d, for isle alone: Advance
// changes the shift and never the system clock. It stands for a board
// whose clock is wrong in tests (ISLE_TEST_CLOCK_OFFSET): a time
// namespace cannot shift CLOCK_REALTIME.
func Shifted(d time.Duration) *Clock { return &Clock{now: time.Now, offset: d} }

// Now is the board's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now().Add(c.offset)
}

// A Reading is a time a source told: Time was the time at the moment At
// (time.Now(), for its monotonic reading).
type Reading struct {
	// Source says whose time it is, as the log line says it: "the
	// cluster's", "the day before isle's build", …
	Source string
	// Server is the server that told it, if any.
	Server string
	Time   time.Time
	At     time.Time
}

// Now is the time the reading tells, carried forward to now.
func (r Reading) Now() time.Time { return r.Time.Add(time.Since(r.At)) }

// Advance brings the clock up to r when it is behind r by more than
// MaxBehind, and logs one line saying so; it never moves the clock back.
// It reports whether it moved the clock.
func (c *Clock) Advance(r Reading, log *slog.Logger) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now, want := c.now().Add(c.offset), r.Now()
	if want.Sub(now) <= MaxBehind {
		return false
	}
	msg := fmt.Sprintf("clock: system time %s is behind %s %s; set to %s", stamp(now), r.Source, stamp(r.Time), stamp(want))
	attrs := []any{"behind", want.Sub(now).Round(time.Second).String()}
	if r.Server != "" {
		attrs = append(attrs, "server", r.Server)
	}
	switch {
	case c.set == nil:
		c.offset = want.Sub(c.now())
		log.Warn(msg+" (isle's own clock: the system clock is left alone)", attrs...)
	default:
		err := c.set(want)
		if err == nil {
			c.offset = 0
			log.Warn(msg, attrs...)
			break
		}
		c.offset = want.Sub(c.now())
		log.Error(fmt.Sprintf("clock: system time %s is behind %s %s; cannot set the system clock (%v: isle needs CAP_SYS_TIME, as root has): isle checks certificates at %s, other programs keep the wrong time",
			stamp(now), r.Source, stamp(r.Time), err, stamp(want)), attrs...)
	}
	return true
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
