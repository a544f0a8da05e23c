package apiserver

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	watches  prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_request_total", Help: "API requests by verb, resource and HTTP code."},
			[]string{"verb", "resource", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "apiserver_request_duration_seconds", Help: "API request latency by verb and resource (watches excluded).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"verb", "resource"}),
		watches: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "apiserver_longrunning_requests", Help: "Open watch streams."}),
	}
	reg.MustRegister(m.requests, m.latency, m.watches)
	return m
}

func promhttpHandler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}
