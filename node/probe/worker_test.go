package probe

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// fakeClock stands still until the test advances it; After's channels fire
// when it passes their time.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
	added   chan struct{} // a token when a waiter is added
}

type waiter struct {
	at time.Time
	c  chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), added: make(chan struct{}, 1)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.waiters = append(c.waiters, waiter{c.now.Add(d), ch})
	select {
	case c.added <- struct{}{}:
	default:
	}
	return ch
}

// Advance moves the clock d forward and fires the waiters due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
		} else {
			w.c <- c.now
		}
	}
	c.waiters = kept
}

func (c *fakeClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// waitIdle waits until the worker waits on the clock (true) or has
// returned (false), failing the test after 10 seconds.
func (c *fakeClock) waitIdle(t *testing.T, done <-chan struct{}) bool {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for c.pending() == 0 {
		select {
		case <-c.added:
		case <-done:
			return false
		case <-deadline:
			t.Fatal("the worker neither waits on the clock nor has returned")
		}
	}
	return true
}

// event is one OnChange call, with how many probes had run by then.
type event struct {
	probes int
	kind   Kind
	result Result
}

func (e event) String() string { return fmt.Sprintf("%d:%v:%v", e.probes, e.kind, e.result) }

// harness runs a worker with an exec probe answered from a script:
// 'S' exits 0, 'F' exits 1, 'U' is an error of the runtime (Unknown).
type harness struct {
	t      *testing.T
	clock  *fakeClock
	exec   *fakeExec
	w      *Worker
	mu     sync.Mutex
	events []event
	done   chan struct{}
}

func newHarness(t *testing.T, kind Kind, p *corev1.Probe, script string, configure func(*WorkerConfig)) *harness {
	h := &harness{t: t, clock: newFakeClock(), exec: &fakeExec{}, done: make(chan struct{})}
	for _, c := range script {
		switch c {
		case 'S':
			h.exec.script = append(h.exec.script, execAnswer{code: 0})
		case 'F':
			h.exec.script = append(h.exec.script, execAnswer{code: 1, out: "bad"})
		case 'U':
			h.exec.script = append(h.exec.script, execAnswer{err: errors.New("runtime down")})
		}
	}
	cfg := WorkerConfig{Kind: kind, Probe: p, Target: Target{ContainerID: "c1"}, Exec: h.exec, Clock: h.clock,
		Logger: slog.New(slog.DiscardHandler),
		OnChange: func(k Kind, r Result, _ string) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.events = append(h.events, event{h.exec.count(), k, r})
		}}
	if configure != nil {
		configure(&cfg)
	}
	w, err := NewWorker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.w = w
	return h
}

func (h *harness) start() {
	go func() {
		defer close(h.done)
		h.w.Run(h.t.Context())
	}()
	h.t.Cleanup(func() {
		h.w.Stop()
		<-h.done
	})
}

// drive lets the worker run its whole script: each time it waits, the
// clock moves on by step; it returns false if the worker returned first.
func (h *harness) drive(step time.Duration) bool {
	for {
		if !h.clock.waitIdle(h.t, h.done) {
			return false
		}
		if h.exec.count() >= len(h.exec.script) {
			return true
		}
		h.clock.Advance(step)
	}
}

func (h *harness) got() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var s []string
	for _, e := range h.events {
		s = append(s, e.String())
	}
	return strings.Join(s, " ")
}

func withExec(p corev1.Probe) *corev1.Probe {
	p.ProbeHandler = corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"check"}}}
	return &p
}

