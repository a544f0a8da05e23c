package transport

import (
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the transport's Prometheus counters, labelled by peer ID (hex).
type metrics struct {
	sent     *prometheus.CounterVec
	dropped  *prometheus.CounterVec
	received *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	vec := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "isle",
			Subsystem: "raft_transport",
			Name:      name,
			Help:      help,
		}, []string{"peer"})
	}
	m := &metrics{
		sent:     vec("messages_sent_total", "Raft messages written to a peer (snapshots: delivered)."),
		dropped:  vec("messages_dropped_total", "Raft messages to a peer dropped: queue full, no connection, unknown peer, too large or failed write."),
		received: vec("messages_received_total", "Raft messages received from a peer and passed to the handler."),
	}
	if reg == nil {
		return m, nil
	}
	cs := []prometheus.Collector{m.sent, m.dropped, m.received}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return nil, fmt.Errorf("transport: new: register metrics (one transport per registry): %w", err)
		}
	}
	return m, nil
}

func (m *metrics) unregister(reg prometheus.Registerer) {
	if reg == nil {
		return
	}
	reg.Unregister(m.sent)
	reg.Unregister(m.dropped)
	reg.Unregister(m.received)
}

func peerLabel(id uint64) string { return strconv.FormatUint(id, 16) }
