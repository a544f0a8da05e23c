package agent

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/isle-cluster/isle/hw"
	"github.com/isle-cluster/isle/hw/led"
)

// The board's pressure thresholds: memory and disk as the kubelet's
// default hard eviction thresholds (memory.available<100Mi, lowered on
// small boards, and nodefs.available<10%), and PIDs at 90% in use.
const (
	defaultMemoryThreshold        = 100 << 20 // bytes available
	defaultMemoryThresholdPercent = 5         // of the board's memory, if smaller
	diskPressurePercent           = 10        // DataDir's filesystem available below this
	pidPressurePercent            = 90        // of pid_max in use above this
	// pressureInterval is how often the agent re-evaluates the board's
	// pressure.
	pressureInterval = 10 * time.Second
	// maxStatusTries is how many times a status update that conflicts is
	// made on a fresh read of the Node before the next check.
	maxStatusTries = 4
)

// pressure is which of the board's resources run short, and the state of
// its power supply and clocks (a Raspberry Pi's firmware report).
type pressure struct {
	memory, disk, pids bool
	// runtimeDown: containerd does not answer; the Node is not Ready.
	runtimeDown bool
	// blocked: why the board cannot run pods at all; the Node is not
	// Ready. "" if it can.
	blocked string
	// power are the UnderVoltage and Throttled conditions (hw), powerN of
	// them: none on a board without the firmware's report.
	power  [2]hw.Condition
	powerN int
}

// reading is what the board's pressure is evaluated from.
type reading struct {
	memoryAvailable int64 // bytes
	disk            hw.Filesystem
	pids            hw.PIDs
	power           []hw.Condition
}

// boardReader reads the board: its available memory (of memory bytes), the
// filesystem of dataDir, its PIDs, and its power and clocks (from the
// firmware's files under root: "/" on a board; optional, as on machines
// that are not a Raspberry Pi).
func boardReader(memory int64, dataDir, root string) func() (reading, error) {
	return func() (reading, error) {
		var r reading
		used, err := hw.ReadMemoryWorkingSet()
		if err != nil {
			return r, err
		}
		r.memoryAvailable = max(memory-used, 0)
		if r.disk, err = hw.ReadFilesystem(dataDir); err != nil {
			return r, err
		}
		if r.pids, err = hw.ReadPIDs(); err != nil {
			return r, err
		}
		// The board's facts are optional: what could be read is reported.
		b, _ := hw.ReadBoard(root)
		if b.HasThrottling {
			r.power = b.Throttling.Conditions()
		}
		return r, nil
	}
}

// pressureOf evaluates a reading against the thresholds: memory available
// below memoryThreshold bytes, less than 10% of the disk available, more
// than 90% of the PIDs taken.
func pressureOf(r reading, memoryThreshold int64) pressure {
	p := pressure{
		memory: r.memoryAvailable < memoryThreshold,
		disk:   r.disk.Available*100 < r.disk.Size*diskPressurePercent,
		pids:   r.pids.Used*100 > r.pids.Max*pidPressurePercent,
	}
	p.powerN = copy(p.power[:], r.power)
	return p
}