func TestWorkerThresholds(t *testing.T) {
	tests := []struct {
		name     string
		kind     Kind
		probe    corev1.Probe
		script   string
		want     string // events, as probes:kind:result
		returned bool   // Run returned on its own
	}{
		{"liveness fails after 3 failures", Liveness, corev1.Probe{}, "SFFSFFF", "7:liveness:Failure", true},
		{"liveness threshold 1", Liveness, corev1.Probe{FailureThreshold: 1}, "SSF", "3:liveness:Failure", true},
		{"unknown results are thrown away", Liveness, corev1.Probe{}, "FUFUUF", "6:liveness:Failure", true},
		{"liveness success is no change", Liveness, corev1.Probe{}, "SSSS", "", false},
		{"readiness starts not ready", Readiness, corev1.Probe{}, "FFFFS", "5:readiness:Success", false},
		{"readiness success threshold", Readiness, corev1.Probe{SuccessThreshold: 2}, "SFSSFFFS", "4:readiness:Success 7:readiness:Failure", false},
		{"readiness flaps", Readiness, corev1.Probe{FailureThreshold: 2}, "SFFSFS", "1:readiness:Success 3:readiness:Failure 4:readiness:Success", false},
		{"startup succeeds once", Startup, corev1.Probe{FailureThreshold: 30}, "FFS", "3:startup:Success", true},
		{"startup fails", Startup, corev1.Probe{FailureThreshold: 3}, "FFFS", "3:startup:Failure", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.kind, withExec(tt.probe), tt.script, nil)
			h.start()
			idle := h.drive(10 * time.Second)
			if got := h.got(); got != tt.want {
				t.Errorf("events %q, want %q", got, tt.want)
			}
			if idle == tt.returned {
				t.Errorf("Run returned: %v, want %v", !idle, tt.returned)
			}
			last := initial(tt.kind)
			if len(h.events) > 0 {
				last = h.events[len(h.events)-1].result
			}
			if got := h.w.Result(); got != last {
				t.Errorf("Result() = %v, want %v", got, last)
			}
		})
	}
}

func TestWorkerPeriod(t *testing.T) {
	h := newHarness(t, Readiness, withExec(corev1.Probe{PeriodSeconds: 3}), "SS", nil)
	h.start()
	h.clock.waitIdle(t, h.done)
	h.clock.Advance(2 * time.Second)
	if n := h.exec.count(); n != 1 {
		t.Fatalf("%d probes 2s into a 3s period, want 1", n)
	}
	h.clock.Advance(time.Second)
	h.clock.waitIdle(t, h.done)
	if n := h.exec.count(); n != 2 {
		t.Fatalf("%d probes after a period, want 2", n)
	}
}

func TestWorkerInitialDelay(t *testing.T) {
	// The container started 3s before the worker: 2s of the 5s delay remain.
	var start time.Time
	h := newHarness(t, Readiness, withExec(corev1.Probe{InitialDelaySeconds: 5}), "S", func(c *WorkerConfig) {
		start = c.Clock.Now().Add(-3 * time.Second)
		c.Started = start
	})
	h.start()
	h.clock.waitIdle(t, h.done)
	h.clock.Advance(1 * time.Second)
	if n := h.exec.count(); n != 0 {
		t.Fatalf("%d probes 4s after the start, want none before 5s", n)
	}
	h.clock.Advance(1 * time.Second)
	h.clock.waitIdle(t, h.done) // the wait for the next period
	if n := h.exec.count(); n != 1 {
		t.Fatalf("%d probes 5s after the start, want 1", n)
	}
	if got := h.got(); got != "1:readiness:Success" {
		t.Errorf("events %q", got)
	}
}

func TestWorkerStartupGate(t *testing.T) {
	startup := newHarness(t, Startup, withExec(corev1.Probe{}), "FFS", nil)
	ready := newHarness(t, Readiness, withExec(corev1.Probe{}), "S", func(c *WorkerConfig) { c.AwaitStartup = true })
	ready.start()
	startup.start()
	if startup.drive(10 * time.Second) {
		t.Fatal("the startup worker still runs after its success")
	}
	if got := startup.got(); got != "3:startup:Success" {
		t.Fatalf("startup events %q", got)
	}
	if n := ready.exec.count(); n != 0 || ready.clock.pending() != 0 {
		t.Fatalf("the readiness worker probed %d times before SetStarted", n)
	}
	ready.w.SetStarted()
	ready.w.SetStarted() // again: no panic
	ready.clock.waitIdle(t, ready.done)
	if got := ready.got(); got != "1:readiness:Success" {
		t.Errorf("readiness events %q after SetStarted", got)
	}
}

