package proxy

import (
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the proxy's own metrics; the per-port ones are read from
// the table at scrape time.
type metrics struct {
	syncDuration prometheus.Histogram
	syncErrors   prometheus.Counter
	packets      *prometheus.Desc
	bytes        *prometheus.Desc
	endpoints    *prometheus.Desc
}

func newMetrics() *metrics {
	labels := []string{"namespace", "service", "port"}
	return &metrics{
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "isle_proxy_sync_duration_seconds",
			Help:    "Time of a Sync of the Service rules, nftables transaction included.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}),
		syncErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "isle_proxy_sync_errors_total",
			Help: "Syncs of the Service rules that failed (the next one rewrites the table).",
		}),
		packets: prometheus.NewDesc("isle_proxy_service_packets_total",
			"Packets, both ways, of connections this board sent to the endpoints of a Service port.", labels, nil),
		bytes: prometheus.NewDesc("isle_proxy_service_bytes_total",
			"Bytes, both ways, of connections this board sent to the endpoints of a Service port.", labels, nil),
		endpoints: prometheus.NewDesc("isle_proxy_service_endpoints",
			"Endpoints a Service port's traffic goes to (0: it is rejected).", labels, nil),
	}
}

func (m *metrics) observe(d time.Duration, err error) {
	m.syncDuration.Observe(d.Seconds())
	if err != nil {
		m.syncErrors.Inc()
	}
}

// Collector returns the collector of the proxy's metrics, for the caller
// to register: isle_proxy_service_packets_total and _bytes_total (from the
// table's counters), isle_proxy_service_endpoints,
// isle_proxy_sync_duration_seconds and isle_proxy_sync_errors_total.
func (p *Proxy) Collector() prometheus.Collector { return collector{p} }

type collector struct{ p *Proxy }

// Describe implements prometheus.Collector.
func (c collector) Describe(ch chan<- *prometheus.Desc) {
	m := c.p.metrics
	m.syncDuration.Describe(ch)
	m.syncErrors.Describe(ch)
	ch <- m.packets
	ch <- m.bytes
	ch <- m.endpoints
}

// Collect implements prometheus.Collector.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	p, m := c.p, c.p.metrics
	m.syncDuration.Collect(ch)
	m.syncErrors.Collect(ch)
	ports, counters, err := p.readCounters()
	if err != nil {
		p.log.Warn("proxy: metrics: the Service counters cannot be read", "err", err)
	}
	for name, s := range ports {
		ch <- prometheus.MustNewConstMetric(m.endpoints, prometheus.GaugeValue, float64(s.endpoints), s.ns, s.svc, s.port)
		if n, ok := counters[name]; ok {
			ch <- prometheus.MustNewConstMetric(m.packets, prometheus.CounterValue, float64(n.Packets), s.ns, s.svc, s.port)
			ch <- prometheus.MustNewConstMetric(m.bytes, prometheus.CounterValue, float64(n.Bytes), s.ns, s.svc, s.port)
		}
	}
}

// readCounters reads the table's counters, by name, with the ports they
// count.
func (p *Proxy) readCounters() (map[string]portStat, map[string]*expr.Counter, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, nil, nil
	}
	c, err := p.conn()
	if err != nil {
		return p.ports, nil, err
	}
	objs, err := c.GetNamedObjects(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: TableName})
	if err != nil {
		return p.ports, nil, err
	}
	counters := make(map[string]*expr.Counter, len(objs))
	for _, o := range objs {
		if n, ok := o.(*nftables.NamedObj); ok && n.Type == nftables.ObjTypeCounter {
			if v, ok := n.Obj.(*expr.Counter); ok {
				counters[n.Name] = v
			}
		}
	}
	return p.ports, counters, nil
}
