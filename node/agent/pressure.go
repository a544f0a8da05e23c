package agent

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/isle-cluster/isle/hw"
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
)

// pressure is which of the board's resources run short.
type pressure struct{ memory, disk, pids bool }

// reading is what the board's pressure is evaluated from.
type reading struct {
	memoryAvailable int64 // bytes
	disk            hw.Filesystem
	pids            hw.PIDs
}

// boardReader reads the board: its available memory (of memory bytes), the
// filesystem of dataDir, and its PIDs.
func boardReader(memory int64, dataDir string) func() (reading, error) {
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
		r.pids, err = hw.ReadPIDs()
		return r, err
	}
}

// pressureOf evaluates a reading against the thresholds: memory available
// below memoryThreshold bytes, less than 10% of the disk available, more
// than 90% of the PIDs taken.
func pressureOf(r reading, memoryThreshold int64) pressure {
	return pressure{
		memory: r.memoryAvailable < memoryThreshold,
		disk:   r.disk.Available*100 < r.disk.Size*diskPressurePercent,
		pids:   r.pids.Used*100 > r.pids.Max*pidPressurePercent,
	}
}

// conditions are the Node conditions the agent posts: the three pressures,
// and Ready. Reasons and messages are fixed per status (the kubelet's
// reasons), so a condition changes only when its status does.
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
	return []corev1.NodeCondition{
		cond(corev1.NodeMemoryPressure, p.memory,
			"KubeletHasInsufficientMemory", "isle agent has insufficient memory available",
			"KubeletHasSufficientMemory", "isle agent has sufficient memory available"),
		cond(corev1.NodeDiskPressure, p.disk,
			"KubeletHasDiskPressure", "isle agent has disk pressure",
			"KubeletHasNoDiskPressure", "isle agent has no disk pressure"),
		cond(corev1.NodePIDPressure, p.pids,
			"KubeletHasInsufficientPID", "isle agent has insufficient PID available",
			"KubeletHasSufficientPID", "isle agent has sufficient PID available"),
		cond(corev1.NodeReady, true, readyReason, readyMessage, "", ""),
	}
}

// evaluate reads the board and makes its pressure the one the Node's
// status reports from now on.
func (r *nodeReport) evaluate() (pressure, error) {
	rd, err := r.read()
	if err != nil {
		return pressure{}, fmt.Errorf("agent: read the board's pressure: %w", err)
	}
	p := pressureOf(rd, r.memoryThreshold)
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
		case err != nil && err.Error() != lastErr:
			a.log.Warn("agent: pressure not checked; retrying", "err", err, "in", pressureInterval)
			lastErr = err.Error()
		}
	}
}

// checkPressure re-evaluates the board's pressure and writes the Node's
// status when a condition's status changed since the last write. Nothing
// is written otherwise: gossip, not heartbeats, tells the control plane
// that the board is alive.
func (a *Agent) checkPressure(ctx context.Context) error {
	p, err := a.report.evaluate()
	if err != nil {
		return err
	}
	if p == a.report.posted {
		return nil
	}
	name := a.cfg.Credential.Name
	n := &corev1.Node{}
	if err := a.client.Get().Resource("nodes").Name(name).Do(ctx).Into(n); err != nil {
		return fmt.Errorf("agent: get Node %s: %w", name, err)
	}
	if err := a.postStatus(ctx, n); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	a.log.Info("agent: board pressure changed", "memory", p.memory, "disk", p.disk, "pids", p.pids)
	a.report.posted = p
	return nil
}
