package printers

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Container states for pod fixtures.
func running(ready bool) corev1.ContainerStatus {
	return corev1.ContainerStatus{Ready: ready, Started: ptr(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ago(time.Minute)}}}
}

func waiting(reason string) corev1.ContainerStatus {
	return corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
}

func terminated(reason string, code, signal int32) corev1.ContainerStatus {
	return corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: code, Signal: signal}}}
}

// restarted adds count restarts, the last run having ended d ago.
func restarted(cs corev1.ContainerStatus, count int32, d time.Duration) corev1.ContainerStatus {
	cs.RestartCount = count
	cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", FinishedAt: ago(d)}}
	return cs
}

// podWith builds a pod created 10m ago on pi-1 with the given containers
// (named c0, c1, …), init containers (i0, i1, …) and statuses.
func podWith(phase corev1.PodPhase, inits []corev1.Container, initStatuses []corev1.ContainerStatus, containers int, statuses ...corev1.ContainerStatus) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: meta("p", 10*time.Minute),
		Spec:       corev1.PodSpec{NodeName: "pi-1", InitContainers: inits},
		Status:     corev1.PodStatus{Phase: phase, PodIP: "10.244.1.7", InitContainerStatuses: initStatuses, ContainerStatuses: statuses},
	}
	for i := 0; i < containers; i++ {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "c" + string(rune('0'+i)), Image: "busybox"})
	}
	for i := range pod.Status.ContainerStatuses {
		pod.Status.ContainerStatuses[i].Name = "c" + string(rune('0'+i))
	}
	for i := range pod.Status.InitContainerStatuses {
		pod.Status.InitContainerStatuses[i].Name = pod.Spec.InitContainers[i].Name
	}
	return pod
}

func initContainers(n int, sidecars ...int) []corev1.Container {
	out := make([]corev1.Container, n)
	for i := range out {
		out[i] = corev1.Container{Name: "i" + string(rune('0'+i)), Image: "busybox"}
	}
	for _, i := range sidecars {
		out[i].RestartPolicy = ptr(corev1.ContainerRestartPolicyAlways)
	}
	return out
}

func withConditions(pod *corev1.Pod, conds ...corev1.PodCondition) *corev1.Pod {
	pod.Status.Conditions = conds
	return pod
}

func cond(t corev1.PodConditionType, s corev1.ConditionStatus, reason string) corev1.PodCondition {
	return corev1.PodCondition{Type: t, Status: s, Reason: reason}
}

