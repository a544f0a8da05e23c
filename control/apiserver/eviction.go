package apiserver

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/isle-cluster/isle/control/registry"
)

// The eviction API's answers, as kube-apiserver's.
const (
	msgViolatesBudget = "Cannot evict pod as it would violate the pod's disruption budget."
	causeBudget       = "DisruptionBudget"
	// maxDisruptedPods bounds a budget's list of pods being evicted.
	maxDisruptedPods = 2000
)

// evict deletes a pod as pods/eviction does: unless the pod is done,
// pending or already going, its PodDisruptionBudget (one at most) must
// allow one more disruption, which is taken from it before the pod is
// marked a disruption's target and deleted; otherwise 429, which kubectl
// drain retries.
func (s *Server) evict(ctx context.Context, req request, ev *policyv1.Eviction) error {
	opts := metav1.DeleteOptions{}
	if ev.DeleteOptions != nil {
		opts = *ev.DeleteOptions
	}
	obj, err := s.store.Get(ctx, req.Resource, req.Namespace, req.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	pod := obj.(*corev1.Pod)
	if opts.Preconditions != nil && opts.Preconditions.UID != nil && *opts.Preconditions.UID != pod.UID {
		return apierrors.NewConflict(req.Resource.GroupResource(), req.Name,
			fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s); the object might have been deleted and then recreated", *opts.Preconditions.UID, pod.UID))
	}
	free := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodPending ||
		pod.DeletionTimestamp != nil
	dryRun := len(opts.DryRun) > 0
	if !free {
		if err := s.takeDisruption(ctx, pod, dryRun); err != nil {
			return err
		}
	}
	if dryRun {
		_, _, err := s.store.Delete(ctx, req.Resource, req.Namespace, req.Name, opts)
		return err
	}
	// As kube-apiserver: a pod that still runs is marked a disruption's
	// target first, which a Job's podFailurePolicy can match.
	_, err = s.store.Mutate(ctx, req.Resource, req.Namespace, req.Name, "status", func(obj runtime.Object) error {
		pod := obj.(*corev1.Pod)
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			return nil
		}
		cond := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
			Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting", LastTransitionTime: metav1.Now()}
		for i, c := range pod.Status.Conditions {
			if c.Type == corev1.DisruptionTarget {
				if c.Status == corev1.ConditionTrue {
					return nil
				}
				pod.Status.Conditions[i] = cond
				return nil
			}
		}
		pod.Status.Conditions = append(pod.Status.Conditions, cond)
		return nil
	})
	if err != nil {
		return err
	}
	_, _, err = s.store.Delete(ctx, req.Resource, req.Namespace, req.Name, opts)
	return err
}

// takeDisruption takes one allowed disruption for pod from its budget,
// if it has one (a dry run only checks that it could); an unhealthy pod
// takes none when the budget is met or its policy is AlwaysAllow.
func (s *Server) takeDisruption(ctx context.Context, pod *corev1.Pod, dryRun bool) error {
	res, ok := s.store.Resources().Lookup(policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets"))
	if !ok {
		return nil
	}
	list, err := s.store.List(ctx, res, pod.Namespace, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var pdbs []*policyv1.PodDisruptionBudget
	for i := range list.(*policyv1.PodDisruptionBudgetList).Items {
		p := &list.(*policyv1.PodDisruptionBudgetList).Items[i]
		if sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector); err == nil && p.Spec.Selector != nil && sel.Matches(labels.Set(pod.Labels)) {
			pdbs = append(pdbs, p)
		}
	}
	switch len(pdbs) {
	case 0:
		return nil
	case 1:
	default:
		return apierrors.NewInternalError(fmt.Errorf("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."))
	}
	pdb := pdbs[0]
	ready := false
	for _, c := range pod.Status.Conditions {
		ready = ready || c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	}
	if !ready {
		policy := policyv1.IfHealthyBudget
		if p := pdb.Spec.UnhealthyPodEvictionPolicy; p != nil {
			policy = *p
		}
		if policy == policyv1.AlwaysAllow || pdb.Status.ObservedGeneration >= pdb.Generation && pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy &&
			pdb.Status.DesiredHealthy > 0 {
			return nil
		}
	}
	if dryRun {
		return budgetAllows(res, pdb)
	}
	_, err = s.store.Mutate(ctx, res, pdb.Namespace, pdb.Name, "status", func(obj runtime.Object) error {
		p := obj.(*policyv1.PodDisruptionBudget)
		if p.UID != pdb.UID {
			return apierrors.NewConflict(res.GroupResource(), pdb.Name, fmt.Errorf("the budget was replaced"))
		}
		if err := budgetAllows(res, p); err != nil {
			return err
		}
		p.Status.DisruptionsAllowed--
		if p.Status.DisruptionsAllowed == 0 {
			for i := range p.Status.Conditions {
				if p.Status.Conditions[i].Type == policyv1.DisruptionAllowedCondition {
					p.Status.Conditions[i].Status, p.Status.Conditions[i].Reason = metav1.ConditionFalse, policyv1.InsufficientPodsReason
				}
			}
		}
		if p.Status.DisruptedPods == nil {
			p.Status.DisruptedPods = map[string]metav1.Time{}
		}
		p.Status.DisruptedPods[pod.Name] = metav1.NewTime(time.Now())
		return nil
	})
	return err
}

// budgetAllows reports why a budget's status allows no disruption now.
func budgetAllows(res *registry.Resource, p *policyv1.PodDisruptionBudget) error {
	switch {
	case p.Status.ObservedGeneration < p.Generation:
		return budgetError(fmt.Sprintf("The disruption budget %s is still being processed by the server.", p.Name))
	case p.Status.DisruptionsAllowed < 0:
		return apierrors.NewForbidden(res.GroupResource(), p.Name, fmt.Errorf("pdb disruptions allowed is negative"))
	case len(p.Status.DisruptedPods) > maxDisruptedPods:
		return apierrors.NewForbidden(res.GroupResource(), p.Name, fmt.Errorf("DisruptedPods map too big - too many evictions not confirmed by PDB controller"))
	case p.Status.DisruptionsAllowed == 0:
		return budgetError(fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", p.Name, p.Status.DesiredHealthy, p.Status.CurrentHealthy))
	}
	return nil
}

// budgetError is the 429 of an eviction a budget does not allow, with
// its cause.
func budgetError(cause string) error {
	err := apierrors.NewTooManyRequests(msgViolatesBudget, 0)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: causeBudget, Message: cause})
	return err
}
