package registry

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/isle-cluster/isle/control/strategy"
)

// As Kubernetes' Priority admission plugin: a pod's priority is its
// PriorityClass's value (the global default class's, or 0, when it names
// none), and its preemption policy the class's; a pod naming a class that
// does not exist, or a priority of its own that differs, is refused. Only
// one PriorityClass may be the global default.

func (s *Store) priorityClasses(ctx context.Context) ([]schedulingv1.PriorityClass, error) {
	r, ok := s.resources.Lookup(schedulingv1.SchemeGroupVersion.WithResource("priorityclasses"))
	if !ok {
		return nil, nil
	}
	list, err := s.List(ctx, r, "", metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, err
	}
	return list.(*schedulingv1.PriorityClassList).Items, nil
}

// admitPriority sets a new pod's priority and preemption policy.
func (s *Store) admitPriority(ctx context.Context, pod *corev1.Pod) error {
	forbidden := func(format string, args ...any) error {
		return apierrors.NewForbidden(corev1.Resource("pods"), pod.Name, fmt.Errorf(format, args...))
	}
	classes, err := s.priorityClasses(ctx)
	if err != nil {
		return err
	}
	var class *schedulingv1.PriorityClass
	name := pod.Spec.PriorityClassName
	for i := range classes {
		c := &classes[i]
		switch {
		case name != "" && c.Name == name:
			class = c
		case name == "" && c.GlobalDefault && (class == nil || c.Value < class.Value):
			class = c
		}
	}
	prio := int32(0)
	switch {
	case class != nil:
		prio = class.Value
		pod.Spec.PriorityClassName = class.Name
	case name != "":
		v, ok := strategy.PodPriority(name)
		if !ok {
			return forbidden("no PriorityClass with name %v was found", name)
		}
		prio = v
	}
	if p := pod.Spec.Priority; p != nil && *p != prio {
		return forbidden("the integer value of priority (%d) must not be provided in pod spec; priority admission controller computed %d from the given PriorityClass name", *p, prio)
	}
	pod.Spec.Priority = &prio
	policy := corev1.PreemptLowerPriority
	if class != nil && class.PreemptionPolicy != nil {
		policy = *class.PreemptionPolicy
	}
	if p := pod.Spec.PreemptionPolicy; p != nil && *p != policy {
		return forbidden("the string value of PreemptionPolicy (%s) must not be provided in pod spec; priority admission controller computed %s from the given PriorityClass name", *p, policy)
	}
	pod.Spec.PreemptionPolicy = &policy
	return nil
}

// PriorityClassAdmission refuses a second global default.
var PriorityClassAdmission = &Admission{
	Create: func(ctx context.Context, s *Store, obj runtime.Object) error {
		return s.oneGlobalDefault(ctx, obj.(*schedulingv1.PriorityClass))
	},
	Update: func(ctx context.Context, s *Store, obj, _ runtime.Object) error {
		return s.oneGlobalDefault(ctx, obj.(*schedulingv1.PriorityClass))
	},
}

func (s *Store) oneGlobalDefault(ctx context.Context, pc *schedulingv1.PriorityClass) error {
	if !pc.GlobalDefault {
		return nil
	}
	classes, err := s.priorityClasses(ctx)
	if err != nil {
		return err
	}
	for _, c := range classes {
		if c.GlobalDefault && c.Name != pc.Name {
			return apierrors.NewForbidden(schedulingv1.Resource("priorityclasses"), pc.Name,
				fmt.Errorf("PriorityClass %v is already marked as default. Only one default can exist", c.Name))
		}
	}
	return nil
}
