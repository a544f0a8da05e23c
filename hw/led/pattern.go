package led

import "time"

// The timings of the package doc's table.
const (
	flashOn  = 60 * time.Millisecond // an activity flash
	flashGap = 60 * time.Millisecond // dark, at least, between two flashes
	maxOwed  = 2                     // flashes owed while the LED is busy
	// idleWake is how often the Board wakes when its readiness LED is dark
	// or solid; a write that failed is retried then.
	idleWake = time.Second
)

// A phase is a stretch of a pattern with the LED lit or dark.
type phase struct {
	on bool
	d  time.Duration
}

// A pattern is a readiness LED's cycle of phases, repeated from the moment
// it began.
type pattern struct {
	phases []phase
	cycle  time.Duration
}

func newPattern(phases ...phase) *pattern {
	p := &pattern{phases: phases}
	for _, ph := range phases {
		p.cycle += ph.d
	}
	return p
}

var (
	dark      = newPattern(phase{false, idleWake})
	solid     = newPattern(phase{true, idleWake})
	slowBlink = newPattern(phase{true, 500 * time.Millisecond}, phase{false, 500 * time.Millisecond})
	fastBlink = newPattern(phase{true, 125 * time.Millisecond}, phase{false, 125 * time.Millisecond})
	leader    = newPattern(
		phase{false, 150 * time.Millisecond},
		phase{true, 150 * time.Millisecond},
		phase{false, 150 * time.Millisecond},
		phase{true, 2550 * time.Millisecond},
	)
	cutOff = newPattern(phase{true, 1500 * time.Millisecond}, phase{false, 500 * time.Millisecond})
)

// patternOf is the readiness LED's pattern; unknown readiness is dark.
func patternOf(r Readiness, isLeader, isCutOff bool) *pattern {
	switch r {
	case Starting:
		return slowBlink
	case NotReady:
		return fastBlink
	case Ready:
		switch {
		case isCutOff:
			return cutOff
		case isLeader:
			return leader
		}
		return solid
	}
	return dark
}

// ReadyLitAt is whether the readiness LED of a board in state s is lit at
// t, as a reader of a StateFile animates it from the pattern alone: the
// cycle runs from the wall clock's epoch, not from when the board's
// pattern began.
func (s State) ReadyLitAt(t time.Time) bool {
	on, _ := patternOf(s.Readiness, s.Leader, s.CutOff).at(time.Duration(t.UnixNano()))
	return on
}

// at is whether the LED is lit elapsed into the pattern, and how long it
// stays so (until the phase ends).
func (p *pattern) at(elapsed time.Duration) (on bool, left time.Duration) {
	e := elapsed % p.cycle
	if e < 0 { // a clock set back; start the cycle over
		e = 0
	}
	for _, ph := range p.phases {
		if e < ph.d {
			return ph.on, ph.d - e
		}
		e -= ph.d
	}
	panic("led: pattern phases do not add up to its cycle")
}

// schedule is the Board's pure core: from the inputs and the time, which
// LEDs are lit and when that may next change. Only the Board's loop uses
// it.
type schedule struct {
	readiness Readiness
	leader    bool
	cutOff    bool
	pattern   *pattern
	began     time.Time // when pattern began

	requests  uint64 // activity requests taken in
	flashes   uint64
	dropped   uint64
	owed      uint64 // flashes owed
	flashing  bool
	flashEnd  time.Time // the current flash ends then
	nextFlash time.Time // no flash starts before then
}

// set takes the readiness inputs; a change of pattern starts the new one
// at now.
func (s *schedule) set(now time.Time, r Readiness, isLeader, isCutOff bool) {
	s.readiness, s.leader, s.cutOff = r, isLeader, isCutOff
	if p := patternOf(r, isLeader, isCutOff); p != s.pattern {
		s.pattern, s.began = p, now
	}
}

// take takes the activity requests made so far (a running total).
func (s *schedule) take(total uint64) {
	s.owed += total - s.requests
	s.requests = total
}

// advance moves the activity flashes on to now and tells which LEDs are
// lit and when the loop must look again (always after now).
func (s *schedule) advance(now time.Time) (ready, activity bool, next time.Time) {
	ready, left := s.pattern.at(now.Sub(s.began))
	next = now.Add(left)
	if s.flashing && !now.Before(s.flashEnd) {
		// The gap counts from now, when the LED goes dark, even if the
		// loop woke late.
		s.flashing, s.nextFlash = false, now.Add(flashGap)
	}
	if !s.flashing && s.owed > 0 && !now.Before(s.nextFlash) {
		s.owed--
		s.flashes++
		s.flashing, s.flashEnd = true, now.Add(flashOn)
	}
	if s.owed > maxOwed {
		s.dropped += s.owed - maxOwed
		s.owed = maxOwed
	}
	switch {
	case s.flashing && s.flashEnd.Before(next):
		next = s.flashEnd
	case !s.flashing && s.owed > 0 && s.nextFlash.Before(next):
		next = s.nextFlash
	}
	return ready, s.flashing, next
}
