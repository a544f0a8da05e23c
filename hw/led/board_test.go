package led

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/gpio/gpiotest"
)

// recPin is a gpiotest.Pin that records every write with the fake clock's
// time.
type recPin struct {
	gpiotest.Pin
	clk *stepClock

	mu     sync.Mutex
	writes []write
}

type write struct {
	at time.Duration
	l  gpio.Level
}

func (w write) String() string { return fmt.Sprintf("%v %s", w.at, w.l) }

func newRecPin(clk *stepClock, n int) *recPin {
	return &recPin{Pin: gpiotest.Pin{N: fmt.Sprintf("GPIO%d", n), Num: n}, clk: clk}
}

func (p *recPin) Out(l gpio.Level) error {
	if err := p.Pin.Out(l); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writes = append(p.writes, write{p.clk.elapsed(), l})
	return nil
}

func (p *recPin) recorded() []write {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.writes)
}

// edges are the first write and those that changed the level.
func (p *recPin) edges() []write {
	var e []write
	for _, w := range p.recorded() {
		if len(e) == 0 || e[len(e)-1].l != w.l {
			e = append(e, w)
		}
	}
	return e
}

func (p *recPin) edgeStrings() []string {
	var s []string
	for _, w := range p.edges() {
		s = append(s, w.String())
	}
	return s
}

// syncBuffer is a log sink the loop writes and the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// rig is a Board on a stepClock.
type rig struct {
	t    *testing.T
	clk  *stepClock
	b    *Board
	logs *syncBuffer
}

func newRig(t *testing.T, clk *stepClock, ready, activity Light) *rig {
	t.Helper()
	logs := &syncBuffer{}
	r := &rig{t: t, clk: clk, logs: logs}
	r.b = NewBoard(ready, activity, clk, slog.New(slog.NewTextHandler(logs, nil)))
	clk.waitPass()
	t.Cleanup(func() { _ = r.b.Close() })
	return r
}

// gpioRig is a Board driving gpiotest pins: readiness on GPIO 17, activity
// on GPIO 27, both active-high.
func gpioRig(t *testing.T) (r *rig, ready, activity *recPin) {
	t.Helper()
	clk := newStepClock(t)
	ready, activity = newRecPin(clk, 17), newRecPin(clk, 27)
	pins := WithPins(func(n int) (gpio.PinOut, error) {
		switch n {
		case 17:
			return ready, nil
		case 27:
			return activity, nil
		}
		return nil, fmt.Errorf("no GPIO %d on this test board", n)
	})
	rl, err := Open(Spec{Kind: KindGPIO, Pin: 17}, pins)
	if err != nil {
		t.Fatal(err)
	}
	al, err := Open(Spec{Kind: KindGPIO, Pin: 27}, pins)
	if err != nil {
		t.Fatal(err)
	}
	return newRig(t, clk, rl, al), ready, activity
}

// do makes one input to the Board and waits for the loop's pass.
func (r *rig) do(input func(*Board)) {
	r.t.Helper()
	input(r.b)
	r.clk.waitPass()
}

func wantEdges(t *testing.T, led string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s LED edges:\n got %q\nwant %q", led, got, want)
	}
}

func TestReadinessPatterns(t *testing.T) {
	for _, tc := range []struct {
		r      Readiness
		run    time.Duration
		want   []string
		writes int // writes to the pin in all: Open's, the Board's first and the edges
	}{
		{Off, 3 * time.Second, []string{"0s Low"}, 2},
		{Starting, 2100 * time.Millisecond,
			[]string{"0s Low", "0s High", "500ms Low", "1s High", "1.5s Low", "2s High"}, 7},
		{NotReady, 600 * time.Millisecond,
			[]string{"0s Low", "0s High", "125ms Low", "250ms High", "375ms Low", "500ms High"}, 7},
		{Ready, 3500 * time.Millisecond, []string{"0s Low", "0s High"}, 3},
	} {
		t.Run(tc.r.String(), func(t *testing.T) {
			r, ready, activity := gpioRig(t)
			r.do(func(b *Board) { b.SetReadiness(tc.r) })
			if st := r.b.State(); st.Readiness != tc.r || st.ReadyLit != (tc.r != Off) {
				t.Errorf("State() = %+v just after SetReadiness(%v)", st, tc.r)
			}
			r.clk.advance(tc.run)
			wantEdges(t, "readiness", ready.edgeStrings(), tc.want)
			if n := len(ready.recorded()); n != tc.writes {
				t.Errorf("%d writes to the readiness pin, want %d (no write without a change): %v", n, tc.writes, ready.recorded())
			}
			wantEdges(t, "activity", activity.edgeStrings(), []string{"0s Low"})
		})
	}
}

