package strategy

import (
	corev1 "k8s.io/api/core/v1"
)

// What Kubernetes' default admission plugins write into every new Pod, as
// far as it needs no other object: the DefaultTolerationSeconds plugin's
// tolerations and the ServiceAccount plugin's default account name (the
// Priority plugin's priority and preemption policy come from the
// PriorityClasses, in the registry's admission). (The service account
// token volume needs the token machinery and is not added here.)

// Priority values of the built-in PriorityClasses.
var builtinPriorities = map[string]int32{
	"system-node-critical":    2000001000,
	"system-cluster-critical": 2000000000,
}

// notReadyTolerationSeconds is how long a pod stays on a board that is
// unreachable or not ready before it is evicted, so its controller makes
// it again elsewhere. Kubernetes' DefaultTolerationSeconds uses 300 s; a
// board pulled from a Pi cluster is usually gone for good, and isle
// notices in seconds, so isle waits 30 s.
const notReadyTolerationSeconds int64 = 30

const defaultServiceAccountName = "default"

// admitPod applies the admission defaults to a Pod.
func admitPod(p *corev1.Pod) {
	admitTolerations(&p.Spec)
	if p.Spec.ServiceAccountName == "" {
		p.Spec.ServiceAccountName = defaultServiceAccountName
		p.Spec.DeprecatedServiceAccount = defaultServiceAccountName
	}
}

// PodPriority is the priority of a pod of the built-in class name, if it
// is one.
func PodPriority(class string) (int32, bool) {
	v, ok := builtinPriorities[class]
	return v, ok
}

// admitTolerations adds the not-ready and unreachable NoExecute tolerations
// of notReadyTolerationSeconds unless the pod already tolerates those taints.
func admitTolerations(s *corev1.PodSpec) {
	for _, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
		if toleratesNoExecute(s.Tolerations, key) {
			continue
		}
		s.Tolerations = append(s.Tolerations, corev1.Toleration{
			Key:               key,
			Operator:          corev1.TolerationOpExists,
			Effect:            corev1.TaintEffectNoExecute,
			TolerationSeconds: ptrTo(notReadyTolerationSeconds),
		})
	}
}

// toleratesNoExecute reports whether some toleration names key's NoExecute
// taint (an empty key or effect counts as naming every key or effect).
func toleratesNoExecute(ts []corev1.Toleration, key string) bool {
	for _, t := range ts {
		if (t.Key == key || t.Key == "") && (t.Effect == corev1.TaintEffectNoExecute || t.Effect == "") {
			return true
		}
	}
	return false
}
