package strategy

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Pod is the strategy of core/v1 Pods. A new pod is Pending with its QoS
// class; its status, written by its node, changes no labels, annotations,
// finalizers or owners (keepWriterMeta). A deleted pod that runs on a node
// stays for its grace period until the node has stopped it.
var Pod = &Kind[*corev1.Pod]{namespaced: true, defaults: defaultPod, create: validatePodCreate, update: validatePodUpdate, status: validatePodStatus,
	onCreate: func(o *corev1.Pod) {
		o.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: qosClass(o)}
	},
	// The priority and preemption policy admission set on create stay, as
	// the Priority admission plugin keeps them on update.
	onUpdate: func(o, old *corev1.Pod) {
		if o.Spec.Priority == nil {
			o.Spec.Priority = old.Spec.Priority
		}
		if o.Spec.PreemptionPolicy == nil {
			o.Spec.PreemptionPolicy = old.Spec.PreemptionPolicy
		}
	},
	statusMeta:  keepWriterMeta,
	beginDelete: func(o *corev1.Pod, opts metav1.DeleteOptions) (int64, bool) { return podGracePeriod(o, opts), false },
	heldBack: func(o *corev1.Pod) bool {
		return o.Spec.NodeName != "" && o.DeletionGracePeriodSeconds != nil && *o.DeletionGracePeriodSeconds > 0 &&
			o.Status.Phase != corev1.PodSucceeded && o.Status.Phase != corev1.PodFailed
	},
}

// PodFields are the field selectors of Pods.
var PodFields = fields(map[string]func(*corev1.Pod) string{
	"spec.nodeName":            func(o *corev1.Pod) string { return o.Spec.NodeName },
	"spec.restartPolicy":       func(o *corev1.Pod) string { return string(o.Spec.RestartPolicy) },
	"spec.schedulerName":       func(o *corev1.Pod) string { return o.Spec.SchedulerName },
	"spec.serviceAccountName":  func(o *corev1.Pod) string { return o.Spec.ServiceAccountName },
	"spec.hostNetwork":         func(o *corev1.Pod) string { return strconv.FormatBool(o.Spec.HostNetwork) },
	"status.phase":             func(o *corev1.Pod) string { return string(o.Status.Phase) },
	"status.podIP":             func(o *corev1.Pod) string { return o.Status.PodIP },
	"status.nominatedNodeName": func(o *corev1.Pod) string { return o.Status.NominatedNodeName },
})

// podGracePeriod is how long a deleted pod's node has to stop it; zero for
// pods on no node or already finished.
func podGracePeriod(pod *corev1.Pod, opts metav1.DeleteOptions) int64 {
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return 0
	}
	if opts.GracePeriodSeconds != nil {
		if *opts.GracePeriodSeconds < 0 {
			return 0
		}
		return *opts.GracePeriodSeconds
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return corev1.DefaultTerminationGracePeriodSeconds
}

// qosClass computes a pod's quality-of-service class as Kubernetes does.
func qosClass(p *corev1.Pod) corev1.PodQOSClass {
	requests, limits := 0, 0
	guaranteed := true
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, hasReq := c.Resources.Requests[name]
			lim, hasLim := c.Resources.Limits[name]
			if hasReq && !req.IsZero() {
				requests++
			}
			if hasLim && !lim.IsZero() {
				limits++
			}
			if !hasLim || (hasReq && req.Cmp(lim) != 0) {
				guaranteed = false
			}
		}
	}
	switch {
	case requests == 0 && limits == 0:
		return corev1.PodQOSBestEffort
	case guaranteed:
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}
