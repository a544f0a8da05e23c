// Package scheduler places pending pods on nodes, as kube-scheduler's
// default profile does for what isle runs: one controller on the Raft
// leader, in the controllers' table.
//
// It follows pods, nodes, namespaces, PodDisruptionBudgets, claims,
// volumes and storage classes through the registry's watches and keeps,
// in memory, every node and what the pods placed on it request. Its pods
// are those with spec.schedulerName "default-scheduler" (or none), no
// spec.nodeName, not being deleted and without scheduling gates. One loop
// takes them a pod at a time, highest priority first:
//
//   - filters, in kube-scheduler's order, each node giving the reasons of
//     the first that fails: spec.unschedulable (unless tolerated); NoSchedule
//     and NoExecute taints, including the not-ready or unreachable taint
//     Kubernetes' node lifecycle controller puts on a node whose Ready
//     condition is not True; nodeSelector and required node affinity (and
//     the isle.dev/arch annotation, see ArchAnnotation); host ports; the
//     requests for cpu, memory, ephemeral-storage and extended resources
//     and one more pod against status.allocatable (containers summed, the
//     largest init container if larger, sidecars and overhead added; pods
//     nominated to the node of at least the pod's priority count there);
//     the pod's PersistentVolumeClaims (a claim that is missing, lost or
//     being deleted, or unbound in a class that binds at once, rules out
//     every node; a bound claim's volume allows only the nodes of its node
//     affinity; an unbound claim of a WaitForFirstConsumer class allows any
//     node until a node is selected for it); DoNotSchedule topology spread
//     constraints (maxSkew, minDomains, matchLabelKeys, the node inclusion
//     policies); and inter-pod affinity and anti-affinity, required, the
//     pod's and, symmetrically, that of the pods placed (namespaces,
//     namespace selectors, matchLabelKeys and mismatchLabelKeys);
//   - scores the nodes that pass with kube-scheduler's default plugins and
//     weights: untolerated PreferNoSchedule taints (3), preferred node
//     affinity (2), least allocated cpu and memory (1), topology spread
//     (2: the pod's ScheduleAnyway constraints, or, for a pod with none and
//     a controller, the default ones: at most 3 more per node and 5 more
//     per zone of its controller's pods), preferred inter-pod affinity and
//     anti-affinity (2), balanced cpu and memory (1) and image locality (1,
//     from the nodes' status.images); the highest total wins, ties broken
//     at random;
//   - assumes the pod on its node at once, so the next decision counts it,
//     and binds it (pods/binding) beside the loop; a WaitForFirstConsumer
//     claim without a node first gets the volume.kubernetes.io/selected-node
//     annotation, for the volume controller to provision there. A bound
//     pod gets a Normal Scheduled Event, "Successfully assigned ns/pod to
//     node".
//
// A pod that fits no node may preempt, as kube-scheduler's
// DefaultPreemption: on each node that failed only for reasons pods
// there cause (resources, host ports, anti-affinity, spread), the pods of
// lower priority are taken away in thought and given back, most
// important first and those a PodDisruptionBudget protects before the
// others, while the pod still fits; the node whose victims break the
// fewest budgets, then have the lowest priorities, are the fewest and
// started last, is chosen. The victims get the DisruptionTarget condition
// (PreemptionByScheduler) and a Preempted Event and are deleted; the pod
// gets status.nominatedNodeName, waits for them to go (it does not
// preempt again while they terminate) and holds their room against pods
// of lower priority. A pod whose preemptionPolicy is Never does not
// preempt.
//
// A pod that still fits no node stays Pending with its PodScheduled
// condition False, reason Unschedulable, and a Warning FailedScheduling
// Event, both with kube-scheduler's message: "0/5 nodes are available: 2
// node(s) had untolerated taint {node.kubernetes.io/unreachable: }, 3
// Insufficient memory. preemption: 0/5 nodes are available: 2 Preemption
// is not helpful for scheduling, 3 No preemption victims found for
// incoming pod." The pod is tried again when a node is added or changes,
// a placed pod goes, a namespace's labels change, or a claim, volume or
// class changes, and, if it waits for other pods (its inter-pod affinity
// or spread), when a pod is placed; after a backoff (1 s doubling to
// 10 s), and at the latest after five minutes.
//
// Left out of kube-scheduler: the default topology spread counts the
// pods of the pod's controller, not those the Services, ReplicaSets and
// StatefulSets selecting the pod select; matching unbound claims to
// existing volumes (the volume controller's job; a claim's StorageClass
// allowedTopologies are not checked either), waiting for the volume
// controller before binding, volume count limits, and scheduling
// profiles, extenders and queueing hints (a change wakes every
// unschedulable pod). Pods whose images a node cannot run are kept off it
// only by labels: kubernetes.io/arch and kubernetes.io/os in nodeSelector
// or affinity, or ArchAnnotation; image manifests are the node agent's to
// check.
package scheduler
