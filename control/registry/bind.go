package registry

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Bind assigns a pod to a node (pods/binding): spec.nodeName is set once,
// and the PodScheduled condition turns True.
func (s *Store) Bind(ctx context.Context, ns, name string, b *corev1.Binding) error {
	pods, _ := s.resources.Lookup(corev1.SchemeGroupVersion.WithResource("pods"))
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Binding").GroupKind(), name,
			field.ErrorList{field.NotSupported(field.NewPath("target", "kind"), b.Target.Kind, []string{"Node"})})
	}
	if b.Target.Name == "" {
		return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Binding").GroupKind(), name,
			field.ErrorList{field.Required(field.NewPath("target", "name"), "")})
	}
	precondition := b.ResourceVersion
	_, err := s.guaranteedUpdate(ctx, pods, ns, name, precondition, WriteOptions{}, func(old runtime.Object) (runtime.Object, error) {
		pod := old.(*corev1.Pod)
		if pod.Spec.NodeName != "" {
			return nil, apierrors.NewConflict(pods.GroupVersionResource.GroupResource(), name,
				fmt.Errorf("pod %s is already assigned to node %q", name, pod.Spec.NodeName))
		}
		if pod.DeletionTimestamp != nil {
			return nil, apierrors.NewConflict(pods.GroupVersionResource.GroupResource(), name,
				fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", name))
		}
		if b.UID != "" && b.UID != pod.UID {
			return nil, apierrors.NewConflict(pods.GroupVersionResource.GroupResource(), name,
				fmt.Errorf("the UID in the binding (%s) is not the pod's (%s)", b.UID, pod.UID))
		}
		pod.Spec.NodeName = b.Target.Name
		setPodCondition(pod, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(s.now().UTC().Truncate(1e9))})
		return pod, nil
	}, subBinding)
	return err
}

func setPodCondition(pod *corev1.Pod, c corev1.PodCondition) {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == c.Type {
			if pod.Status.Conditions[i].Status == c.Status {
				return
			}
			pod.Status.Conditions[i] = c
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, c)
}
