package pods

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	corev1 "k8s.io/api/core/v1"

	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/node/containers"
)

// cpuSample is a container's CPU time when last read.
type cpuSample struct {
	nanos uint64
	at    time.Time
}

// usage keeps the previous CPU samples (by container) and network
// counters (by pod) between reports.
type usage struct {
	mu      sync.Mutex
	prev    map[string]cpuSample
	prevNet map[types.UID]wire.PodNetwork
}

// trafficCounter is a Network that counts the bytes a pod received and
// sent (podnet's does, from the pod's veth).
type trafficCounter interface {
	PodTraffic(uid types.UID) (rx, tx uint64, ok bool)
}

// PodUsage reports the CPU (averaged since the previous call) and memory
// (working set) of each running container of the board's pods, read from
// their cgroups: the agent's usage reports (kubectl top, the HPA).
func (m *Manager) PodUsage(ctx context.Context) ([]wire.PodUsage, error) {
	m.usage.mu.Lock()
	defer m.usage.mu.Unlock()
	if m.usage.prev == nil {
		m.usage.prev = map[string]cpuSample{}
		m.usage.prevNet = map[types.UID]wire.PodNetwork{}
	}
	counter, _ := m.cfg.Network.(trafficCounter)
	seenNet := map[types.UID]bool{}
	now := time.Now()
	seen := map[string]bool{}
	var out []wire.PodUsage
	m.mu.Lock()
	states := make([]*podState, 0, len(m.state))
	for _, ps := range m.state {
		states = append(states, ps)
	}
	m.mu.Unlock()
	for _, ps := range states {
		ns, name := ps.names()
		pu := wire.PodUsage{Namespace: ns, Name: name, UID: ps.uid}
		for _, c := range ps.all() {
			if c.State != containers.Running || c.Cgroup == "" {
				continue
			}
			u, err := containers.CgroupUsage(c.Cgroup)
			if err != nil {
				continue // ended meanwhile
			}
			seen[c.ID] = true
			prev, ok := m.usage.prev[c.ID]
			m.usage.prev[c.ID] = cpuSample{u.CPUNanos, now}
			if !ok || !now.After(prev.at) || u.CPUNanos < prev.nanos {
				continue // a rate needs two samples
			}
			cores := float64(u.CPUNanos-prev.nanos) / float64(now.Sub(prev.at).Nanoseconds())
			pu.Containers = append(pu.Containers, metricsv1beta1.ContainerMetrics{Name: c.Labels[labelContainer],
				Usage: corev1.ResourceList{
					corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(cores*1000+0.5), resource.DecimalSI),
					corev1.ResourceMemory: *resource.NewQuantity(int64(u.WorkingSet), resource.BinarySI),
				}})
		}
		if len(pu.Containers) == 0 {
			continue
		}
		if counter != nil {
			if rx, tx, ok := counter.PodTraffic(ps.uid); ok {
				seenNet[ps.uid] = true
				prev, had := m.usage.prevNet[ps.uid]
				m.usage.prevNet[ps.uid] = wire.PodNetwork{RxBytes: rx, TxBytes: tx}
				if had && rx >= prev.RxBytes && tx >= prev.TxBytes {
					pu.Network = &wire.PodNetwork{RxBytes: rx - prev.RxBytes, TxBytes: tx - prev.TxBytes}
				}
			}
		}
		out = append(out, pu)
	}
	for id := range m.usage.prev {
		if !seen[id] {
			delete(m.usage.prev, id)
		}
	}
	for uid := range m.usage.prevNet {
		if !seenNet[uid] {
			delete(m.usage.prevNet, uid)
		}
	}
	return out, nil
}