// conditions are the Node conditions the agent posts: the three pressures,
// Ready, and where the firmware reports them UnderVoltage and Throttled.
// Reasons and messages of the first four are fixed per status (the
// kubelet's reasons), so they change only when their status does.
func (p pressure) conditions(now time.Time) []corev1.NodeCondition {
	t := metav1.NewTime(now)
	cond := func(typ corev1.NodeConditionType, on bool, reasonOn, msgOn, reasonOff, msgOff string) corev1.NodeCondition {
		c := corev1.NodeCondition{Type: typ, Status: corev1.ConditionFalse, Reason: reasonOff, Message: msgOff,
			LastHeartbeatTime: t, LastTransitionTime: t}
		if on {
			c.Status, c.Reason, c.Message = corev1.ConditionTrue, reasonOn, msgOn
		}
		return c
	}
	out := []corev1.NodeCondition{
		cond(corev1.NodeMemoryPressure, p.memory,
			"KubeletHasInsufficientMemory", "isle agent has insufficient memory available",
			"KubeletHasSufficientMemory", "isle agent has sufficient memory available"),
		cond(corev1.NodeDiskPressure, p.disk,
			"KubeletHasDiskPressure", "isle agent has disk pressure",
			"KubeletHasNoDiskPressure", "isle agent has no disk pressure"),
		cond(corev1.NodePIDPressure, p.pids,
			"KubeletHasInsufficientPID", "isle agent has insufficient PID available",
			"KubeletHasSufficientPID", "isle agent has sufficient PID available"),
		cond(corev1.NodeReady, !p.runtimeDown && p.blocked == "", readyReason, readyMessage,
			notReadyReason, p.notReadyMessage()),
	}
	for _, c := range p.power[:p.powerN] {
		out = append(out, corev1.NodeCondition{Type: corev1.NodeConditionType(c.Type), Status: corev1.ConditionStatus(c.Status),
			Reason: c.Reason, Message: c.Message, LastHeartbeatTime: t, LastTransitionTime: t})
	}
	return out
}

// notReadyMessage says why the Node is not Ready.
func (p pressure) notReadyMessage() string {
	if p.blocked != "" {
		return "the board cannot run pods: " + p.blocked
	}
	return "container runtime is down: containerd does not answer"
}

// evaluate reads the board and makes its pressure the one the Node's
// status reports from now on.
func (r *nodeReport) evaluate() (pressure, error) {
	rd, err := r.read()
	if err != nil {
		return pressure{}, fmt.Errorf("agent: read the board's pressure: %w", err)
	}
	p := pressureOf(rd, r.memoryThreshold)
	p.runtimeDown, p.blocked = r.runtimeDown.Load(), r.blocked
	r.mu.Lock()
	r.pressure = p
	r.mu.Unlock()
	return p, nil
}

// watchPressure re-evaluates the board's pressure every pressureInterval
// until ctx ends.
func (a *Agent) watchPressure(ctx context.Context) {
	t := time.NewTicker(pressureInterval)
	defer t.Stop()
	a.pressureLoop(ctx, t.C)
}

// pressureLoop checks the board's pressure at every tick until ctx ends,
// logging an error once until it changes or the check works again.
func (a *Agent) pressureLoop(ctx context.Context, tick <-chan time.Time) {
	lastErr := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
		err := a.checkPressure(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && lastErr != "":
			a.log.Info("agent: pressure checked again")
			lastErr = ""
		case Unreachable(err):
			// servers.dial said so, once for all.
			a.log.Debug("agent: pressure not checked; retrying", "err", err, "in", pressureInterval)
		case err != nil && err.Error() != lastErr:
			a.log.Warn("agent: pressure not checked; retrying", "err", err, "in", pressureInterval)
			lastErr = err.Error()
		}
	}
}

