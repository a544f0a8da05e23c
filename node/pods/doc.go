// Package pods is the kubelet's part of the node agent: it runs the pods
// bound to its board through containerd (package containers) and keeps
// their status.
//
// One Manager per board. It watches the board's pods (a field-selected
// informer), and a small pool of workers syncs one pod at a time,
// idempotently, from what the pod asks and what containerd runs:
//
//	sync(pod):
//	  deleted or being deleted → terminate (preStop, stop signal, grace,
//	      SIGKILL), remove containers, volumes, network; finish the deletion
//	  sandbox: cgroup <CgroupParent>/pod<uid>, network namespace (package
//	      netns) and its network (Network: the Pod network, package podnet)
//	  volumes (package volumes)
//	  init containers in order, each to a successful exit
//	  app containers: start missing ones; restart exited ones as
//	      restartPolicy says, with Kubernetes' back-off (10 s doubling to
//	      5 min: CrashLoopBackOff); restart those whose liveness failed
//	  probes (package probe) for running containers
//	  status: computed, and written when it changed
//
// What wakes a sync: the informer, containerd's exit events, probe
// results, back-off timers, and a slow resync (which also carries
// configMap and secret changes into their volumes).
//
// Restart safety: the Manager keeps nothing a restart needs in memory.
// Containers carry their pod, name and attempt in containerd labels; on
// start the Manager adopts what containerd runs (reattaching the output of
// running containers, so nothing restarts), reconciles it with the pods it
// is given, and cleans up pods deleted while it was down. Losing the
// control plane stops nothing: the informer keeps its last state.
package pods
