package events

import "github.com/prometheus/client_golang/prometheus"

// The Broadcaster's metrics are the process's: leadership terms come and
// go, the counts carry on.
var (
	eventsDropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "isle_events_dropped_total", Help: "Events dropped because their writer's queue was full."})
	eventsFailed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "isle_events_failed_total", Help: "Events lost because their write failed."})
	eventsWritten = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "isle_events_writes_total", Help: "Event writes by operation: create, update (count), expire (delete)."},
		[]string{"op"})
)

// RegisterMetrics registers the Broadcaster's metrics with reg; call it
// once per registry.
func RegisterMetrics(reg prometheus.Registerer) {
	reg.MustRegister(eventsDropped, eventsFailed, eventsWritten)
}
