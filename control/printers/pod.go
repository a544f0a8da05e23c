package printers

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodeLostReason is the pod status reason the node lifecycle controller sets
// on pods of an unreachable node (Kubernetes' NodeUnreachablePodReason).
const nodeLostReason = "NodeLost"

// podConditions are the row conditions Kubernetes attaches to the rows of
// finished pods; kubectl uses them to tell completed rows apart.
func podConditions(phase corev1.PodPhase) []metav1.TableRowCondition {
	switch phase {
	case corev1.PodSucceeded:
		return []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(corev1.PodSucceeded), Message: "The pod has completed successfully."}}
	case corev1.PodFailed:
		return []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(corev1.PodFailed), Message: "The pod failed."}}
	}
	return nil
}

// podState accumulates what the READY, STATUS and RESTARTS cells show.
type podState struct {
	reason      string
	ready       int
	total       int
	restarts    int
	lastRestart metav1.Time
}

// noteRestarts adds a container's restarts and remembers the latest end of
// a previous run.
func noteRestarts(count int32, last corev1.ContainerState, restarts *int, latest *metav1.Time) {
	*restarts += int(count)
	if t := last.Terminated; t != nil && latest.Before(&t.FinishedAt) {
		*latest = t.FinishedAt
	}
}

// isSidecar reports whether c is a restartable init container (a sidecar):
// it keeps running beside the app containers and counts in READY.
func isSidecar(c *corev1.Container) bool {
	return c != nil && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

func printPod(pod *corev1.Pod, now time.Time) (metav1.TableRow, error) {
	st := podState{reason: string(pod.Status.Phase), total: len(pod.Spec.Containers)}
	if pod.Status.Reason != "" {
		st.reason = pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			st.reason = corev1.PodReasonSchedulingGated
		}
	}

	initSpecs := make(map[string]*corev1.Container, len(pod.Spec.InitContainers))
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		initSpecs[c.Name] = c
		if isSidecar(c) {
			st.total++
		}
	}

	initializing := initContainersState(pod, initSpecs, &st)
	if !initializing || podConditionTrue(pod.Status.Conditions, corev1.PodInitialized) {
		appContainersState(pod, &st)
	}

	if pod.DeletionTimestamp != nil {
		switch {
		case pod.Status.Reason == nodeLostReason:
			st.reason = "Unknown"
		case pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed:
			st.reason = "Terminating"
		}
	}

	restarts := strconv.Itoa(st.restarts)
	if st.restarts != 0 && !st.lastRestart.IsZero() {
		restarts = fmt.Sprintf("%d (%s ago)", st.restarts, since(st.lastRestart, now))
	}

	row := metav1.TableRow{
		Cells: []interface{}{
			pod.Name,
			fmt.Sprintf("%d/%d", st.ready, st.total),
			st.reason,
			restarts,
			since(pod.CreationTimestamp, now),
			orNone(podIP(&pod.Status)),
			orNone(pod.Spec.NodeName),
			orNone(pod.Status.NominatedNodeName),
			readinessGates(pod),
		},
		Conditions: podConditions(pod.Status.Phase),
	}
	return row, nil
}

// initContainersState walks the init containers in order up to the first
// one that has not finished (sidecars that started count as finished) and
// reports whether the pod is still initializing. The restarts of sidecars
// are also kept apart in st: they are the only init restarts that count once
// the pod has initialized.
func initContainersState(pod *corev1.Pod, specs map[string]*corev1.Container, st *podState) bool {
	allRestarts := 0
	var allLast metav1.Time
	initializing := false
	for i := range pod.Status.InitContainerStatuses {
		cs := &pod.Status.InitContainerStatuses[i]
		noteRestarts(cs.RestartCount, cs.LastTerminationState, &allRestarts, &allLast)
		sidecar := isSidecar(specs[cs.Name])
		if sidecar {
			noteRestarts(cs.RestartCount, cs.LastTerminationState, &st.restarts, &st.lastRestart)
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode == 0 {
			continue
		}
		if sidecar && cs.Started != nil && *cs.Started {
			if cs.Ready {
				st.ready++
			}
			continue
		}
		switch {
		case cs.State.Terminated != nil:
			t := cs.State.Terminated
			switch {
			case t.Reason != "":
				st.reason = "Init:" + t.Reason
			case t.Signal != 0:
				st.reason = fmt.Sprintf("Init:Signal:%d", t.Signal)
			default:
				st.reason = fmt.Sprintf("Init:ExitCode:%d", t.ExitCode)
			}
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "" && cs.State.Waiting.Reason != "PodInitializing":
			st.reason = "Init:" + cs.State.Waiting.Reason
		default:
			st.reason = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
		}
		initializing = true
		break
	}
	if initializing && !podConditionTrue(pod.Status.Conditions, corev1.PodInitialized) {
		// Until the pod is initialized, RESTARTS counts every init container
		// seen so far; after that, only the sidecars' and the app containers'.
		st.restarts, st.lastRestart = allRestarts, allLast
	}
	return initializing
}

// appContainersState adds the app containers: their restarts, their ready
// count, and the reason of the first (in spec order) that is waiting or
// terminated.
func appContainersState(pod *corev1.Pod, st *podState) {
	hasRunning := false
	for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
		cs := &pod.Status.ContainerStatuses[i]
		noteRestarts(cs.RestartCount, cs.LastTerminationState, &st.restarts, &st.lastRestart)
		switch {
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
			st.reason = cs.State.Waiting.Reason
		case cs.State.Terminated != nil && cs.State.Terminated.Reason != "":
			st.reason = cs.State.Terminated.Reason
		case cs.State.Terminated != nil && cs.State.Terminated.Signal != 0:
			st.reason = fmt.Sprintf("Signal:%d", cs.State.Terminated.Signal)
		case cs.State.Terminated != nil:
			st.reason = fmt.Sprintf("ExitCode:%d", cs.State.Terminated.ExitCode)
		case cs.Ready && cs.State.Running != nil:
			hasRunning = true
			st.ready++
		}
	}
	// A pod whose last container completed while another still runs is
	// running, not completed.
	if st.reason == "Completed" && hasRunning {
		if podConditionTrue(pod.Status.Conditions, corev1.PodReady) {
			st.reason = "Running"
		} else {
			st.reason = "NotReady"
		}
	}
}

// podConditionTrue reports whether the first condition of type t is True.
func podConditionTrue(conds []corev1.PodCondition, t corev1.PodConditionType) bool {
	for _, c := range conds {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podIP is the pod's primary IP. As in Kubernetes' conversion of a v1 pod,
// status.podIP wins over status.podIPs when both are set.
func podIP(status *corev1.PodStatus) string {
	if status.PodIP != "" {
		return status.PodIP
	}
	if len(status.PodIPs) > 0 {
		return status.PodIPs[0].IP
	}
	return ""
}

// readinessGates is "true/all" over the pod's readiness gates, or "<none>".
func readinessGates(pod *corev1.Pod) string {
	if len(pod.Spec.ReadinessGates) == 0 {
		return none
	}
	trueGates := 0
	for _, gate := range pod.Spec.ReadinessGates {
		for _, c := range pod.Status.Conditions {
			if c.Type == gate.ConditionType {
				if c.Status == corev1.ConditionTrue {
					trueGates++
				}
				break
			}
		}
	}
	return fmt.Sprintf("%d/%d", trueGates, len(pod.Spec.ReadinessGates))
}

// orNone returns s, or "<none>" when s is empty.
func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}
