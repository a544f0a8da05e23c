package scheduler

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The scheduler's metrics carry kube-scheduler's names and labels, so
// that its dashboards work. They are the process's: leadership terms come
// and go, the counts carry on.
var (
	attempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "scheduler_schedule_attempts_total",
		Help: "Number of attempts to schedule pods, by the result: 'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem."},
		[]string{"result", "profile"})
	attemptDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "scheduler_scheduling_attempt_duration_seconds",
		Help: "Scheduling attempt latency in seconds (scheduling algorithm + binding), by result.",
		// 0.1 ms to about 6.5 s: a decision takes well under a millisecond,
		// a bind one store write.
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 17)},
		[]string{"result", "profile"})
	pending = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "scheduler_pending_pods",
		Help: "Number of pending pods, by the queue type: 'active' waits to be tried, 'backoff' waits out a backoff, 'unschedulable' waits for a change of the cluster."},
		[]string{"queue"})
)

// RegisterMetrics registers the scheduler's metrics with reg; call it
// once per registry.
func RegisterMetrics(reg prometheus.Registerer) {
	reg.MustRegister(attempts, attemptDuration, pending)
}

// Results of a scheduling attempt.
const (
	resultScheduled     = "scheduled"
	resultUnschedulable = "unschedulable"
	resultError         = "error"
)

func observeAttempt(result string, start time.Time) {
	attempts.WithLabelValues(result, Name).Inc()
	attemptDuration.WithLabelValues(result, Name).Observe(time.Since(start).Seconds())
}

func setPending(q *queue) {
	active, backoff, unschedulable := q.counts()
	pending.WithLabelValues("active").Set(float64(active))
	pending.WithLabelValues("backoff").Set(float64(backoff))
	pending.WithLabelValues("unschedulable").Set(float64(unschedulable))
}
