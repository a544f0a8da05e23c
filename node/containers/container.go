package containers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"syscall"
	"time"

	"github.com/containerd/containerd"
	"github.com/containerd/containerd/cio"
	"github.com/containerd/containerd/errdefs"
	"github.com/moby/sys/signal"
)

// Labels the runtime keeps on containers (besides the caller's): what it
// needs to report a container's life after the agent restarted.
const (
	labelLogPath    = "isle.dev/log-path"
	labelCgroup     = "isle.dev/cgroup"
	labelStdinOnce  = "isle.dev/stdin-once"
	labelStartedAt  = "isle.dev/started-at"
	labelFinishedAt = "isle.dev/finished-at"
	labelExitCode   = "isle.dev/exit-code"
	labelOOMKilled  = "isle.dev/oom-killed"
	labelReason     = "isle.dev/reason"
	labelMessage    = "isle.dev/message"
)

// ErrStartFailed: the container's process could not be started (a
// missing binary, a bad working directory); the container is kept as
// exited with reason StartError and exit code 128, as Kubernetes reports.
var ErrStartFailed = errors.New("StartError")

// ErrNotFound: no such container.
var ErrNotFound = errors.New("no such container")

// State is a container's state.
type State int

// The states of a container.
const (
	Created State = iota // created, not started
	Running
	Exited
)

func (s State) String() string {
	return [...]string{"created", "running", "exited"}[s]
}

// Container is a container as containerd knows it.
type Container struct {
	ID     string
	Labels map[string]string
	// Image is the reference it was created from.
	Image                string
	State                State
	CreatedAt, StartedAt time.Time
	FinishedAt           time.Time
	ExitCode             int
	OOMKilled            bool
	// Reason and Message are set when the process could not start
	// ("StartError" and the runtime's error).
	Reason, Message string
	// Cgroup is the container's cgroup path (relative to the hierarchy's root).
	Cgroup string
	Pid    uint32
}

// NewID makes a container ID.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Create creates the container of s and its task (the process, not yet
// started), with its output going to s.LogPath.
// A process that cannot start (ErrStartFailed) leaves the container
// exited, with the reason recorded.
func (r *Runtime) Create(ctx context.Context, s Spec) error {
	if err := s.validate(); err != nil {
		return err
	}
	ctx = r.ns(ctx)
	img, err := r.client.GetImage(ctx, s.Image)
	if err != nil {
		return fmt.Errorf("containers: create %s: image %s: %w", s.ID, s.Image, err)
	}
	if err := r.unpack(ctx, img); err != nil {
		return err
	}
	ispec, err := img.Spec(ctx)
	if err != nil {
		return fmt.Errorf("containers: create %s: image config of %s: %w", s.ID, s.Image, err)
	}
	labels := map[string]string{labelLogPath: s.LogPath}
	for k, v := range s.Labels {
		labels[k] = v
	}
	if s.CgroupParent != "" {
		labels[labelCgroup] = s.CgroupParent + "/" + s.ID
	}
	if s.StdinOnce {
		labels[labelStdinOnce] = "true"
	}
	if ispec.Config.StopSignal != "" {
		labels["isle.dev/stop-signal"] = ispec.Config.StopSignal
	}
	c, err := r.client.NewContainer(ctx, s.ID,
		containerd.WithImage(img),
		containerd.WithSnapshotter(r.cfg.Snapshotter),
		containerd.WithNewSnapshot(s.ID, img),
		containerd.WithContainerLabels(labels),
		containerd.WithRuntime("io.containerd.runc.v2", r.runcOptions()),
		containerd.WithNewSpec(s.specOpts(img, ispec.Config)...))
	if err != nil {
		return fmt.Errorf("containers: create %s: %w", s.ID, err)
	}
	st, err := r.openOutput(fifoConfig(r.cfg.FIFODir, s.ID, s.TTY, s.Stdin), s.LogPath, s.StdinOnce)
	if err != nil {
		_ = c.Delete(context.WithoutCancel(ctx), containerd.WithSnapshotCleanup)
		return err
	}
	if _, terr := c.NewTask(ctx, func(string) (cio.IO, error) { return st, nil }); terr != nil {
		st.finish(0)
		removeFIFOs(r.cfg.FIFODir, s.ID)
		return r.failStart(ctx, c, terr)
	}
	r.mu.Lock()
	r.live[s.ID] = st
	r.mu.Unlock()
	return nil
}

func (r *Runtime) openOutput(cfg cio.Config, logPath string, stdinOnce bool) (*stdio, error) {
	var log LogFile
	if r.cfg.OpenLog != nil && logPath != "" {
		var err error
		if log, err = r.cfg.OpenLog(logPath); err != nil {
			return nil, fmt.Errorf("containers: open log: %w", err)
		}
	}
	st, err := openStdio(cfg, log, stdinOnce)
	if err != nil && log != nil {
		_ = log.Close()
	}
	return st, err
}