// checkPressure re-evaluates the board's pressure and reads its images
// (once a minute), and writes the Node's status when a condition's status or the images
// changed since the last write. Nothing is written otherwise: gossip, not heartbeats, tells the control plane
// that the board is alive.
func (a *Agent) checkPressure(ctx context.Context) error {
	a.checkMu.Lock() // the pressure loop and watchRuntime
	defer a.checkMu.Unlock()
	p, err := a.report.evaluate()
	if err != nil {
		return err
	}
	imagesChanged, err := a.refreshImages(ctx)
	if err != nil {
		a.log.Debug("agent: images not listed", "err", err)
	}
	if p == a.report.posted && !imagesChanged {
		return nil
	}
	name := a.cfg.Credential.Name
	n := &corev1.Node{}
	// A write of the Node between the read and the status update (the
	// control plane's, or this agent's LED annotation) makes it conflict:
	// read it again.
	for try := 1; ; try++ {
		if err := a.client.Get().Resource("nodes").Name(name).Do(ctx).Into(n); err != nil {
			return fmt.Errorf("agent: get Node %s: %w", name, err)
		}
		err := a.postStatus(ctx, n)
		if err == nil {
			break
		}
		if !apierrors.IsConflict(err) || try == maxStatusTries {
			return fmt.Errorf("agent: %w", err)
		}
	}
	a.report.mu.Lock()
	a.report.postedImages = slices.Clone(a.report.images)
	a.report.mu.Unlock()
	if p == a.report.posted {
		return nil // only the images changed
	}
	a.log.Info("agent: board pressure changed", "memory", p.memory, "disk", p.disk, "pids", p.pids)
	for _, c := range powerChanges(a.report.posted, p) {
		typ := corev1.EventTypeNormal
		if c.Status == "True" {
			typ = corev1.EventTypeWarning
			a.log.Warn("agent: "+c.Message, "condition", c.Type)
		}
		a.nodeEvent(ctx, n, typ, c.Reason, c.Message)
	}
	a.report.posted = p
	return nil
}

// runtimeCheckInterval is how often the agent asks containerd whether it
// serves: a board whose containerd dies shows NotReady on its LED within a
// second.
const runtimeCheckInterval = 500 * time.Millisecond

// watchRuntime asks serving at every tick whether containerd answers, until
// ctx ends. When that changes, the Node's Ready condition and the readiness
// LED follow (NotReady while containerd is down, as a kubelet reports a
// dead runtime).
func (a *Agent) watchRuntime(ctx context.Context, serving func(context.Context) bool, tick <-chan time.Time) {
	down := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
		now := !serving(ctx)
		if ctx.Err() != nil {
			return
		}
		if now == down {
			continue
		}
		down = now
		a.report.runtimeDown.Store(down)
		show := led.Ready
		if down {
			show = led.NotReady
			a.log.Error("agent: containerd does not answer: the Node is not Ready", "containerd", a.cfg.Containerd)
		} else {
			a.log.Info("agent: containerd answers again: the Node is Ready")
		}
		if a.cfg.LEDs != nil {
			a.cfg.LEDs.SetReadiness(show)
		}
		if err := a.checkPressure(ctx); err != nil && ctx.Err() == nil {
			// The pressure loop writes it at its next turn.
			a.log.Log(ctx, retryLevel(err), "agent: readiness not posted yet", "err", err)
		}
	}
}

// powerChanges are the power conditions of now whose reason differs from
// before's: each is told as an Event (under-voltage is the most common
// hidden cause of flaky Pi clusters).
func powerChanges(before, now pressure) []hw.Condition {
	var out []hw.Condition
	for _, c := range now.power[:now.powerN] {
		i := slices.IndexFunc(before.power[:before.powerN], func(b hw.Condition) bool { return b.Type == c.Type })
		if i < 0 && c.Status != "True" {
			continue // a board that starts with a good supply says nothing
		}
		if i < 0 || before.power[i].Reason != c.Reason {
			out = append(out, c)
		}
	}
	return out
}

// nodeEvent records an Event about the board's Node, as a kubelet does; a
// failure is logged only.
func (a *Agent) nodeEvent(ctx context.Context, n *corev1.Node, typ, reason, msg string) {
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: n.Name + ".", Namespace: metav1.NamespaceDefault},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: n.Name, UID: n.UID, APIVersion: "v1"},
		Reason:         reason, Message: msg, Type: typ, Count: 1,
		FirstTimestamp: now, LastTimestamp: now,
		Source: corev1.EventSource{Component: "isle-agent", Host: n.Name},
	}
	if err := a.client.Post().Namespace(ev.Namespace).Resource("events").Body(ev).Do(ctx).Error(); err != nil {
		a.log.Warn("agent: event not recorded", "reason", reason, "err", err)
	}
}
