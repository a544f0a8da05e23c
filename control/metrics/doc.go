// Package metrics keeps the resource usage that node agents report, in
// memory only, for metrics.k8s.io (kubectl top) and the
// HorizontalPodAutoscaler controller. It plays the part of Kubernetes'
// metrics-server, turned around: instead of a server scraping every
// kubelet, every agent pushes a Report to every alive server, and each
// server serves metrics.k8s.io from its own Cache. Usage never touches
// the store: a board's CPU and memory cost the SD cards nothing.
//
// The contract:
//
//   - every wire.ReportInterval (15 s) an agent POSTs one wire.Report to
//     wire.ReportPath on each alive server's API address (package wire has
//     the report's format and bounds);
//   - a report is checked strictly (wire.Report.Validate: names, quantities,
//     window, clock skew, bounds) and refused whole when invalid (ErrInvalid,
//     400) or when it names a pod bound to another node (ErrForbidden, 403):
//     a node reports its own usage and its own pods only. Pods the server
//     does not know (yet, or any more), or that were replaced (another UID),
//     are skipped: the runtime and the API are never quite in step;
//   - the Cache keeps the latest sample of each node and each pod and serves
//     it for TTL (2 min) after it arrived; samples older than that are
//     dropped. MaxNodes and MaxPods bound it.
//
// Prometheus: isle_metrics_reports_total{result}, isle_metrics_samples_dropped_total{reason},
// and the gauges isle_metrics_nodes and isle_metrics_pods.
package metrics
