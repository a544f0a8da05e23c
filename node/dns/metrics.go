package dns

import (
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the server's counters; one set per Server.
type metrics struct {
	queries       *prometheus.CounterVec
	cacheHits     prometheus.Counter
	cacheMisses   prometheus.Counter
	forwardErrors prometheus.Counter
	duration      *prometheus.HistogramVec
	cacheEntries  prometheus.GaugeFunc
}

// How a query was answered: the duration histogram's label.
const (
	sourceCluster = "cluster"
	sourceCache   = "cache"
	sourceForward = "forward"
	sourceError   = "error"
)

func newMetrics(c *cache) *metrics {
	return &metrics{
		queries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "isle_dns_queries_total",
			Help: "DNS queries answered by the cluster DNS of this board, by question type and response code.",
		}, []string{"type", "rcode"}),
		cacheHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "isle_dns_cache_hits_total",
			Help: "Outside names answered from the forwarding cache.",
		}),
		cacheMisses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "isle_dns_cache_misses_total",
			Help: "Outside names not in the forwarding cache.",
		}),
		forwardErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "isle_dns_forward_errors_total",
			Help: "Questions an upstream resolver did not answer (error, timeout, SERVFAIL or REFUSED).",
		}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "isle_dns_request_duration_seconds",
			Help:    "Time to answer a DNS query, by where the answer came from (cluster, cache, forward, error).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 8), // 100µs to 1.6s
		}, []string{"source"}),
		cacheEntries: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "isle_dns_cache_entries",
			Help: "Answers held in the forwarding cache.",
		}, func() float64 { return float64(c.len()) }),
	}
}

// typeLabels are the question types counted by name; others count as
// "other", so that clients cannot grow the metrics without bound.
var typeLabels = map[uint16]string{
	dns.TypeA: "A", dns.TypeAAAA: "AAAA", dns.TypeSRV: "SRV", dns.TypePTR: "PTR",
	dns.TypeCNAME: "CNAME", dns.TypeTXT: "TXT", dns.TypeSOA: "SOA", dns.TypeNS: "NS",
	dns.TypeMX: "MX", dns.TypeANY: "ANY", dns.TypeHTTPS: "HTTPS", dns.TypeSVCB: "SVCB",
}

// count records one answered query; qtype 0 is a query rejected before it
// was read whole.
func (m *metrics) count(qtype uint16, rcode int, source string, d time.Duration) {
	t, ok := typeLabels[qtype]
	switch {
	case qtype == 0:
		t = "none"
	case !ok:
		t = "other"
	}
	rc, ok := dns.RcodeToString[rcode]
	if !ok {
		rc = "other"
	}
	m.queries.WithLabelValues(t, rc).Inc()
	if source != "" {
		m.duration.WithLabelValues(source).Observe(d.Seconds())
	}
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.queries, m.cacheHits, m.cacheMisses, m.forwardErrors, m.duration, m.cacheEntries}
}

var _ prometheus.Collector = (*metrics)(nil)
