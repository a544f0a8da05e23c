// Package probe runs the liveness, readiness and startup probes of
// containers, with the kubelet's semantics (see the Probe type of
// k8s.io/api/core/v1 and
// https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#container-probes).
//
// Do runs one attempt of a probe: an HTTP GET, a TCP connect, a command in
// the container, or a gRPC health check. Network probes connect through the
// Target's dial function, which for a pod with its own network namespace
// makes its sockets inside it (netns.Dialer): the probe reaches the pod
// whether or not the pod network is up, as a kubelet's probe would from the
// node.
//
// A Worker is the loop the pod manager runs for one probe of one container:
// it waits the initial delay (and for the startup probe to succeed, if the
// container has one), probes every period, applies the success and failure
// thresholds and reports only changes of the result. Its clock is injected,
// so tests drive it without sleeping.
package probe
