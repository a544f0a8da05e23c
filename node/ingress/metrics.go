package ingress

import (
	"bufio"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the controller's Prometheus metrics.
type metrics struct {
	requests       *prometheus.CounterVec
	byClass        [6]prometheus.Counter // by status/100; 0 is unused
	upstreamErrors prometheus.Counter
	retries        prometheus.Counter
	duration       prometheus.Histogram
}

func newMetrics() *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "isle_ingress_requests_total",
			Help: "Requests the Ingress controller answered, by status class (1xx..5xx).",
		}, []string{"code"}),
		upstreamErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "isle_ingress_upstream_errors_total",
			Help: "Requests answered 502 because no endpoint responded.",
		}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "isle_ingress_retries_total",
			Help: "Requests tried on another endpoint after connecting to one failed.",
		}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "isle_ingress_request_duration_seconds",
			Help:    "Time from a request's arrival to the end of its response (upgraded connections excluded).",
			Buckets: prometheus.DefBuckets,
		}),
	}
	for i, class := range []string{"", "1xx", "2xx", "3xx", "4xx", "5xx"} {
		if class != "" {
			m.byClass[i] = m.requests.WithLabelValues(class)
		}
	}
	return m
}

// observe counts a request answered with status that took d.
func (m *metrics) observe(status int, d time.Duration) {
	if c := status / 100; c >= 1 && c <= 5 {
		m.byClass[c].Inc()
	}
	if status != http.StatusSwitchingProtocols {
		m.duration.Observe(d.Seconds())
	}
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	m.requests.Describe(ch)
	m.upstreamErrors.Describe(ch)
	m.retries.Describe(ch)
	m.duration.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	m.requests.Collect(ch)
	m.upstreamErrors.Collect(ch)
	m.retries.Collect(ch)
	m.duration.Collect(ch)
}

// statusWriter notes the status of the response it writes. Flush and the
// like reach the inner writer through Unwrap (http.ResponseController).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Hijack notes an upgrade: ReverseProxy writes the 101 response to the
// hijacked connection itself.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil && w.status == 0 {
		w.status = http.StatusSwitchingProtocols
	}
	return conn, rw, err
}

// Unwrap returns the inner writer, for http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
