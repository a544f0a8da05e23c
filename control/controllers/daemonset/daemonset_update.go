package daemonset

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/isle-cluster/isle/control/controllers/history"
	"github.com/isle-cluster/isle/control/controllers/kit"
)

// dsAllowsSurge: more than one pod may run on a node during an update.
func dsAllowsSurge(ds *appsv1.DaemonSet) bool {
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType || ru == nil || ru.MaxSurge == nil {
		return false
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxSurge, 1, true)
	return err == nil && n > 0
}

// rollingUpdate replaces old pods within maxUnavailable or maxSurge; it
// reports whether it changed anything.
func (s *dsSync) rollingUpdate() (bool, error) {
	runs := map[string]bool{}
	for _, node := range s.nodes {
		if run, _ := s.shouldRun(node); run {
			runs[node.Name] = true
			if _, ok := s.byNode[node.Name]; !ok {
				s.byNode[node.Name] = nil
			}
		}
	}
	desired := len(runs)
	ru := s.ds.Spec.UpdateStrategy.RollingUpdate
	if ru == nil {
		ru = &appsv1.RollingUpdateDaemonSet{}
	}
	zero := intstr.FromInt32(0)
	maxUnavailable, err1 := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(ru.MaxUnavailable, zero), desired, true)
	maxSurge, err2 := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(ru.MaxSurge, zero), desired, true)
	if err := errors.Join(err1, err2); err != nil {
		return false, fmt.Errorf("rolling update: %w", err)
	}
	// Neither would stall the update: Kubernetes then accepts one
	// unavailable pod.
	if desired > 0 && maxUnavailable == 0 && maxSurge == 0 {
		maxUnavailable = 1
	}
	nodes := slices.Sorted(maps.Keys(s.byNode))
	if maxSurge == 0 {
		return s.syncNodes(s.unavailableToReplace(nodes, maxUnavailable), nil)
	}
	return s.syncNodes(s.surge(nodes, runs, maxSurge))
}

// newAndOld returns the one up-to-date and the one old pod of a node; ok
// is false if there are more, which manage cleans up first.
func (s *dsSync) newAndOld(pods []*corev1.Pod) (newPod, oldPod *corev1.Pod, ok bool) {
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		if s.updated(pod) {
			if newPod != nil {
				return nil, nil, false
			}
			newPod = pod
		} else {
			if oldPod != nil {
				return nil, nil, false
			}
			oldPod = pod
		}
	}
	return newPod, oldPod, true
}

// unavailableToReplace returns the old pods to delete without surge: the
// unavailable ones, and available ones while fewer than maxUnavailable
// nodes are without an available pod. The manage loop then creates new
// pods where the old ones were.
func (s *dsSync) unavailableToReplace(nodes []string, maxUnavailable int) []*corev1.Pod {
	unavailable := 0
	var replace, candidates []*corev1.Pod
	for _, node := range nodes {
		newPod, oldPod, ok := s.newAndOld(s.byNode[node])
		switch {
		case !ok, newPod == nil && oldPod == nil, newPod != nil && oldPod != nil:
			unavailable++
		case newPod != nil:
			if !s.available(newPod) {
				unavailable++
			}
		case !s.available(oldPod):
			replace = append(replace, oldPod)
		case unavailable < maxUnavailable:
			candidates = append(candidates, oldPod)
		}
	}
	n := min(max(maxUnavailable-unavailable, 0), len(candidates))
	return append(replace, candidates[:n]...)
}

// surge returns, with maxSurge, the old pods to delete (where the new pod
// is available) and the nodes to start a new pod on beside the old one:
// every node whose old pod is unavailable, and up to maxSurge others, among
// the nodes that should run one (runs).
func (s *dsSync) surge(nodes []string, runs map[string]bool, maxSurge int) ([]*corev1.Pod, []string) {
	var del []*corev1.Pod
	var replace, candidates []string
	surging := 0
	for _, node := range nodes {
		newPod, oldPod, ok := s.newAndOld(s.byNode[node])
		switch {
		case !ok:
			surging++
		case oldPod == nil:
			// nothing to replace; manage creates missing pods
		case newPod == nil && !runs[node]:
			// a pod that may stay but gets no new one beside it
		case newPod == nil && !s.available(oldPod):
			replace = append(replace, node)
		case newPod == nil:
			if surging < maxSurge {
				candidates = append(candidates, node)
			}
		case !s.available(newPod):
			surging++
		default:
			del = append(del, oldPod)
		}
	}
	n := min(max(maxSurge-surging, 0), len(candidates))
	return del, append(replace, candidates[:n]...)
}

