package registry

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// PodAdmission applies a new pod's LimitRanges (admit_quota.go), service account (admit_serviceaccount.go),
// priority (admit_priority.go) and RuntimeClass, as Kubernetes' RuntimeClass admission plugin does: a
// pod naming a RuntimeClass that does not exist is refused, the class's
// pod overhead is set on the pod (one it already has must be the same),
// and the class's node selector and tolerations are merged into the
// pod's.
var PodAdmission = &Admission{
	Create: func(ctx context.Context, s *Store, obj runtime.Object) error {
		if err := s.admitLimits(ctx, obj); err != nil {
			return err
		}
		if err := s.admitServiceAccount(ctx, obj.(*corev1.Pod)); err != nil {
			return err
		}
		if err := s.admitPriority(ctx, obj.(*corev1.Pod)); err != nil {
			return err
		}
		return s.admitRuntimeClass(ctx, obj.(*corev1.Pod))
	},
}

func (s *Store) admitRuntimeClass(ctx context.Context, pod *corev1.Pod) error {
	forbidden := func(format string, args ...any) error {
		return apierrors.NewForbidden(corev1.Resource("pods"), pod.Name, fmt.Errorf("pod rejected: "+format, args...))
	}
	if pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName == "" {
		if pod.Spec.Overhead != nil {
			return forbidden("Pod Overhead set without corresponding RuntimeClass defined Overhead")
		}
		return nil
	}
	name := *pod.Spec.RuntimeClassName
	r, _ := s.resources.Lookup(nodev1.SchemeGroupVersion.WithResource("runtimeclasses"))
	obj, err := s.Get(ctx, r, "", name, metav1.GetOptions{ResourceVersion: "0"})
	if apierrors.IsNotFound(err) {
		return forbidden("RuntimeClass %q not found", name)
	}
	if err != nil {
		return err
	}
	rc := obj.(*nodev1.RuntimeClass)
	switch {
	case rc.Overhead == nil && pod.Spec.Overhead != nil:
		return forbidden("Pod Overhead set without corresponding RuntimeClass defined Overhead")
	case rc.Overhead != nil && pod.Spec.Overhead != nil && !apiequality.Semantic.DeepEqual(rc.Overhead.PodFixed, pod.Spec.Overhead):
		return forbidden("Pod's Overhead doesn't match RuntimeClass's defined Overhead")
	case rc.Overhead != nil:
		pod.Spec.Overhead = rc.Overhead.PodFixed.DeepCopy()
	}
	if rc.Scheduling == nil {
		return nil
	}
	for k, v := range rc.Scheduling.NodeSelector {
		if cur, ok := pod.Spec.NodeSelector[k]; ok && cur != v {
			return forbidden("conflict: runtimeClass.scheduling.nodeSelector[%s] = %s; pod.spec.nodeSelector[%s] = %s", k, v, k, cur)
		}
		if pod.Spec.NodeSelector == nil {
			pod.Spec.NodeSelector = map[string]string{}
		}
		pod.Spec.NodeSelector[k] = v
	}
	for _, t := range rc.Scheduling.Tolerations {
		if !hasToleration(pod.Spec.Tolerations, t) {
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, t)
		}
	}
	return nil
}

func hasToleration(ts []corev1.Toleration, t corev1.Toleration) bool {
	for _, have := range ts {
		if apiequality.Semantic.DeepEqual(have, t) {
			return true
		}
	}
	return false
}