func TestLeaderDoubleBlink(t *testing.T) {
	t.Run("leader while Ready", func(t *testing.T) {
		r, ready, _ := gpioRig(t)
		r.do(func(b *Board) { b.SetReadiness(Ready) })
		r.clk.advance(time.Second)
		r.do(func(b *Board) { b.SetLeader(true) })
		if st := r.b.State(); !st.Leader || st.ReadyLit {
			t.Errorf("State() = %+v as leadership begins, want Leader and the light in its first dark gap", st)
		}
		r.clk.advance(3050 * time.Millisecond) // into the second double blink's first gap
		r.do(func(b *Board) { b.SetLeader(false) })
		r.clk.advance(2 * time.Second)
		wantEdges(t, "readiness", ready.edgeStrings(), []string{
			"0s Low", "0s High",
			"1s Low", "1.15s High", "1.3s Low", "1.45s High",
			"4s Low", "4.05s High", // leadership lost: solid at once
		})
	})
	t.Run("leader becomes Ready", func(t *testing.T) {
		r, ready, _ := gpioRig(t)
		r.do(func(b *Board) { b.SetLeader(true) })
		r.do(func(b *Board) { b.SetReadiness(Ready) })
		r.clk.advance(3500 * time.Millisecond)
		wantEdges(t, "readiness", ready.edgeStrings(), []string{
			"0s Low", "150ms High", "300ms Low", "450ms High",
			"3s Low", "3.15s High", "3.3s Low", "3.45s High",
		})
	})
	t.Run("leader while NotReady", func(t *testing.T) {
		r, ready, _ := gpioRig(t)
		r.do(func(b *Board) { b.SetReadiness(NotReady) })
		r.clk.advance(300 * time.Millisecond)
		r.do(func(b *Board) { b.SetLeader(true) })
		r.clk.advance(300 * time.Millisecond)
		wantEdges(t, "readiness", ready.edgeStrings(), []string{
			"0s Low", "0s High", "125ms Low", "250ms High", "375ms Low", "500ms High",
		})
	})
}

// A Ready board cut off from the control plane shows a long dip every
// 2 s, over leadership; a board not Ready shows its fast blink still.
func TestCutOff(t *testing.T) {
	r, ready, _ := gpioRig(t)
	r.do(func(b *Board) { b.SetReadiness(Ready) })
	r.clk.advance(time.Second)
	r.do(func(b *Board) { b.SetCutOff(true) })
	r.do(func(b *Board) { b.SetLeader(true) })
	if st := r.b.State(); !st.CutOff || !st.ReadyLit || st.Pattern() != "solid-dip" {
		t.Errorf("State() = %+v (%s) when cut off, want CutOff, lit, solid-dip", st, st.Pattern())
	}
	r.clk.advance(4 * time.Second)
	r.do(func(b *Board) { b.SetReadiness(NotReady) })
	r.clk.advance(300 * time.Millisecond)
	r.do(func(b *Board) { b.SetCutOff(false) })
	r.do(func(b *Board) { b.SetLeader(false) })
	r.do(func(b *Board) { b.SetReadiness(Ready) })
	r.clk.advance(time.Second)
	wantEdges(t, "readiness", ready.edgeStrings(), []string{
		"0s Low", "0s High",
		"2.5s Low", "3s High", "4.5s Low", // cut off at 1 s: 1.5 s on, 0.5 s off
		"5s High", "5.125s Low", "5.25s High", // NotReady at 5 s: the fast blink
	})
	if st := r.b.State(); st.Pattern() != "solid" {
		t.Errorf("pattern %s after reaching the control plane again, want solid", st.Pattern())
	}
}

func TestReadinessTransitions(t *testing.T) {
	r, ready, _ := gpioRig(t)
	r.do(func(b *Board) { b.SetReadiness(Starting) })
	r.clk.advance(250 * time.Millisecond)
	r.do(func(b *Board) { b.SetReadiness(Starting) }) // the same: the blink goes on
	r.clk.advance(450 * time.Millisecond)
	r.do(func(b *Board) { b.SetReadiness(NotReady) }) // in a dark phase: lit at once
	r.clk.advance(300 * time.Millisecond)
	r.do(func(b *Board) { b.SetReadiness(Ready) }) // in a lit phase: stays lit
	r.clk.advance(500 * time.Millisecond)
	r.do(func(b *Board) { b.SetReadiness(Off) }) // solid to dark at once
	r.clk.advance(1500 * time.Millisecond)
	r.do(func(b *Board) { b.SetReadiness(NotReady) })
	r.clk.advance(100 * time.Millisecond)
	r.do(func(b *Board) { b.SetReadiness(Off) }) // lit phase to dark at once
	r.clk.advance(time.Second)
	wantEdges(t, "readiness", ready.edgeStrings(), []string{
		"0s Low", "0s High", "500ms Low",
		"700ms High", "825ms Low", "950ms High",
		"1.5s Low",
		"3s High", "3.1s Low",
	})
	if st := r.b.State(); st.Readiness != Off || st.ReadyLit {
		t.Errorf("State() = %+v, want Off and dark", st)
	}
}