// writeStatus computes the status from the pods and writes it if it
// changed.
func (s *dsSync) writeStatus() error {
	st := *s.ds.Status.DeepCopy()
	var desired, current, misscheduled, ready, updated, available int32
	for _, node := range s.nodes {
		run, _ := s.shouldRun(node)
		pods := s.byNode[node.Name]
		if !run {
			if len(pods) > 0 {
				misscheduled++
			}
			continue
		}
		desired++
		if len(pods) == 0 {
			continue
		}
		current++
		pod := slices.MinFunc(pods, kit.OldestFirst)
		if kit.PodReady(pod) {
			ready++
			if s.available(pod) {
				available++
			}
		}
		if s.updated(pod) {
			updated++
		}
	}
	st.DesiredNumberScheduled, st.CurrentNumberScheduled, st.NumberMisscheduled = desired, current, misscheduled
	st.NumberReady, st.UpdatedNumberScheduled, st.NumberAvailable = ready, updated, available
	st.NumberUnavailable = desired - available
	st.ObservedGeneration = s.ds.Generation
	if equality.Semantic.DeepEqual(s.ds.Status, st) {
		return nil
	}
	uid := s.ds.UID
	_, err := s.store.Mutate(s.ctx, s.dsRes, s.ds.Namespace, s.ds.Name, "status", func(obj runtime.Object) error {
		cur := obj.(*appsv1.DaemonSet)
		if cur.UID != uid {
			return errDSSkip
		}
		cur.Status = st
		return nil
	})
	if errors.Is(err, errDSSkip) || apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("update daemonset status: %w", err)
	}
	return nil
}

// recordRevision makes the current template the newest of the
// DaemonSet's ControllerRevisions (package history), named by its
// template hash, keeping revisionHistoryLimit older ones; a template seen
// before takes the next number. The history annotation of isle before
// ControllerRevisions is removed. It reports false if the DaemonSet
// changed meanwhile.
func (s *dsSync) recordRevision() (bool, error) {
	if _, ok := s.ds.Annotations[dsRevisionsAnnotation]; ok {
		uid := s.ds.UID
		out, err := s.store.Mutate(s.ctx, s.dsRes, s.ds.Namespace, s.ds.Name, "", func(obj runtime.Object) error {
			cur := obj.(*appsv1.DaemonSet)
			if cur.UID != uid {
				return errDSSkip
			}
			delete(cur.Annotations, dsRevisionsAnnotation)
			return nil
		})
		if errors.Is(err, errDSSkip) || apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("record revision: %w", err)
		}
		s.ds = out.(*appsv1.DaemonSet)
	}
	h := &history.History{Store: s.store, Res: s.revRes, Owner: s.ds, Kind: dsKind, Labels: s.ds.Spec.Template.Labels,
		Annotations: s.ds.Annotations, NameHash: func(_ []byte, collisionCount *int32) string {
			return kit.TemplateHash(&s.ds.Spec.Template, collisionCount)
		}}
	revs, err := h.List(s.ctx)
	if err != nil {
		return false, fmt.Errorf("record revision: %w", err)
	}
	data, err := history.Patch(&s.ds.Spec.Template)
	if err != nil {
		return false, err
	}
	cur, err := h.Record(s.ctx, revs, data, s.ds.Status.CollisionCount)
	if err != nil {
		return false, fmt.Errorf("record revision: %w", err)
	}
	if len(revs) == 0 || revs[len(revs)-1].Name != cur.Name {
		s.log.Info("daemonset controller: recorded revision", "daemonset", s.key, "revision", cur.Revision, "hash", s.hash)
	}
	revs = slices.DeleteFunc(revs, func(r *appsv1.ControllerRevision) bool { return r.Name == cur.Name })
	limit := int32(10)
	if l := s.ds.Spec.RevisionHistoryLimit; l != nil {
		limit = *l
	}
	return true, h.Truncate(s.ctx, revs, nil, limit)
}