// Start starts a created container's process.
func (r *Runtime) Start(ctx context.Context, id string) error {
	ctx = r.ns(ctx)
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return r.notFound("start", id, err)
	}
	t, err := c.Task(ctx, nil)
	if err != nil {
		return r.notFound("start", id, err)
	}
	// The start time is recorded before the process starts: one that
	// exits at once is reaped (by the exit event) before Start returns,
	// and must not be taken for one that never started.
	if _, err := c.SetLabels(ctx, map[string]string{labelStartedAt: time.Now().UTC().Format(time.RFC3339Nano)}); err != nil {
		return fmt.Errorf("containers: start %s: record start time: %w", id, err)
	}
	if err := t.Start(ctx); err != nil {
		r.mu.Lock()
		st := r.live[id]
		delete(r.live, id)
		r.mu.Unlock()
		if st != nil {
			st.finish(0)
		}
		_, _ = t.Delete(ctx, containerd.WithProcessKill)
		return r.failStart(ctx, c, err)
	}
	return nil
}

// failStart records a process that could not start as an exit (code
// 128, reason StartError, the runtime's message) and returns
// ErrStartFailed with that message.
func (r *Runtime) failStart(ctx context.Context, c containerd.Container, cause error) error {
	msg := cause.Error()
	if len(msg) > 1024 {
		msg = msg[:1024]
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	if _, err := c.SetLabels(ctx, map[string]string{labelExitCode: "128", labelReason: "StartError",
		labelMessage: msg, labelFinishedAt: now, labelStartedAt: now}); err != nil {
		return fmt.Errorf("containers: %s: %w: %s (and recording it failed: %v)", c.ID(), ErrStartFailed, msg, err)
	}
	return fmt.Errorf("containers: %s: %w: %s", c.ID(), ErrStartFailed, msg)
}

func (r *Runtime) notFound(op, id string, err error) error {
	if errdefs.IsNotFound(err) {
		return fmt.Errorf("containers: %s %s: %w", op, id, ErrNotFound)
	}
	return fmt.Errorf("containers: %s %s: %w", op, id, err)
}

// Stop stops a container's process: its stop signal (the image's, else
// SIGTERM), then SIGKILL after grace. It returns once the process is gone
// and its exit recorded.
func (r *Runtime) Stop(ctx context.Context, id string, grace time.Duration) error {
	ctx = r.ns(ctx)
	c, err := r.client.LoadContainer(ctx, id)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("containers: stop %s: %w", id, err)
	}
	t, err := c.Task(ctx, nil)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("containers: stop %s: %w", id, err)
	}
	if st, err := t.Status(ctx); err == nil && st.Status != containerd.Stopped {
		exited, err := t.Wait(ctx)
		if err != nil {
			return fmt.Errorf("containers: stop %s: %w", id, err)
		}
		sig := syscall.SIGTERM
		if labels, err := c.Labels(ctx); err == nil && labels["isle.dev/stop-signal"] != "" {
			if s, err := signal.ParseSignal(labels["isle.dev/stop-signal"]); err == nil {
				sig = s
			}
		}
		if st.Status == containerd.Created {
			sig = syscall.SIGKILL
		}
		if grace > 0 && sig != syscall.SIGKILL {
			if err := t.Kill(ctx, sig); err != nil && !errdefs.IsNotFound(err) {
				return fmt.Errorf("containers: stop %s: signal %v: %w", id, sig, err)
			}
			select {
			case <-exited:
			case <-time.After(grace):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if st, err := t.Status(ctx); err == nil && st.Status != containerd.Stopped {
			if err := t.Kill(ctx, syscall.SIGKILL, containerd.WithKillAll); err != nil && !errdefs.IsNotFound(err) {
				return fmt.Errorf("containers: stop %s: SIGKILL: %w", id, err)
			}
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				return fmt.Errorf("containers: stop %s: still running 10 s after SIGKILL", id)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	_, err = r.reap(ctx, id)
	return err
}

// reap records the exit of a container whose process has ended (exit
// code, time, OOM kill) in its labels and deletes its task, freeing the
// shim. It reports whether there was an exit to record.
func (r *Runtime) reap(ctx context.Context, id string) (bool, error) {
	r.reapMu.Lock()
	defer r.reapMu.Unlock()
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return false, r.notFound("reap", id, err)
	}
	t, err := c.Task(ctx, nil)
	if errdefs.IsNotFound(err) {
		return false, nil // reaped already, or never got a task
	}
	if err != nil {
		return false, fmt.Errorf("containers: reap %s: %w", id, err)
	}
	st, err := t.Status(ctx)
	if err != nil {
		return false, fmt.Errorf("containers: reap %s: %w", id, err)
	}
	if st.Status != containerd.Stopped {
		return false, nil
	}
	labels, err := c.Labels(ctx)
	if err != nil {
		return false, fmt.Errorf("containers: reap %s: %w", id, err)
	}
	r.mu.Lock()
	oom := r.oom[id]
	delete(r.oom, id)
	s := r.live[id]
	delete(r.live, id)
	r.mu.Unlock()
	if !oom && labels[labelCgroup] != "" {
		oom = cgroupOOMKilled(labels[labelCgroup])
	}
	finished := st.ExitTime
	if finished.IsZero() {
		finished = time.Now()
	}
	rec := map[string]string{
		labelExitCode:   strconv.Itoa(int(st.ExitStatus)),
		labelFinishedAt: finished.UTC().Format(time.RFC3339Nano),
	}
	if oom {
		rec[labelOOMKilled] = "true"
	}
	if _, err := c.SetLabels(ctx, rec); err != nil {
		return false, fmt.Errorf("containers: reap %s: record exit: %w", id, err)
	}
	if s != nil {
		s.finish(2 * time.Second)
	}
	if _, err := t.Delete(ctx); err != nil && !errdefs.IsNotFound(err) {
		return true, fmt.Errorf("containers: reap %s: delete task: %w", id, err)
	}
	return true, nil
}

// Remove deletes a container (killing its process if it runs) with its
// writable layer; its log stays.
func (r *Runtime) Remove(ctx context.Context, id string) error {
	ctx = r.ns(ctx)
	if err := r.Stop(ctx, id, 0); err != nil {
		return err
	}
	c, err := r.client.LoadContainer(ctx, id)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("containers: remove %s: %w", id, err)
	}
	if err := c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("containers: remove %s: %w", id, err)
	}
	r.mu.Lock()
	s := r.live[id]
	delete(r.live, id)
	r.mu.Unlock()
	if s != nil {
		s.finish(0)
	}
	removeFIFOs(r.cfg.FIFODir, id)
	return nil
}

