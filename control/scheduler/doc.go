// Package scheduler places pending pods on nodes, as kube-scheduler's
// default profile does for what isle runs: one controller on the Raft
// leader, in the controllers' table.
//
// It follows pods, nodes, claims, volumes and storage classes through the
// registry's watches and keeps, in memory, every node and what the pods
// placed on it request. Its pods are those with spec.schedulerName
// "default-scheduler" (or none), no spec.nodeName, not being deleted and
// without scheduling gates. One loop takes them a pod at a time, highest
// priority first:
//
//   - filters, in kube-scheduler's order, each node giving the reasons of
//     the first that fails: spec.unschedulable (unless tolerated); NoSchedule
//     and NoExecute taints, including the not-ready or unreachable taint
//     Kubernetes' node lifecycle controller puts on a node whose Ready
//     condition is not True; nodeSelector and required node affinity (and
//     the isle.dev/arch annotation, see ArchAnnotation); host ports; the
//     requests for cpu, memory, ephemeral-storage and extended resources
//     and one more pod against status.allocatable (containers summed, the
//     largest init container if larger, sidecars and overhead added); the
//     pod's PersistentVolumeClaims (a claim that is missing, lost or being
//     deleted, or unbound in a class that binds at once, rules out every
//     node; a bound claim's volume allows only the nodes of its node
//     affinity; an unbound claim of a WaitForFirstConsumer class allows
//     any node until a node is selected for it);
//   - scores the nodes that pass: least allocated cpu and memory (weight
//     1), fewest pods of the pod's controller (weight 2: a board lost loses
//     few replicas) and preferred node affinity (weight 2); the highest
//     total wins, ties broken at random;
//   - assumes the pod on its node at once, so the next decision counts it,
//     and binds it (pods/binding) beside the loop; a WaitForFirstConsumer
//     claim without a node first gets the volume.kubernetes.io/selected-node
//     annotation, for the volume controller to provision there. A bound
//     pod gets a Normal Scheduled Event, "Successfully assigned ns/pod to
//     node".
//
// A pod that fits no node stays Pending with its PodScheduled condition
// False, reason Unschedulable, and a Warning FailedScheduling Event, both
// with kube-scheduler's message: "0/5 nodes are available: 2 node(s) had
// untolerated taint {node.kubernetes.io/unreachable: }, 3 Insufficient
// memory." kube-scheduler goes on with what preemption could do; isle does
// not preempt, and its messages end there. The pod is tried again when a
// node is added or changes, a placed pod goes, or a claim, volume or class
// changes, after a backoff (1 s doubling to 10 s), and at the latest after
// five minutes.
//
// Left out of kube-scheduler: preemption, inter-pod affinity and
// anti-affinity, topology spread constraints (owner spreading stands in
// for the default ones), PreferNoSchedule taints as a score, image
// locality, balanced allocation, matching unbound claims to existing
// volumes (the volume controller's job; a claim's StorageClass
// allowedTopologies are not checked either), waiting for the volume
// controller before binding, volume count limits, and scheduling profiles
// and extenders. Pods whose images a node cannot run are kept off it only
// by labels: kubernetes.io/arch and kubernetes.io/os in nodeSelector or
// affinity, or ArchAnnotation; image manifests are the node agent's to
// check.
package scheduler