// checkFlashes checks the activity LED's edges: every flash exactly
// flashOn long, at least flashGap dark between two, and dark at the end.
// It returns the number of flashes.
func checkFlashes(t *testing.T, edges []write) int {
	t.Helper()
	if len(edges) == 0 || edges[0].l != gpio.Low {
		t.Fatalf("activity LED edges %v do not start dark", edges)
	}
	flashes := 0
	for i := 1; i < len(edges); i++ {
		d := edges[i].at - edges[i-1].at
		switch {
		case edges[i].l == gpio.Low && d != flashOn:
			t.Errorf("flash at %v lasts %v, want %v", edges[i-1].at, d, flashOn)
		case edges[i].l == gpio.High:
			flashes++
			if i > 1 && d < flashGap {
				t.Errorf("flash at %v only %v after the last, want at least %v dark", edges[i].at, d, flashGap)
			}
		}
	}
	if edges[len(edges)-1].l != gpio.Low {
		t.Errorf("activity LED left lit: %v", edges)
	}
	return flashes
}

func TestActivityFlash(t *testing.T) {
	r, ready, activity := gpioRig(t)
	r.clk.advance(time.Second)
	r.do((*Board).Activity)
	if st := r.b.State(); !st.ActivityLit || st.Requests != 1 || st.Flashes != 1 {
		t.Errorf("State() = %+v just after Activity, want lit, 1 request, 1 flash", st)
	}
	r.clk.advance(time.Second)
	wantEdges(t, "activity", activity.edgeStrings(), []string{"0s Low", "1s High", "1.06s Low"})
	wantEdges(t, "readiness", ready.edgeStrings(), []string{"0s Low"})
	if st := r.b.State(); st.ActivityLit || st.Requests != 1 || st.Flashes != 1 || st.Dropped != 0 {
		t.Errorf("State() = %+v, want dark, 1 request, 1 flash, none dropped", st)
	}
}

func TestActivityBurst(t *testing.T) {
	r, _, activity := gpioRig(t)
	for range 10 { // 100 requests in 10 ms
		for range 10 {
			r.do((*Board).Activity)
		}
		r.clk.Step(time.Millisecond)
	}
	r.clk.advance(time.Second)
	wantEdges(t, "activity", activity.edgeStrings(), []string{
		"0s Low", "0s High", "60ms Low", "120ms High", "180ms Low", "240ms High", "300ms Low",
	})
	checkFlashes(t, activity.edges())
	if st := r.b.State(); st.Requests != 100 || st.Flashes != 3 || st.Dropped != 97 {
		t.Errorf("State() = %+v, want 100 requests, 3 flashes, 97 dropped", st)
	}
}

func TestActivityStream(t *testing.T) {
	// A request every 10 ms for 2 s: the LED blinks, never stays lit.
	r, _, activity := gpioRig(t)
	for range 200 {
		r.do((*Board).Activity)
		r.clk.advance(10 * time.Millisecond)
	}
	r.clk.advance(time.Second)
	n := checkFlashes(t, activity.edges())
	st := r.b.State()
	if n < int(2*time.Second/(flashOn+flashGap)) || uint64(n) != st.Flashes {
		t.Errorf("%d flashes seen (State %+v), want one every %v for 2 s", n, st, flashOn+flashGap)
	}
	if st.Requests != 200 || st.Flashes+st.Dropped != st.Requests {
		t.Errorf("State() = %+v: every request is a flash or dropped once the stream ends", st)
	}
}

func TestActivityLateWakeup(t *testing.T) {
	// The loop wakes 70 ms late for each edge, past the end of the gap
	// after a flash: the gap still counts from when the LED went dark, so
	// it is never lit from one flash into the next.
	r, _, activity := gpioRig(t)
	for range 3 {
		r.do((*Board).Activity)
	}
	for range 6 {
		r.clk.Step(130 * time.Millisecond)
	}
	wantEdges(t, "activity", activity.edgeStrings(), []string{
		"0s Low", "0s High", "130ms Low", "260ms High", "390ms Low", "520ms High", "650ms Low",
	})
}

