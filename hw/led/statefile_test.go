package led

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// seen records what a watcher was told.
type seen struct {
	mu     sync.Mutex
	states []State
}

func (s *seen) watch(st State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.states = append(s.states, st)
}

func (s *seen) patterns() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var p []string
	for _, st := range s.states {
		lit := "dark"
		if st.ReadyLit {
			lit = "lit"
		}
		p = append(p, st.Pattern()+" "+lit)
	}
	return p
}

func TestWatch(t *testing.T) {
	r, _, _ := gpioRig(t)
	var w seen
	r.do(func(b *Board) { b.Watch(w.watch) })
	if got := w.patterns(); !slices.Equal(got, []string{"off dark"}) {
		t.Fatalf("a new watcher was told %q, want the state now: off dark", got)
	}
	r.do(func(b *Board) { b.SetReadiness(NotReady) })
	r.clk.advance(300 * time.Millisecond)
	r.do(func(b *Board) { b.SetReadiness(Ready) })
	r.do(func(b *Board) { b.SetLeader(true) })
	r.do(func(b *Board) { b.Activity() })
	r.clk.advance(time.Second)
	if err := r.b.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{"off dark",
		"fast-blink lit", "fast-blink dark", "fast-blink lit", // 0, 125, 250 ms
		"solid lit",
		"solid-leader dark",                                         // the first dip
		"solid-leader dark",                                         // a flash starts: the activity LED lit
		"solid-leader dark",                                         // 60 ms: the flash ends
		"solid-leader lit", "solid-leader dark", "solid-leader lit", // 150, 300, 450 ms
		"off dark"} // Close
	got := w.patterns()
	if !slices.Equal(got, want) {
		t.Errorf("watcher was told\n %q\nwant\n %q", got, want)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.states); w.states[n-1].ActivityLit || w.states[n-1].Flashes != 1 {
		t.Errorf("last state %+v, want dark and the one flash counted", w.states[n-1])
	}
}

func TestStateFile(t *testing.T) {
	r, _, _ := gpioRig(t)
	path := filepath.Join(t.TempDir(), StateFileName)
	r.do(func(b *Board) { b.Watch(StateFile(path, slog.Default())) })
	r.do(func(b *Board) { b.SetReadiness(Ready) })
	r.do(func(b *Board) { b.SetLeader(true) })
	r.clk.advance(350 * time.Millisecond) // into the second dip
	st, err := ReadStateFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := (State{Readiness: Ready, Leader: true}); st != want || st.Pattern() != "solid-leader" {
		t.Errorf("state file holds %+v (%s), want %+v", st, st.Pattern(), want)
	}
	// The leader's dips are edges, not changes of pattern: the file is not
	// written again (an idle board writes nothing).
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	for range 8 {
		r.clk.advance(400 * time.Millisecond)
	}
	if after, err := os.Stat(path); err != nil || !os.SameFile(before, after) {
		t.Errorf("the state file was replaced at an edge of the pattern (%v)", err)
	}
	if err := r.b.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err := ReadStateFile(path); err != nil || st != (State{}) {
		t.Errorf("after Close the state file holds %+v (%v), want off", st, err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestStateFileErrors(t *testing.T) {
	dir := t.TempDir()
	logs := &syncBuffer{}
	write := StateFile(filepath.Join(dir, "gone", StateFileName), slog.New(slog.NewTextHandler(logs, nil)))
	write(State{})
	write(State{Readiness: Ready})
	if n := strings.Count(logs.String(), "LED state not written"); n != 1 {
		t.Errorf("a failing state file was logged %d times, want once:\n%s", n, logs)
	}
	if err := os.Mkdir(filepath.Join(dir, "gone"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(State{Readiness: Starting})
	if !strings.Contains(logs.String(), "LED state written again") {
		t.Errorf("recovery not logged:\n%s", logs)
	}

	for _, tc := range []struct{ body, want string }{
		{`{"readiness":"blinking"}`, `readiness "blinking": want off, starting, not-ready or ready`},
		{`{"readiness":"ready"`, "unexpected end of JSON input"},
	} {
		path := filepath.Join(dir, "bad.json")
		if err := os.WriteFile(path, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadStateFile(path); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("ReadStateFile(%s) = %v, want an error naming the file and %q", tc.body, err, tc.want)
		}
	}
	if _, err := ReadStateFile(filepath.Join(dir, "none.json")); err == nil {
		t.Error("ReadStateFile of no file: no error")
	}
}

func TestReadyLitAt(t *testing.T) {
	at := func(ms int64) time.Time { return time.UnixMilli(ms) }
	leader := State{Readiness: Ready, Leader: true}
	for _, tc := range []struct {
		st   State
		t    time.Time
		want bool
	}{
		{State{}, at(0), false},
		{State{Readiness: Ready}, at(123), true},
		{leader, at(100), false}, // the first dip
		{leader, at(200), true},
		{leader, at(350), false}, // the second dip
		{leader, at(1000), true},
		{State{Readiness: NotReady}, at(100), true},
		{State{Readiness: NotReady}, at(130), false},
		{State{Readiness: Starting}, at(600), false},
	} {
		if got := tc.st.ReadyLitAt(tc.t); got != tc.want {
			t.Errorf("%s at %v: lit %v, want %v", tc.st.Pattern(), tc.t.UnixMilli(), got, tc.want)
		}
	}
}
