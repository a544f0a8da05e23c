package probe

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Kind says which of a container's probes a Worker runs.
type Kind int

const (
	// Liveness failing gets the container restarted.
	Liveness Kind = iota
	// Readiness says whether the container takes traffic.
	Readiness
	// Startup holds the other two back until the container has started.
	Startup
)

// String is the kind's name as in "livenessProbe", without "Probe".
func (k Kind) String() string {
	switch k {
	case Liveness:
		return "liveness"
	case Readiness:
		return "readiness"
	case Startup:
		return "startup"
	default:
		return fmt.Sprintf("Kind(%d)", int(k))
	}
}

// Clock is a Worker's time.
type Clock interface {
	Now() time.Time
	// After sends the time on the channel once d has passed.
	After(d time.Duration) <-chan time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// WorkerConfig is what a Worker runs.
type WorkerConfig struct {
	// Kind is the probe's kind.
	Kind Kind
	// Probe is the container's probe of that kind (required). Unset
	// fields take the API's defaults: periodSeconds 10, timeoutSeconds 1,
	// successThreshold 1, failureThreshold 3.
	Probe *corev1.Probe
	// Target is the container probed.
	Target Target
	// Exec runs exec probes (required for them).
	Exec Execer
	// Started is when the container started; initialDelaySeconds counts
	// from it. Zero: when Run starts.
	Started time.Time
	// AwaitStartup: the container has a startup probe, so a liveness or
	// readiness worker probes only once SetStarted has been called.
	AwaitStartup bool
	// OnChange is told each change of the probe's result (required). It is
	// called from Run's goroutine and should not block.
	OnChange func(k Kind, r Result, message string)
	// Clock is the time source; nil: the system's.
	Clock Clock
	// Logger; nil: slog.Default().
	Logger *slog.Logger
}

// Worker probes one container with one probe until stopped. Its result
// starts as Failure for readiness (not ready before a first success),
// Success for liveness and Unknown for startup; OnChange hears each change.
//
// A Worker serves one run of its container: when a liveness or startup
// probe fails, or a startup probe succeeds, Run returns (the container is
// to be restarted, or the startup probe is done). Make a new Worker for a
// restarted container.
type Worker struct {
	cfg       WorkerConfig
	probe     corev1.Probe // cfg.Probe with defaults
	period    time.Duration
	clock     Clock
	log       *slog.Logger
	th        thresholds
	startOnce sync.Once
	started   chan struct{} // closed by SetStarted

	mu      sync.Mutex
	result  Result
	stopped bool
	cancel  context.CancelFunc // of a running Run
}

// NewWorker checks c and returns its Worker.
func NewWorker(c WorkerConfig) (*Worker, error) {
	if c.Kind < Liveness || c.Kind > Startup {
		return nil, fmt.Errorf("probe: kind %v: want Liveness, Readiness or Startup", c.Kind)
	}
	field := c.Kind.String() + "Probe"
	if c.Probe == nil {
		return nil, fmt.Errorf("probe: %s: missing", field)
	}
	if c.OnChange == nil {
		return nil, fmt.Errorf("probe: %s: no OnChange to report to", field)
	}
	p, err := withDefaults(*c.Probe, c.Kind)
	if err != nil {
		return nil, fmt.Errorf("probe: %s.%w", field, err)
	}
	if p.Exec != nil && c.Exec == nil {
		return nil, fmt.Errorf("probe: %s.exec: no Execer to run it", field)
	}
	if c.Clock == nil {
		c.Clock = systemClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	w := &Worker{
		cfg:     c,
		probe:   p,
		period:  time.Duration(p.PeriodSeconds) * time.Second,
		clock:   c.Clock,
		log:     c.Logger.With("probe", c.Kind.String(), "container", c.Target.ContainerID),
		started: make(chan struct{}),
		result:  initial(c.Kind),
	}
	w.th = thresholds{success: int(p.SuccessThreshold), failure: int(p.FailureThreshold), state: w.result}
	return w, nil
}

// initial is a kind's result before its first (thresholded) outcome.
func initial(k Kind) Result {
	switch k {
	case Readiness:
		return Failure
	case Liveness:
		return Success
	default:
		return Unknown
	}
}

// withDefaults checks p's timing and fills in the API's defaults. Its
// errors name the field, after the probe's own name.
func withDefaults(p corev1.Probe, k Kind) (corev1.Probe, error) {
	if err := checkHandler(&p.ProbeHandler); err != nil {
		return p, err
	}
	fields := []struct {
		name string
		v    *int32
		def  int32
	}{
		{"initialDelaySeconds", &p.InitialDelaySeconds, 0},
		{"periodSeconds", &p.PeriodSeconds, 10},
		{"timeoutSeconds", &p.TimeoutSeconds, 1},
		{"successThreshold", &p.SuccessThreshold, 1},
		{"failureThreshold", &p.FailureThreshold, 3},
	}
	for _, f := range fields {
		switch {
		case *f.v < 0:
			return p, fmt.Errorf("%s: %d: must not be negative", f.name, *f.v)
		case *f.v == 0:
			*f.v = f.def
		}
	}
	if k != Readiness && p.SuccessThreshold != 1 {
		return p, fmt.Errorf("successThreshold: %d: must be 1 for %s probes", p.SuccessThreshold, k)
	}
	return p, nil
}

// Result is the worker's current (thresholded) result.
func (w *Worker) Result() Result {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.result
}

// SetStarted tells a worker made with AwaitStartup that the container's
// startup probe has succeeded.
func (w *Worker) SetStarted() {
	w.startOnce.Do(func() { close(w.started) })
}

// Stop ends Run (and a probe in flight), or keeps it from starting.
func (w *Worker) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	if w.cancel != nil {
		w.cancel()
	}
}

// Run probes until ctx ends, Stop is called, or the probe is done (see
// Worker). Results cut short by the end are not reported. Call it once.
func (w *Worker) Run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	w.cancel = cancel
	w.mu.Unlock()

	started := w.cfg.Started
	if started.IsZero() {
		started = w.clock.Now()
	}
	delay := time.Duration(w.probe.InitialDelaySeconds) * time.Second
	if !w.sleep(ctx, started.Add(delay).Sub(w.clock.Now())) {
		return
	}
	if w.cfg.AwaitStartup && w.cfg.Kind != Startup {
		select {
		case <-w.started:
		case <-ctx.Done():
			return
		}
	}
	var lastUnknown string
	for {
		next := w.clock.Now().Add(w.period)
		r, msg := Do(ctx, &w.probe, w.cfg.Target, w.cfg.Exec)
		if ctx.Err() != nil {
			return
		}
		if r == Unknown {
			// Thrown away, as the kubelet does; said once per run of them.
			if msg != lastUnknown {
				w.log.Warn("probe: cannot run the probe", "error", msg)
			}
			lastUnknown = msg
		} else {
			lastUnknown = ""
			if w.th.observe(r) && w.report(r, msg) {
				return
			}
		}
		if !w.sleep(ctx, next.Sub(w.clock.Now())) {
			return
		}
	}
}

// report tells a change of result and says whether the worker is done.
func (w *Worker) report(r Result, msg string) (done bool) {
	w.mu.Lock()
	w.result = r
	w.mu.Unlock()
	w.log.Debug("probe: result changed", "result", r, "message", msg)
	w.cfg.OnChange(w.cfg.Kind, r, msg)
	return w.cfg.Kind == Startup || (w.cfg.Kind == Liveness && r == Failure)
}

// sleep waits d on the worker's clock; false if ctx ended first.
func (w *Worker) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	select {
	case <-w.clock.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}

// thresholds turns a probe's outcomes into its result: a result changes
// after success (or failure) outcomes in a row, as many as its threshold.
type thresholds struct {
	success, failure int
	last             Result // the latest outcome
	run              int    // how many of it in a row
	state            Result // the result
}

// observe takes one outcome (Success or Failure) and says whether the
// result changed.
func (th *thresholds) observe(r Result) bool {
	if r == th.last {
		th.run++
	} else {
		th.last, th.run = r, 1
	}
	need := th.failure
	if r == Success {
		need = th.success
	}
	if th.run < need || r == th.state {
		return false
	}
	th.state = r
	return true
}
