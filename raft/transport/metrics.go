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
	// plain counts connections in plain TCP while TLS is on (AllowPlain).
	plain prometheus.Counter
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
		plain: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "isle", Subsystem: "raft_transport", Name: "plain_connections_total",
			Help: "Connections accepted or dialed without TLS while TLS is on: with members of a release without it, during a rolling upgrade."}),
	}
	if reg == nil {
		return m, nil
	}
	cs := []prometheus.Collector{m.sent, m.dropped, m.received, m.plain}
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
	reg.Unregister(m.plain)
	reg.Unregister(m.dropped)
	reg.Unregister(m.received)
}

func peerLabel(id uint64) string { return strconv.FormatUint(id, 16) }