func TestWorkerStop(t *testing.T) {
	h := newHarness(t, Readiness, withExec(corev1.Probe{}), "F", nil)
	h.start()
	h.clock.waitIdle(t, h.done)
	h.w.Stop()
	select {
	case <-h.done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after Stop")
	}
	// Stopped before Run: Run returns at once without probing.
	h2 := newHarness(t, Readiness, withExec(corev1.Probe{}), "S", nil)
	h2.w.Stop()
	h2.w.Run(t.Context())
	if n := h2.exec.count(); n != 0 {
		t.Errorf("a stopped worker probed %d times", n)
	}
}

func TestNewWorkerRejects(t *testing.T) {
	ok := func(k Kind, r Result, m string) {}
	tcp := corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}
	tests := []struct {
		name string
		cfg  WorkerConfig
		msg  string
	}{
		{"no probe", WorkerConfig{Kind: Liveness, OnChange: ok}, "livenessProbe: missing"},
		{"no OnChange", WorkerConfig{Kind: Liveness, Probe: &corev1.Probe{ProbeHandler: tcp}}, "no OnChange"},
		{"bad kind", WorkerConfig{Kind: 7, Probe: &corev1.Probe{ProbeHandler: tcp}, OnChange: ok}, "kind Kind(7)"},
		{"no handler", WorkerConfig{Kind: Readiness, Probe: &corev1.Probe{}, OnChange: ok}, "readinessProbe.probe has 0 of"},
		{"negative period", WorkerConfig{Kind: Readiness, Probe: &corev1.Probe{ProbeHandler: tcp, PeriodSeconds: -1}, OnChange: ok},
			"readinessProbe.periodSeconds: -1: must not be negative"},
		{"negative delay", WorkerConfig{Kind: Startup, Probe: &corev1.Probe{ProbeHandler: tcp, InitialDelaySeconds: -5}, OnChange: ok},
			"startupProbe.initialDelaySeconds: -5"},
		{"liveness success threshold", WorkerConfig{Kind: Liveness, Probe: &corev1.Probe{ProbeHandler: tcp, SuccessThreshold: 2}, OnChange: ok},
			"livenessProbe.successThreshold: 2: must be 1 for liveness probes"},
		{"startup success threshold", WorkerConfig{Kind: Startup, Probe: &corev1.Probe{ProbeHandler: tcp, SuccessThreshold: 3}, OnChange: ok},
			"startupProbe.successThreshold: 3"},
		{"exec without Execer", WorkerConfig{Kind: Liveness, Probe: withExec(corev1.Probe{}), OnChange: ok}, "livenessProbe.exec: no Execer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewWorker(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("NewWorker: %v; want an error with %q", err, tt.msg)
			}
		})
	}
}

func TestWorkerDefaults(t *testing.T) {
	p := withExec(corev1.Probe{})
	w, err := NewWorker(WorkerConfig{Kind: Readiness, Probe: p, Exec: &fakeExec{}, OnChange: func(Kind, Result, string) {}})
	if err != nil {
		t.Fatal(err)
	}
	got := w.probe
	if got.PeriodSeconds != 10 || got.TimeoutSeconds != 1 || got.SuccessThreshold != 1 || got.FailureThreshold != 3 {
		t.Errorf("defaults: period %d, timeout %d, success %d, failure %d; want 10, 1, 1, 3",
			got.PeriodSeconds, got.TimeoutSeconds, got.SuccessThreshold, got.FailureThreshold)
	}
	if p.PeriodSeconds != 0 {
		t.Error("NewWorker changed the caller's probe")
	}
	if w.Result() != Failure {
		t.Errorf("a new readiness worker's result is %v, want Failure", w.Result())
	}
}
