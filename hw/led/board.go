package led

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// Readiness is what the readiness LED shows; see the package doc for the
// patterns.
type Readiness int32

const (
	// Off: isle is not running (the LED is dark).
	Off Readiness = iota
	// Starting: isle is starting or joining the cluster (slow blink).
	Starting
	// NotReady: joined, but the node is NotReady: containerd down or the
	// memory cgroup off (fast blink).
	NotReady
	// Ready: the node is Ready (solid).
	Ready
)

func (r Readiness) String() string {
	switch r {
	case Off:
		return "off"
	case Starting:
		return "starting"
	case NotReady:
		return "not-ready"
	case Ready:
		return "ready"
	}
	return fmt.Sprintf("Readiness(%d)", int32(r))
}

// MarshalText gives the Readiness's name.
func (r Readiness) MarshalText() ([]byte, error) {
	if r < Off || r > Ready {
		return nil, fmt.Errorf("led: no readiness %d", int32(r))
	}
	return []byte(r.String()), nil
}

// UnmarshalText reads a Readiness's name.
func (r *Readiness) UnmarshalText(b []byte) error {
	for v := Off; v <= Ready; v++ {
		if string(b) == v.String() {
			*r = v
			return nil
		}
	}
	return fmt.Errorf("led: readiness %q: want off, starting, not-ready or ready", b)
}

// State is a snapshot of a Board, for `isle status` and the API.
type State struct {
	Readiness Readiness `json:"readiness"`
	Leader    bool      `json:"leader,omitempty"`
	// CutOff is set while the board runs but reaches no server of the
	// control plane.
	CutOff bool `json:"cutOff,omitempty"`
	// ReadyLit and ActivityLit tell whether each LED is lit now (as the
	// patterns have it, even if its writes fail).
	ReadyLit    bool `json:"readyLit,omitempty"`
	ActivityLit bool `json:"activityLit,omitempty"`
	// Requests counts the activity requests, Flashes the flashes shown, and
	// Dropped the requests coalesced away; the rest are owed flashes.
	Requests uint64 `json:"requests,omitempty"`
	Flashes  uint64 `json:"flashes,omitempty"`
	Dropped  uint64 `json:"dropped,omitempty"`
	// WriteErrors counts the LED writes that failed.
	WriteErrors uint64 `json:"writeErrors,omitempty"`
}

// Patterns are the names Pattern gives, darkest first.
var Patterns = []string{"off", "slow-blink", "fast-blink", "solid-dip", "solid", "solid-leader"}

// Pattern names what the readiness LED shows, as the README's table does:
// off, slow-blink, fast-blink, solid-dip (Ready but cut off from the
// control plane: solid with a long dip), solid, or solid-leader (solid
// with the leader's double blink).
func (s State) Pattern() string {
	switch s.Readiness {
	case Starting:
		return "slow-blink"
	case NotReady:
		return "fast-blink"
	case Ready:
		switch {
		case s.CutOff:
			return "solid-dip"
		case s.Leader:
			return "solid-leader"
		}
		return "solid"
	}
	return "off"
}

// Clock is a Board's time: the Board makes one timer and resets it after
// each pass. k8s.io/utils/clock.RealClock, the default, satisfies it.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) clock.Timer
}

// A Board drives a board's readiness and activity LEDs from one
// goroutine, which alone writes to them. Its methods may be called from
// any goroutine; only Close waits.
type Board struct {
	ready, activity Light
	clk             Clock
	log             *slog.Logger

	// Inputs, read by the loop after each wake.
	readiness atomic.Int32
	leader    atomic.Bool
	cutOff    atomic.Bool
	requests  atomic.Uint64
	wake      chan struct{} // one pending wake-up at most

	done      chan struct{} // closed by Close
	closeOnce sync.Once
	exited    chan struct{} // closed when the loop has returned
	closeErr  error         // set by the loop before exited is closed

	mu       sync.Mutex
	state    State
	watchers []func(State)
	fresh    int // watchers[fresh:] have not been told the state yet
}

