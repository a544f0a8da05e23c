package pods

import (
	"context"
	"net"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/isle-cluster/isle/node/containers"
	"github.com/isle-cluster/isle/node/netns"
	"github.com/isle-cluster/isle/node/probe"
)

// probeSet is a running container's probe workers and their results.
type probeSet struct {
	cancel        context.CancelFunc
	workers       []*probe.Worker
	ready         bool // readiness (true without a readiness probe)
	started       bool // startup passed (true without a startup probe)
	liveFailed    bool
	startupFailed bool
}

// ensureProbes starts the probe workers of the pod's running containers
// and stops those of containers gone.
func (m *Manager) ensureProbes(pod *corev1.Pod, ps *podState) {
	running := map[string]bool{}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cur := ps.current(c.Name, false)
		if cur == nil || cur.State != containers.Running {
			continue
		}
		running[cur.ID] = true
		ps.mu.Lock()
		_, ok := ps.probes[cur.ID]
		ps.mu.Unlock()
		if !ok {
			m.startProbes(pod, ps, c, *cur)
		}
	}
	var gone map[string]bool
	ps.mu.Lock()
	for id := range ps.probes {
		if !running[id] {
			if gone == nil {
				gone = map[string]bool{}
			}
			gone[id] = true
		}
	}
	ps.mu.Unlock()
	if gone != nil {
		m.stopProbes(ps, gone)
	}
}

func (m *Manager) startProbes(pod *corev1.Pod, ps *podState, c *corev1.Container, cur containers.Container) {
	ctx, cancel := context.WithCancel(context.Background())
	set := &probeSet{cancel: cancel, ready: c.ReadinessProbe == nil, started: c.StartupProbe == nil}
	ps.mu.Lock()
	ps.probes[cur.ID] = set
	ps.mu.Unlock()
	target := m.probeTarget(pod, ps, c, cur.ID)
	kinds := []struct {
		kind probe.Kind
		p    *corev1.Probe
	}{{probe.Startup, c.StartupProbe}, {probe.Liveness, c.LivenessProbe}, {probe.Readiness, c.ReadinessProbe}}
	uid := pod.UID
	for _, k := range kinds {
		if k.p == nil {
			continue
		}
		w, err := probe.NewWorker(probe.WorkerConfig{Kind: k.kind, Probe: k.p, Target: target, Exec: m.rt,
			Started: cur.StartedAt, AwaitStartup: c.StartupProbe != nil && k.kind != probe.Startup, Logger: m.log,
			OnChange: func(kind probe.Kind, r probe.Result, msg string) { m.probeChanged(uid, cur.ID, kind, r, msg) }})
		if err != nil {
			m.events.warning(pod, "Unhealthy", err.Error())
			continue
		}
		set.workers = append(set.workers, w)
		go w.Run(ctx)
	}
}

// probeTarget is where a container's probes and hooks reach it: inside
// the pod's network namespace, so they work with or without a pod IP.
func (m *Manager) probeTarget(pod *corev1.Pod, ps *podState, c *corev1.Container, id string) probe.Target {
	t := probe.Target{ContainerID: id, Ports: c.Ports}
	if pod.Spec.HostNetwork || ps.netns == "" {
		var d net.Dialer
		t.Dial = d.DialContext
		t.PodIP = m.cfg.NodeIP
		return t
	}
	t.Dial = netns.Dialer(ps.netns)
	if len(ps.ips) > 0 {
		t.PodIP = ps.ips[0]
	}
	return t
}

// probeChanged records a probe's new result and syncs the pod (its
// Ready condition, or a restart).
func (m *Manager) probeChanged(uid types.UID, id string, kind probe.Kind, r probe.Result, msg string) {
	m.mu.Lock()
	ps := m.state[uid]
	m.mu.Unlock()
	if ps == nil {
		return
	}
	ps.mu.Lock()
	set := ps.probes[id]
	if set == nil {
		ps.mu.Unlock()
		return
	}
	switch kind {
	case probe.Readiness:
		set.ready = r == probe.Success
	case probe.Liveness:
		set.liveFailed = r == probe.Failure
	case probe.Startup:
		set.started = r == probe.Success
		set.startupFailed = r == probe.Failure
		if set.started {
			for _, w := range set.workers {
				w.SetStarted()
			}
		}
	}
	ps.mu.Unlock()
	if r == probe.Failure {
		if pod := m.pod(ps.uid); pod != nil {
			text := "probe failed"
			if msg != "" {
				text = "probe failed: " + msg
			}
			m.events.warning(pod, "Unhealthy", upperFirst(kind.String())+" "+text)
		}
	}
	m.queue.Add(ps.uid)
}

// stopProbes stops the probes of the given containers (all with nil).
func (m *Manager) stopProbes(ps *podState, ids map[string]bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for id, set := range ps.probes {
		if ids == nil || ids[id] {
			set.cancel()
			delete(ps.probes, id)
		}
	}
}

func (m *Manager) stopAllProbes() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ps := range m.state {
		m.stopProbes(ps, nil)
	}
}

// probeState says whether a container is ready and has started.
func (ps *podState) probeState(id string) (ready, started bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	set := ps.probes[id]
	if set == nil {
		return false, false
	}
	return set.ready && set.started, set.started
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