func TestCloseLeavesLEDsOff(t *testing.T) {
	r, ready, activity := gpioRig(t)
	r.do(func(b *Board) { b.SetReadiness(Ready) })
	r.do(func(b *Board) { b.SetLeader(true) })
	r.clk.advance(200 * time.Millisecond) // in the double blink's lit phase
	r.do((*Board).Activity)
	if !ready.Read() || !activity.Read() {
		t.Fatalf("both LEDs should be lit before Close: readiness %v, activity %v", ready.Read(), activity.Read())
	}
	if err := r.b.Close(); err != nil {
		t.Fatal(err)
	}
	if ready.Read() || activity.Read() {
		t.Errorf("after Close: readiness %v, activity %v, want both Low", ready.Read(), activity.Read())
	}
	if st := r.b.State(); st.Readiness != Off || st.Leader || st.ReadyLit || st.ActivityLit || st.Flashes != 1 {
		t.Errorf("State() after Close = %+v, want Off, dark, the flash counted", st)
	}
	if err := r.b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	// Setters after Close neither block nor write.
	n := len(ready.recorded())
	r.b.SetReadiness(Starting)
	r.b.Activity()
	if m := len(ready.recorded()); m != n {
		t.Errorf("%d writes after Close", m-n)
	}
}

// flakyLight fails its writes while fail is set.
type flakyLight struct {
	mu     sync.Mutex
	fail   bool
	lit    bool
	closed bool
}

func (f *flakyLight) Set(on bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return errors.New("flaky: write refused")
	}
	f.lit = on
	return nil
}

func (f *flakyLight) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	if f.fail {
		return errors.New("flaky: close refused")
	}
	f.lit = false
	return nil
}

func (f *flakyLight) set(fail bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = fail
}

func (f *flakyLight) state() (lit, closed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lit, f.closed
}

func TestWriteFailureLoggedOnce(t *testing.T) {
	clk := newStepClock(t)
	ready := &flakyLight{fail: true}
	activity := newRecPin(clk, 27)
	al, err := Open(Spec{Kind: KindGPIO, Pin: 27}, WithPins(func(int) (gpio.PinOut, error) { return activity, nil }))
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, clk, ready, al)                    // write 1 fails: off at start
	r.do(func(b *Board) { b.SetReadiness(Starting) }) // 2: on
	r.clk.advance(time.Second)                        // 3: off at 500 ms, 4: on at 1 s
	r.do((*Board).Activity)                           // 5: the readiness LED again; the activity LED works
	ready.set(false)
	r.clk.advance(100 * time.Millisecond) // the flash ends at 1.06 s, and the readiness LED is written
	st := r.b.State()
	if st.WriteErrors != 5 {
		t.Errorf("State().WriteErrors = %d, want 5", st.WriteErrors)
	}
	if lit, _ := ready.state(); !lit || !st.ReadyLit {
		t.Errorf("readiness LED lit %v (State %+v), want lit: the loop kept going and rewrote it", lit, st)
	}
	wantEdges(t, "activity", activity.edgeStrings(), []string{"0s Low", "1s High", "1.06s Low"})
	logs := r.logs.String()
	if n := strings.Count(logs, "LED write failed"); n != 1 {
		t.Errorf("the failure logged %d times, want once:\n%s", n, logs)
	}
	if !strings.Contains(logs, "flaky: write refused") || !strings.Contains(logs, "led=readiness") {
		t.Errorf("the log does not say which LED or why:\n%s", logs)
	}
	if n := strings.Count(logs, "LED write works again"); n != 1 {
		t.Errorf("the recovery logged %d times, want once:\n%s", n, logs)
	}

	ready.set(true)
	err = r.b.Close()
	if err == nil || !strings.Contains(err.Error(), "flaky: close refused") {
		t.Errorf("Close() = %v, want the Light's close error", err)
	}
	if _, closed := ready.state(); !closed || activity.Read() == gpio.High {
		t.Errorf("Close closes every Light even when one fails: readiness closed %v, activity lit %v", closed, activity.Read())
	}
}

// stuckLight's writes block until released.
type stuckLight struct{ release chan struct{} }

func (s stuckLight) Set(bool) error { <-s.release; return nil }
func (s stuckLight) Close() error   { return nil }

func TestSettersNeverBlock(t *testing.T) {
	stuck := stuckLight{release: make(chan struct{})}
	b := NewBoard(stuck, stuck, nil, slog.New(slog.DiscardHandler))
	done := make(chan State)
	go func() {
		b.SetReadiness(Ready)
		b.SetLeader(true)
		for range 1000 {
			b.Activity()
		}
		b.SetReadiness(NotReady)
		done <- b.State()
	}()
	select {
	case <-done:
	case <-time.After(waitLimit):
		t.Fatal("the Board's setters blocked on a stuck LED write")
	}
	close(stuck.release)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}