// NewBoard starts driving ready and activity (nil: no such LED), both off
// until told otherwise. A nil clk is the real clock, a nil log
// slog.Default(). Close stops it.
func NewBoard(ready, activity Light, clk Clock, log *slog.Logger) *Board {
	if ready == nil {
		ready = noLight{}
	}
	if activity == nil {
		activity = noLight{}
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	if log == nil {
		log = slog.Default()
	}
	b := &Board{
		ready:    ready,
		activity: activity,
		clk:      clk,
		log:      log,
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
		exited:   make(chan struct{}),
	}
	go b.run()
	return b
}

// SetReadiness sets what the readiness LED shows. It does not block; the
// latest value wins. A value other than the four Readiness constants shows
// as Off.
func (b *Board) SetReadiness(r Readiness) {
	b.readiness.Store(int32(r))
	b.poke()
}

// SetLeader says whether this board is the Raft leader, which adds a double
// blink to the readiness LED while it is Ready. It does not block.
func (b *Board) SetLeader(isLeader bool) {
	b.leader.Store(isLeader)
	b.poke()
}

// SetCutOff says whether the board reaches no server of the control plane
// (it runs its pods on its own), which shows a Ready board's LED with a
// long dip instead of solid. It does not block.
func (b *Board) SetCutOff(cutOff bool) {
	b.cutOff.Store(cutOff)
	b.poke()
}

// Activity asks for a flash of the activity LED, for a reconcile that
// changed something. It does not block; bursts are coalesced.
func (b *Board) Activity() {
	b.requests.Add(1)
	b.poke()
}

func (b *Board) poke() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// State returns a snapshot of the Board.
func (b *Board) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// Watch calls f with the Board's State, soon, and after every change of
// it (an LED turning on or off, a flash counted), the last time with the
// dark state Close leaves. f is called from the Board's goroutine, one
// call at a time: it must return quickly and not call the Board.
func (b *Board) Watch(f func(State)) {
	b.mu.Lock()
	b.watchers = append(b.watchers, f)
	b.mu.Unlock()
	b.poke()
}

// publish sets the Board's State and tells the watchers that need it.
func (b *Board) publish(st State) {
	b.mu.Lock()
	tell := b.watchers[b.fresh:]
	if st != b.state {
		tell = b.watchers
	}
	b.state, b.fresh = st, len(b.watchers)
	b.mu.Unlock()
	for _, f := range tell {
		f(st)
	}
}

// Close puts both LEDs out and closes their Lights (sysfs LEDs get their
// triggers back). Later calls return what the first did.
func (b *Board) Close() error {
	b.closeOnce.Do(func() { close(b.done) })
	<-b.exited
	return b.closeErr
}

// output is one LED as the loop sees it.
type output struct {
	name    string
	light   Light
	known   bool // the LED shows lit; false after a failed write
	lit     bool
	failing bool // a write failed and none has succeeded since
}

func (b *Board) run() {
	defer close(b.exited)
	outs := [2]output{{name: "readiness", light: b.ready}, {name: "activity", light: b.activity}}
	var s schedule
	now := b.clk.Now()
	timer := b.clk.NewTimer(b.pass(&s, &outs, now).Sub(now))
	for {
		select {
		case <-b.done:
			timer.Stop()
			b.closeErr = b.shutdown(&outs)
			return
		case <-b.wake:
		case <-timer.C():
		}
		now = b.clk.Now()
		timer.Reset(b.pass(&s, &outs, now).Sub(now))
	}
}

// pass brings the LEDs to what the inputs and the time make them, and
// returns when to look again.
func (b *Board) pass(s *schedule, outs *[2]output, now time.Time) time.Time {
	s.set(now, Readiness(b.readiness.Load()), b.leader.Load(), b.cutOff.Load())
	s.take(b.requests.Load())
	ready, activity, next := s.advance(now)
	failed := b.show(&outs[0], ready)
	failed += b.show(&outs[1], activity)
	b.publish(State{
		Readiness:   s.readiness,
		Leader:      s.leader,
		CutOff:      s.cutOff,
		ReadyLit:    ready,
		ActivityLit: activity,
		Requests:    s.requests,
		Flashes:     s.flashes,
		Dropped:     s.dropped,
		WriteErrors: b.State().WriteErrors + failed,
	})
	return next
}

// show writes on to the LED unless it already shows it, and returns 1 if
// the write failed.
func (b *Board) show(o *output, on bool) uint64 {
	if o.known && o.lit == on {
		return 0
	}
	if err := o.light.Set(on); err != nil {
		if !o.failing {
			b.log.Warn("LED write failed; retrying", "led", o.name, "err", err)
		}
		o.known, o.failing = false, true
		return 1
	}
	if o.failing {
		b.log.Info("LED write works again", "led", o.name)
	}
	o.known, o.lit, o.failing = true, on, false
	return 0
}

// shutdown closes the Lights, which puts them out.
func (b *Board) shutdown(outs *[2]output) error {
	var errs []error
	for i := range outs {
		if err := outs[i].light.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	st := b.State()
	st.Readiness, st.Leader, st.CutOff = Off, false, false
	st.ReadyLit, st.ActivityLit = false, false
	b.publish(st)
	return errors.Join(errs...)
}