func TestPodRows(t *testing.T) {
	crash := crashLoopPod()
	run := runningPod()

	terminating := runningPod()
	terminating.DeletionTimestamp = agoPtr(10 * time.Second)

	lost := runningPod()
	lost.DeletionTimestamp = agoPtr(time.Minute)
	lost.Status.Reason = "NodeLost"

	pending := &corev1.Pod{
		ObjectMeta: meta("unscheduled", 30*time.Second),
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c0"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{cond(corev1.PodScheduled, corev1.ConditionFalse, "Unschedulable")}},
	}
	gated := pending.DeepCopy()
	gated.Status.Conditions = []corev1.PodCondition{cond(corev1.PodScheduled, corev1.ConditionFalse, corev1.PodReasonSchedulingGated)}

	evicted := podWith(corev1.PodFailed, nil, nil, 1, terminated("ContainerStatusUnknown", 137, 0))
	evicted.Status.Reason = "Evicted"
	evicted.Status.ContainerStatuses = nil

	gates := runningPod()
	gates.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/lb-ready"}, {ConditionType: "example.com/warm"}}
	gates.Status.Conditions = append(gates.Status.Conditions,
		corev1.PodCondition{Type: "example.com/lb-ready", Status: corev1.ConditionTrue},
		corev1.PodCondition{Type: "example.com/warm", Status: corev1.ConditionFalse})
	gates.Status.NominatedNodeName = "pi-3"

	ipsOnly := runningPod()
	ipsOnly.Status.PodIP = ""
	ipsOnly.Status.PodIPs = []corev1.PodIP{{IP: "10.244.1.9"}, {IP: "fd00::9"}}

	noCreation := runningPod()
	noCreation.CreationTimestamp = metav1.Time{}

	tests := []struct {
		name  string
		pod   *corev1.Pod
		want  []interface{}
		conds []metav1.TableRowCondition
	}{
		{"running, 2/2 ready", &run,
			[]interface{}{"web-7d4b9c6f5-x2x9q", "2/2", "Running", "0", "5m", "10.244.1.5", "pi-1", "<none>", "<none>"}, nil},
		{"crash loop with restarts", &crash,
			[]interface{}{"api-6b8f9d7c4-kq2lm", "0/1", "CrashLoopBackOff", "5 (2m ago)", "60m", "10.244.2.9", "pi-2", "<none>", "<none>"}, nil},
		{"terminating", &terminating,
			[]interface{}{"web-7d4b9c6f5-x2x9q", "2/2", "Terminating", "0", "5m", "10.244.1.5", "pi-1", "<none>", "<none>"}, nil},
		{"deleted on a lost node", &lost,
			[]interface{}{"web-7d4b9c6f5-x2x9q", "2/2", "Unknown", "0", "5m", "10.244.1.5", "pi-1", "<none>", "<none>"}, nil},
		{"pending, not scheduled", pending,
			[]interface{}{"unscheduled", "0/1", "Pending", "0", "30s", "<none>", "<none>", "<none>", "<none>"}, nil},
		{"scheduling gated", gated,
			[]interface{}{"unscheduled", "0/1", "SchedulingGated", "0", "30s", "<none>", "<none>", "<none>", "<none>"}, nil},
		{"container creating", podWith(corev1.PodPending, nil, nil, 1, waiting("ContainerCreating")),
			[]interface{}{"p", "0/1", "ContainerCreating", "0", "10m", "10.244.1.7", "pi-1", "<none>", "<none>"}, nil},
		{"image pull back-off", podWith(corev1.PodPending, nil, nil, 2, running(true), waiting("ImagePullBackOff")),
			[]interface{}{"p", "1/2", "ImagePullBackOff", "0", "10m", "10.244.1.7", "pi-1", "<none>", "<none>"}, nil},
		{"completed", podWith(corev1.PodSucceeded, nil, nil, 1, terminated("Completed", 0, 0)),
			[]interface{}{"p", "0/1", "Completed", "0", "10m", "10.244.1.7", "pi-1", "<none>", "<none>"},
			[]metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: "Succeeded", Message: "The pod has completed successfully."}}},
		{"completed pod being deleted stays completed", func() *corev1.Pod {
			p := podWith(corev1.PodSucceeded, nil, nil, 1, terminated("Completed", 0, 0))
			p.DeletionTimestamp = agoPtr(time.Second)
			return p
		}(),
			[]interface{}{"p", "0/1", "Completed", "0", "10m", "10.244.1.7", "pi-1", "<none>", "<none>"},
			[]metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: "Succeeded", Message: "The pod has completed successfully."}}},
		{"failed", podWith(corev1.PodFailed, nil, nil, 1, terminated("Error", 1, 0)),
			[]interface{}{"p", "0/1", "Error", "0", "10m", "10.244.1.7", "pi-1", "<none>", "<none>"},
			[]metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: "Failed", Message: "The pod failed."}}},
		{"evicted", evicted,
			[]interface{}{"p", "0/1", "Evicted", "0", "10m", "10.244.1.7", "pi-1", "<none>", "<none>"},
			[]metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: "Failed", Message: "The pod failed."}}},
		{"killed by a signal", podWith(corev1.PodRunning, nil, nil, 1, terminated("", 137, 9)),
			[]interface{}{"p", "0/1", "Signal:9", "0", "10m", "10.244.1.7", "pi-1", "<none>", "<none>"}, nil},
		{"exit code without reason", podWith(corev1.PodRunning, nil, nil, 1, terminated("", 3, 0)),
			[]interface{}{"p", "0/1", "ExitCode:3", "0", "10m", "10.244.1.7", "pi-1", "<none>", "<none>"}, nil},
		{"first container's reason wins", podWith(corev1.PodRunning, nil, nil, 3, waiting("CreateContainerConfigError"), running(true), waiting("ErrImagePull")),
			[]interface{}{"p", "1/3", "CreateContainerConfigError", "0", "10m", "10.244.1.7", "pi-1", "<none>", "<none>"}, nil},
		{"one completed, one running, pod ready", withConditions(podWith(corev1.PodRunning, nil, nil, 2, terminated("Completed", 0, 0), running(true)),
			cond(corev1.PodReady, corev1.ConditionTrue, "")),
			[]interface{}{"p", "1/2", "Running", "0", "10m", "10.244.1.7", "pi-1", "<none>", "<none>"}, nil},
		{"one completed, one running, pod not ready", withConditions(podWith(corev1.PodRunning, nil, nil, 2, terminated("Completed", 0, 0), running(true)),
			cond(corev1.PodReady, corev1.ConditionFalse, "ContainersNotReady")),
			[]interface{}{"p", "1/2", "NotReady", "0", "10m", "10.244.1.7", "pi-1", "<none>", "<none>"}, nil},
		{"restarts summed, latest restart shown", podWith(corev1.PodRunning, nil, nil, 2, restarted(running(true), 2, 3*time.Hour), restarted(running(true), 1, 90*time.Second)),
			[]interface{}{"p", "2/2", "Running", "3 (90s ago)", "10m", "10.244.1.7", "pi-1", "<none>", "<none>"}, nil},
		{"restarts without a last state", podWith(corev1.PodRunning, nil, nil, 1, func() corev1.ContainerStatus { s := running(true); s.RestartCount = 4; return s }()),
			[]interface{}{"p", "1/1", "Running", "4", "10m", "10.244.1.7", "pi-1", "<none>", "<none>"}, nil},
		{"init container running", podWith(corev1.PodPending, initContainers(1), []corev1.ContainerStatus{running(false)}, 1, waiting("PodInitializing")),
			[]interface{}{"p", "0/1", "Init:0/1", "0", "10m", "10.244.1.7", "pi-1", "<none>", "<none>"}, nil},
		{"second of two init containers", podWith(corev1.PodPending, initContainers(2), []corev1.ContainerStatus{terminated("Completed", 0, 0), running(false)}, 1, waiting("PodInitializing")),
			[]interface{}{"p", "0/1", "Init:1/2", "0", "10m", "10.244.1.7", "pi-1", "<none>", "<none>"}, nil},
		{"init container waiting for PodInitializing", podWith(corev1.PodPending, initContainers(1), []corev1.ContainerStatus{waiting("PodInitializing")}, 1),
			[]interface{}{"p", "0/1", "Init:0/1", "0", "10m", "10.244.1.7", "pi-1", "<none>", "<none>"}, nil},
		{"init container crash loop", podWith(corev1.PodPending, initContainers(2), []corev1.ContainerStatus{restarted(waiting("CrashLoopBackOff"), 3, 30*time.Second), waiting("PodInitializing")}, 1, waiting("PodInitializing")),
			[]interface{}{"p", "0/1", "Init:CrashLoopBackOff", "3 (30s ago)", "10m", "10.244.1.7", "pi-1", "<none>", "<none>"}, nil},
		{"init container failed", podWith(corev1.PodFailed, initContainers(1), []corev1.ContainerStatus{terminated("Error", 1, 0)}, 1, waiting("PodInitializing")),
			[]interface{}{"p", "0/1", "Init:Error", "0", "10m", "10.244.1.7", "pi-1", "<none>", "<none>"},
			[]metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: "Failed", Message: "The pod failed."}}},
		{"init container exit code", podWith(corev1.PodPending, initContainers(1), []corev1.ContainerStatus{terminated("", 2, 0)}, 1),
			[]interface{}{"p", "0/1", "Init:ExitCode:2", "0", "10m", "10.244.1.7", "pi-1", "<none>", "<none>"}, nil},
		{"init container signal", podWith(corev1.PodPending, initContainers(1), []corev1.ContainerStatus{terminated("", 137, 9)}, 1),
			[]interface{}{"p", "0/1", "Init:Signal:9", "0", "10m", "10.244.1.7", "pi-1", "<none>", "<none>"}, nil},
		{"sidecar counts in ready and restarts", withConditions(podWith(corev1.PodRunning, initContainers(2, 1),
			[]corev1.ContainerStatus{func() corev1.ContainerStatus { s := terminated("Completed", 0, 0); s.RestartCount = 2; return s }(), restarted(running(true), 1, 10*time.Minute)},
			1, running(true)), cond(corev1.PodInitialized, corev1.ConditionTrue, ""), cond(corev1.PodReady, corev1.ConditionTrue, "")),
			[]interface{}{"p", "2/2", "Running", "1 (10m ago)", "10m", "10.244.1.7", "pi-1", "<none>", "<none>"}, nil},
		{"sidecar not started yet", podWith(corev1.PodPending, initContainers(1, 0), []corev1.ContainerStatus{waiting("ContainerCreating")}, 1, waiting("PodInitializing")),
			[]interface{}{"p", "0/2", "Init:ContainerCreating", "0", "10m", "10.244.1.7", "pi-1", "<none>", "<none>"}, nil},
		{"readiness gates and nominated node", &gates,
			[]interface{}{"web-7d4b9c6f5-x2x9q", "2/2", "Running", "0", "5m", "10.244.1.5", "pi-1", "pi-3", "1/2"}, nil},
		{"podIPs only", &ipsOnly,
			[]interface{}{"web-7d4b9c6f5-x2x9q", "2/2", "Running", "0", "5m", "10.244.1.9", "pi-1", "<none>", "<none>"}, nil},
		{"no creation timestamp", &noCreation,
			[]interface{}{"web-7d4b9c6f5-x2x9q", "2/2", "Running", "0", "<unknown>", "10.244.1.5", "pi-1", "<none>", "<none>"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkCells(t, gr("", "pods"), tt.pod, tt.want)
			if got := rowOf(t, tt.pod).Conditions; !reflect.DeepEqual(got, tt.conds) {
				t.Errorf("conditions %+v, want %+v", got, tt.conds)
			}
		})
	}
}