// Containers lists isle's containers with their states.
func (r *Runtime) Containers(ctx context.Context) ([]Container, error) {
	ctx = r.ns(ctx)
	cs, err := r.client.Containers(ctx)
	if err != nil {
		return nil, fmt.Errorf("containers: list: %w", err)
	}
	out := make([]Container, 0, len(cs))
	for _, c := range cs {
		ct, err := r.describe(ctx, c)
		if errdefs.IsNotFound(err) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, ct)
	}
	return out, nil
}

// Inspect describes one container.
func (r *Runtime) Inspect(ctx context.Context, id string) (Container, error) {
	ctx = r.ns(ctx)
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return Container{}, r.notFound("inspect", id, err)
	}
	ct, err := r.describe(ctx, c)
	if err != nil {
		return Container{}, r.notFound("inspect", id, err)
	}
	return ct, nil
}

func (r *Runtime) describe(ctx context.Context, c containerd.Container) (Container, error) {
	info, err := c.Info(ctx, containerd.WithoutRefreshedMetadata)
	if err != nil {
		return Container{}, err
	}
	l := info.Labels
	ct := Container{ID: c.ID(), Labels: l, Image: info.Image, CreatedAt: info.CreatedAt, Cgroup: l[labelCgroup],
		Reason: l[labelReason], Message: l[labelMessage]}
	ct.StartedAt, _ = time.Parse(time.RFC3339Nano, l[labelStartedAt])
	if code, ok := l[labelExitCode]; ok {
		ct.State = Exited
		ct.ExitCode, _ = strconv.Atoi(code)
		ct.FinishedAt, _ = time.Parse(time.RFC3339Nano, l[labelFinishedAt])
		ct.OOMKilled = l[labelOOMKilled] == "true"
		return ct, nil
	}
	t, err := c.Task(ctx, nil)
	if errdefs.IsNotFound(err) {
		// No task and no recorded exit: it never got one (a failed
		// create), or the board rebooted under it.
		ct.State, ct.ExitCode = Exited, 255
		if ct.Reason == "" {
			ct.Reason = "Unknown"
		}
		return ct, nil
	}
	if err != nil {
		return Container{}, err
	}
	st, err := t.Status(ctx)
	if err != nil {
		return Container{}, err
	}
	ct.Pid = t.Pid()
	switch st.Status {
	case containerd.Created:
		ct.State = Created
	case containerd.Stopped:
		// Ended, the exit not yet recorded (its event is on the way):
		// record it now, so that what is reported is complete.
		if _, err := r.reap(ctx, c.ID()); err != nil {
			return Container{}, err
		}
		fresh, err := r.client.LoadContainer(ctx, c.ID())
		if err != nil {
			return Container{}, err
		}
		return r.describe(ctx, fresh)
	default:
		ct.State = Running
	}
	return ct, nil
}
