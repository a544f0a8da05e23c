package deployment

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/registry"
)

// errDeployRetry asks for the Deployment to be synced again soon: what it
// saw changed meanwhile.
var errDeployRetry = errors.New("changed meanwhile")

// deploySync is one sync of one Deployment.
type deploySync struct {
	c   *Controller
	ctx context.Context
	// d is the Deployment as read; d.Status gathers the conditions set
	// along the way (paused, new ReplicaSet created), stored the status as
	// stored, so that only a change is written.
	d      *appsv1.Deployment
	stored appsv1.DeploymentStatus
	sel    labels.Selector
	// rss are the ReplicaSets the Deployment controls; newRS (the one of
	// the current template, if any) and oldRSs split them.
	rss    []*appsv1.ReplicaSet
	newRS  *appsv1.ReplicaSet
	oldRSs []*appsv1.ReplicaSet
}

// syncDeployment reconciles one Deployment and returns when it wants to
// look at it again (0: only on changes).
func (c *Controller) syncDeployment(ctx context.Context, d *appsv1.Deployment) (time.Duration, error) {
	if d.DeletionTimestamp != nil {
		return 0, nil // the garbage collector takes its ReplicaSets
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || sel.Empty() {
		return 0, nil // validation refuses these
	}
	s := &deploySync{c: c, ctx: ctx, d: d.DeepCopy(), stored: *d.Status.DeepCopy(), sel: sel}
	if err := s.claimReplicaSets(); err != nil {
		return 0, err
	}
	s.checkPausedConditions()
	if s.d.Spec.Paused {
		return s.syncScale()
	}
	if scaling, err := s.isScalingEvent(); err != nil {
		return 0, err
	} else if scaling {
		return s.syncScale()
	}
	if s.d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		return s.rolloutRecreate()
	}
	return s.rolloutRolling()
}

// claimReplicaSets finds the ReplicaSets the Deployment controls, adopting
// orphans its selector matches and releasing its own that it no longer
// matches.
func (s *deploySync) claimReplicaSets() error {
	list, err := s.c.store.List(s.ctx, s.c.rsRes, s.d.Namespace, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return err
	}
	items := list.(*appsv1.ReplicaSetList).Items
	for i := range items {
		rs := &items[i]
		ref := metav1.GetControllerOf(rs)
		matches := s.sel.Matches(labels.Set(rs.Labels))
		switch {
		case ref != nil && ref.UID != s.d.UID:
			// someone else's
		case ref != nil && matches:
			s.rss = append(s.rss, rs)
		case ref != nil:
			if err := s.release(rs); err != nil {
				return err
			}
		case matches && rs.DeletionTimestamp == nil:
			adopted, err := s.adopt(rs)
			if err != nil {
				return err
			}
			if adopted != nil {
				s.rss = append(s.rss, adopted)
			}
		}
	}
	return nil
}

func (s *deploySync) adopt(rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
	skip := errors.New("not adoptable")
	out, err := s.c.store.Mutate(s.ctx, s.c.rsRes, rs.Namespace, rs.Name, "", func(obj runtime.Object) error {
		cur := obj.(*appsv1.ReplicaSet)
		if cur.UID != rs.UID || metav1.GetControllerOf(cur) != nil || cur.DeletionTimestamp != nil || !s.sel.Matches(labels.Set(cur.Labels)) {
			return skip
		}
		cur.OwnerReferences = append(cur.OwnerReferences, *metav1.NewControllerRef(s.d, appsv1.SchemeGroupVersion.WithKind("Deployment")))
		return nil
	})
	if errors.Is(err, skip) || apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s.c.log.Info("deployment controller: adopted ReplicaSet", "namespace", rs.Namespace, "deployment", s.d.Name, "replicaset", rs.Name)
	return out.(*appsv1.ReplicaSet), nil
}

func (s *deploySync) release(rs *appsv1.ReplicaSet) error {
	_, err := s.c.store.Mutate(s.ctx, s.c.rsRes, rs.Namespace, rs.Name, "", func(obj runtime.Object) error {
		cur := obj.(*appsv1.ReplicaSet)
		cur.OwnerReferences = slices.DeleteFunc(cur.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == s.d.UID })
		return nil
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	s.c.log.Info("deployment controller: released ReplicaSet", "namespace", rs.Namespace, "deployment", s.d.Name, "replicaset", rs.Name)
	return nil
}

// all returns the Deployment's ReplicaSets, old ones first.
func (s *deploySync) all() []*appsv1.ReplicaSet {
	if s.newRS == nil {
		return s.oldRSs
	}
	return append(slices.Clone(s.oldRSs), s.newRS)
}

// replace puts the stored version of a ReplicaSet in place of the one read.
func (s *deploySync) replace(rs *appsv1.ReplicaSet) {
	for _, list := range [][]*appsv1.ReplicaSet{s.rss, s.oldRSs} {
		for i, x := range list {
			if x.UID == rs.UID {
				list[i] = rs
			}
		}
	}
	if s.newRS != nil && s.newRS.UID == rs.UID {
		s.newRS = rs
	}
}

// replicaSets splits the ReplicaSets into the new one and the old ones,
// brings the new one's revision and annotations up to date and, with
// create, creates it if it does not exist yet.
func (s *deploySync) replicaSets(create bool) error {
	slices.SortStableFunc(s.rss, deployByCreation)
	s.newRS, s.oldRSs = nil, nil
	for _, rs := range s.rss {
		if s.newRS == nil && deployEqualIgnoreHash(&rs.Spec.Template, &s.d.Spec.Template) {
			s.newRS = rs
		} else {
			s.oldRSs = append(s.oldRSs, rs)
		}
	}
	newRevision := strconv.FormatInt(deployMaxRevision(s.oldRSs)+1, 10)
	if s.newRS != nil {
		return s.updateNewReplicaSet(newRevision)
	}
	if !create {
		return nil
	}
	return s.createNewReplicaSet(newRevision)
}

func (s *deploySync) updateNewReplicaSet(newRevision string) error {
	d, rs := s.d, s.newRS
	update := func(cur *appsv1.ReplicaSet) bool {
		changed := deploySetNewRSAnnotations(d, cur, newRevision, true)
		if cur.Spec.MinReadySeconds != d.Spec.MinReadySeconds {
			cur.Spec.MinReadySeconds = d.Spec.MinReadySeconds
			changed = true
		}
		return changed
	}
	if update(rs.DeepCopy()) {
		out, err := s.c.store.Mutate(s.ctx, s.c.rsRes, rs.Namespace, rs.Name, "", func(obj runtime.Object) error {
			cur := obj.(*appsv1.ReplicaSet)
			if cur.UID != rs.UID || cur.Generation != rs.Generation {
				return errDeployRetry
			}
			update(cur)
			return nil
		})
		if err != nil {
			return err
		}
		s.replace(out.(*appsv1.ReplicaSet))
	}
	if err := s.setDeploymentRevision(s.newRS.Annotations[deployRevisionAnnotation]); err != nil {
		return err
	}
	if deployHasProgressDeadline(d) && deployCondition(d.Status, appsv1.DeploymentProgressing) == nil {
		s.setCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, deployReasonFoundNewRS,
			fmt.Sprintf("Found new replica set %q", s.newRS.Name))
	}
	return nil
}

func (s *deploySync) createNewReplicaSet(newRevision string) error {
	d := s.d
	hash := kit.TemplateHash(&d.Spec.Template, d.Status.CollisionCount)
	tmpl := d.Spec.Template.DeepCopy()
	tmpl.Labels = kit.WithLabel(tmpl.Labels, appsv1.DefaultDeploymentUniqueLabelKey, hash)
	sel := d.Spec.Selector.DeepCopy()
	sel.MatchLabels = kit.WithLabel(sel.MatchLabels, appsv1.DefaultDeploymentUniqueLabelKey, hash)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:            d.Name + "-" + hash,
			Namespace:       d.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))},
			Labels:          maps.Clone(tmpl.Labels),
		},
		Spec: appsv1.ReplicaSetSpec{MinReadySeconds: d.Spec.MinReadySeconds, Selector: sel, Template: *tmpl},
	}
	n := deployNewRSReplicas(d, s.oldRSs, nil)
	rs.Spec.Replicas = &n
	deploySetNewRSAnnotations(d, rs, newRevision, false)

	out, err := s.c.store.Create(s.ctx, s.c.rsRes, d.Namespace, rs, registry.WriteOptions{})
	switch {
	case err == nil:
		created := out.(*appsv1.ReplicaSet)
		s.c.log.Info("deployment controller: created ReplicaSet", "namespace", d.Namespace, "deployment", d.Name,
			"replicaset", created.Name, "replicas", n, "revision", newRevision)
		if n > 0 {
			s.c.events.Eventf(d, corev1.EventTypeNormal, deployReasonScaling, "Scaled up replica set %s from 0 to %d", created.Name, n)
		}
		s.newRS = created
		s.rss = append(s.rss, created)
		if deployHasProgressDeadline(d) {
			s.setCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, deployReasonNewRSCreated,
				fmt.Sprintf("Created new replica set %q", created.Name))
		}
		return s.setDeploymentRevision(newRevision)
	case apierrors.IsAlreadyExists(err):
		obj, gerr := s.c.store.Get(s.ctx, s.c.rsRes, d.Namespace, rs.Name, metav1.GetOptions{})
		if gerr != nil {
			return gerr
		}
		existing := obj.(*appsv1.ReplicaSet)
		if ref := metav1.GetControllerOf(existing); ref != nil && ref.UID == d.UID && deployEqualIgnoreHash(&existing.Spec.Template, &d.Spec.Template) {
			return errDeployRetry // ours, not seen yet: the next sync finds it
		}
		// A different ReplicaSet has the name: hash again with a new
		// collision count.
		_, merr := s.c.store.Mutate(s.ctx, s.c.dRes, d.Namespace, d.Name, "status", func(obj runtime.Object) error {
			cur := obj.(*appsv1.Deployment)
			if cur.UID != d.UID || !equality.Semantic.DeepEqual(cur.Status.CollisionCount, d.Status.CollisionCount) {
				return errDeployRetry
			}
			n := int32(1)
			if cur.Status.CollisionCount != nil {
				n = *cur.Status.CollisionCount + 1
			}
			cur.Status.CollisionCount = &n
			return nil
		})
		if merr != nil {
			return merr
		}
		return fmt.Errorf("ReplicaSet name %s is taken: %w", rs.Name, errDeployRetry)
	default:
		msg := fmt.Sprintf("Failed to create new replica set %q: %v", rs.Name, err)
		if deployHasProgressDeadline(d) {
			s.setCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, deployReasonRSCreateError, msg)
			_, _ = s.writeStatus(false)
		}
		s.c.events.Eventf(d, corev1.EventTypeWarning, deployReasonRSCreateError, "%s", msg)
		return err
	}
}

// setDeploymentRevision records the current revision on the Deployment.
func (s *deploySync) setDeploymentRevision(rev string) error {
	if rev == "" || s.d.Annotations[deployRevisionAnnotation] == rev {
		return nil
	}
	out, err := s.c.store.Mutate(s.ctx, s.c.dRes, s.d.Namespace, s.d.Name, "", func(obj runtime.Object) error {
		cur := obj.(*appsv1.Deployment)
		if cur.UID != s.d.UID || cur.Generation != s.d.Generation {
			return errDeployRetry
		}
		cur.Annotations = kit.WithLabel(cur.Annotations, deployRevisionAnnotation, rev)
		return nil
	})
	if err != nil {
		return err
	}
	s.d.Annotations = out.(*appsv1.Deployment).Annotations
	return nil
}

// setCondition sets a condition of the status being built.
func (s *deploySync) setCondition(t appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason, msg string) {
	deploySetCondition(&s.d.Status, deployNewCondition(s.c.now(), t, status, reason, msg))
}

func (s *deploySync) checkPausedConditions() {
	if !deployHasProgressDeadline(s.d) {
		return
	}
	cond := deployCondition(s.d.Status, appsv1.DeploymentProgressing)
	pausedCond := cond != nil && cond.Reason == deployReasonPaused
	switch {
	case s.d.Spec.Paused && !pausedCond:
		s.setCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, deployReasonPaused, "Deployment is paused")
	case !s.d.Spec.Paused && pausedCond:
		s.setCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, deployReasonResumed, "Deployment is resumed")
	}
}

// isScalingEvent: spec.replicas changed since the active ReplicaSets were
// last sized (their desired-replicas annotation).
func (s *deploySync) isScalingEvent() (bool, error) {
	if err := s.replicaSets(false); err != nil {
		return false, err
	}
	for _, rs := range s.all() {
		if deployReplicas(rs) == 0 {
			continue
		}
		if desired, ok := deployAnnotationInt(rs, deployDesiredReplicasAnnotation); ok && desired != deployWanted(s.d) {
			return true, nil
		}
	}
	return false, nil
}

// syncScale sizes the ReplicaSets for spec.replicas without moving the
// rollout (a paused Deployment, or a scaling event).
func (s *deploySync) syncScale() (time.Duration, error) {
	if err := s.replicaSets(false); err != nil {
		return 0, err
	}
	if err := s.scale(); err != nil {
		return 0, err
	}
	if s.d.Spec.Paused {
		if err := s.cleanup(); err != nil {
			return 0, err
		}
	}
	return s.writeStatus(false)
}

// scale sizes the ReplicaSets when spec.replicas changed: the one active
// ReplicaSet follows it; a saturated new one lets the old ones go; during a
// rolling update the difference is spread over the active ReplicaSets in
// proportion to their sizes.
func (s *deploySync) scale() error {
	want := deployWanted(s.d)
	if rs := s.activeOrLatest(); rs != nil {
		_, err := s.scaleIfNeeded(rs, want)
		return err
	}
	if deploySaturated(s.d, s.newRS) {
		for _, rs := range s.oldRSs {
			if deployReplicas(rs) > 0 {
				if _, err := s.scaleRS(rs, 0); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if s.d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		return nil
	}
	var active []*appsv1.ReplicaSet
	var total int32
	for _, rs := range s.all() {
		if deployReplicas(rs) > 0 {
			active = append(active, rs)
			total += deployReplicas(rs)
		}
	}
	allowed := int32(0)
	if want > 0 {
		allowed = want + deployMaxSurge(s.d)
	}
	toAdd := allowed - total
	sizes := make([]int32, len(active))
	for i, rs := range active {
		sizes[i] = deployReplicas(rs)
	}
	if toAdd != 0 {
		// Largest first (newest among equals when growing, oldest when
		// shrinking); the leftover of the rounding goes to the largest.
		slices.SortStableFunc(active, func(a, b *appsv1.ReplicaSet) int {
			if c := int(deployReplicas(b)) - int(deployReplicas(a)); c != 0 {
				return c
			}
			if toAdd > 0 {
				return -deployByCreation(a, b)
			}
			return deployByCreation(a, b)
		})
		added := int32(0)
		for i, rs := range active {
			share := int32(int64(deployReplicas(rs)) * int64(toAdd) / int64(total))
			sizes[i] = deployReplicas(rs) + share
			added += share
		}
		if len(active) > 0 {
			sizes[0] = max(sizes[0]+toAdd-added, 0)
		}
	}
	for i, rs := range active {
		// Written even at the same size: the annotations record the scale.
		if _, err := s.scaleRS(rs, sizes[i]); err != nil {
			return err
		}
	}
	return nil
}

// activeOrLatest returns the only ReplicaSet with replicas, or, if none
// has any, the new one (else the newest old one); nil if several are active.
func (s *deploySync) activeOrLatest() *appsv1.ReplicaSet {
	var active []*appsv1.ReplicaSet
	for _, rs := range s.all() {
		if deployReplicas(rs) > 0 {
			active = append(active, rs)
		}
	}
	switch len(active) {
	case 1:
		return active[0]
	case 0:
		if s.newRS != nil {
			return s.newRS
		}
		if len(s.oldRSs) > 0 {
			return slices.MaxFunc(s.oldRSs, deployByCreation)
		}
	}
	return nil
}

func (s *deploySync) scaleIfNeeded(rs *appsv1.ReplicaSet, n int32) (bool, error) {
	if deployReplicas(rs) == n {
		return false, nil
	}
	return s.scaleRS(rs, n)
}

// scaleRS sets a ReplicaSet's replicas and its desired/max-replicas
// annotations; it reports whether it wrote anything.
func (s *deploySync) scaleRS(rs *appsv1.ReplicaSet, n int32) (bool, error) {
	d := s.d
	desired, maxReplicas := deployWanted(d), deployWanted(d)+deployMaxSurge(d)
	update := func(cur *appsv1.ReplicaSet) bool {
		changed := deploySetReplicasAnnotations(cur, desired, maxReplicas)
		if deployReplicas(cur) != n {
			cur.Spec.Replicas = &n
			changed = true
		}
		return changed
	}
	if !update(rs.DeepCopy()) {
		return false, nil
	}
	out, err := s.c.store.Mutate(s.ctx, s.c.rsRes, rs.Namespace, rs.Name, "", func(obj runtime.Object) error {
		cur := obj.(*appsv1.ReplicaSet)
		if cur.UID != rs.UID || cur.Generation != rs.Generation {
			return errDeployRetry
		}
		update(cur)
		return nil
	})
	if err != nil {
		return false, err
	}
	if from := deployReplicas(rs); from != n {
		s.c.log.Info("deployment controller: scaled ReplicaSet", "namespace", rs.Namespace, "deployment", d.Name,
			"replicaset", rs.Name, "from", from, "to", n)
		direction := "up"
		if n < from {
			direction = "down"
		}
		s.c.events.Eventf(d, corev1.EventTypeNormal, deployReasonScaling, "Scaled %s replica set %s from %d to %d", direction, rs.Name, from, n)
	}
	s.replace(out.(*appsv1.ReplicaSet))
	return true, nil
}

// rolloutRolling moves a RollingUpdate one step: the new ReplicaSet up as
// far as maxSurge allows, else the old ones down as far as maxUnavailable
// allows.
func (s *deploySync) rolloutRolling() (time.Duration, error) {
	if err := s.replicaSets(true); err != nil {
		return 0, err
	}
	if scaled, err := s.reconcileNewReplicaSet(); err != nil {
		return 0, err
	} else if scaled {
		return s.writeStatus(true)
	}
	if scaled, err := s.reconcileOldReplicaSets(); err != nil {
		return 0, err
	} else if scaled {
		return s.writeStatus(true)
	}
	if deployComplete(s.d, &s.stored) {
		if err := s.cleanup(); err != nil {
			return 0, err
		}
	}
	return s.writeStatus(true)
}

func (s *deploySync) reconcileNewReplicaSet() (bool, error) {
	want := deployWanted(s.d)
	switch cur := deployReplicas(s.newRS); {
	case cur == want:
		return false, nil
	case cur > want:
		return s.scaleIfNeeded(s.newRS, want)
	}
	return s.scaleIfNeeded(s.newRS, deployNewRSReplicas(s.d, s.oldRSs, s.newRS))
}

func (s *deploySync) reconcileOldReplicaSets() (bool, error) {
	oldPods := deploySumReplicas(s.oldRSs)
	if oldPods == 0 {
		return false, nil
	}
	allPods := oldPods + deployReplicas(s.newRS)
	minAvailable := deployWanted(s.d) - deployMaxUnavailable(s.d)
	newUnavailable := deployReplicas(s.newRS) - deployAvailable(s.newRS)
	// Room to scale down: what is above minAvailable, less the new pods
	// that are not available yet (they may never be).
	room := allPods - minAvailable - newUnavailable
	if room <= 0 {
		return false, nil
	}
	cleaned, err := s.scaleDownUnhealthy(room)
	if err != nil {
		return false, err
	}
	scaled, err := s.scaleDownOld()
	if err != nil {
		return false, err
	}
	return cleaned+scaled > 0, nil
}

// scaleDownUnhealthy first takes away old replicas that are not available
// anyway, oldest ReplicaSet first, at most room of them.
func (s *deploySync) scaleDownUnhealthy(room int32) (int32, error) {
	old := slices.Clone(s.oldRSs)
	slices.SortStableFunc(old, deployByCreation)
	var total int32
	for _, rs := range old {
		if total >= room {
			break
		}
		n := deployReplicas(rs)
		if n == 0 || n <= deployAvailable(rs) {
			continue
		}
		down := min(room-total, n-deployAvailable(rs))
		if _, err := s.scaleIfNeeded(rs, n-down); err != nil {
			return total, err
		}
		total += down
	}
	return total, nil
}

// scaleDownOld takes away available old replicas while the Deployment
// stays above minAvailable, oldest ReplicaSet first.
func (s *deploySync) scaleDownOld() (int32, error) {
	minAvailable := deployWanted(s.d) - deployMaxUnavailable(s.d)
	var available int32
	for _, rs := range s.all() {
		available += deployAvailable(rs)
	}
	if available <= minAvailable {
		return 0, nil
	}
	room := available - minAvailable
	old := slices.Clone(s.oldRSs)
	slices.SortStableFunc(old, deployByCreation)
	var total int32
	for _, rs := range old {
		if total >= room {
			break
		}
		n := deployReplicas(rs)
		if n == 0 {
			continue
		}
		down := min(n, room-total)
		if _, err := s.scaleIfNeeded(rs, n-down); err != nil {
			return total, err
		}
		total += down
	}
	return total, nil
}

// rolloutRecreate scales every old ReplicaSet to zero, waits until their
// pods are gone, then creates (or scales up) the new one.
func (s *deploySync) rolloutRecreate() (time.Duration, error) {
	if err := s.replicaSets(false); err != nil {
		return 0, err
	}
	scaled := false
	for _, rs := range s.oldRSs {
		if deployReplicas(rs) > 0 {
			if _, err := s.scaleRS(rs, 0); err != nil {
				return 0, err
			}
			scaled = true
		}
	}
	if scaled {
		return s.writeStatus(true)
	}
	running, err := s.oldPodsRunning()
	if err != nil {
		return 0, err
	}
	if running {
		return s.writeStatus(true)
	}
	if s.newRS == nil {
		if err := s.replicaSets(true); err != nil {
			return 0, err
		}
	}
	if _, err := s.scaleIfNeeded(s.newRS, deployWanted(s.d)); err != nil {
		return 0, err
	}
	if deployComplete(s.d, &s.stored) {
		if err := s.cleanup(); err != nil {
			return 0, err
		}
	}
	return s.writeStatus(true)
}

// oldPodsRunning reports whether an old ReplicaSet still counts pods, or a
// pod one of them controls has not ended.
func (s *deploySync) oldPodsRunning() (bool, error) {
	old := map[string]bool{}
	for _, rs := range s.oldRSs {
		if rs.Status.Replicas > 0 {
			return true, nil
		}
		old[string(rs.UID)] = true
	}
	if len(old) == 0 {
		return false, nil
	}
	list, err := s.c.store.List(s.ctx, s.c.podRes, s.d.Namespace, metav1.ListOptions{ResourceVersion: "0", LabelSelector: s.sel.String()})
	if err != nil {
		return false, err
	}
	for i := range list.(*corev1.PodList).Items {
		pod := &list.(*corev1.PodList).Items[i]
		ref := metav1.GetControllerOf(pod)
		if ref == nil || !old[string(ref.UID)] {
			continue
		}
		if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			return true, nil
		}
	}
	return false, nil
}

// cleanup deletes the oldest old ReplicaSets beyond revisionHistoryLimit
// that have no replicas left.
func (s *deploySync) cleanup() error {
	if s.d.Spec.RevisionHistoryLimit == nil {
		return nil
	}
	var alive []*appsv1.ReplicaSet
	for _, rs := range s.oldRSs {
		if rs.DeletionTimestamp == nil {
			alive = append(alive, rs)
		}
	}
	excess := len(alive) - int(*s.d.Spec.RevisionHistoryLimit)
	if excess <= 0 {
		return nil
	}
	slices.SortStableFunc(alive, func(a, b *appsv1.ReplicaSet) int {
		ra, _ := deployAnnotationInt64(a, deployRevisionAnnotation)
		rb, _ := deployAnnotationInt64(b, deployRevisionAnnotation)
		if ra != rb {
			if ra < rb {
				return -1
			}
			return 1
		}
		return deployByCreation(a, b)
	})
	for _, rs := range alive[:excess] {
		if rs.Status.Replicas != 0 || deployReplicas(rs) != 0 || rs.Generation > rs.Status.ObservedGeneration {
			continue
		}
		uid := rs.UID
		_, _, err := s.c.store.Delete(s.ctx, s.c.rsRes, rs.Namespace, rs.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return err
		}
		if err == nil {
			s.c.log.Info("deployment controller: deleted old ReplicaSet", "namespace", rs.Namespace, "deployment", s.d.Name,
				"replicaset", rs.Name, "revision", rs.Annotations[deployRevisionAnnotation])
		}
	}
	return nil
}

// writeStatus computes the status from the ReplicaSets (with, if
// progress, the Progressing condition of a rollout) and writes it if it
// changed. It returns when to look again for the progress deadline.
func (s *deploySync) writeStatus(progress bool) (time.Duration, error) {
	d := s.d
	st := s.calculateStatus()
	cur := deployCondition(d.Status, appsv1.DeploymentProgressing)
	complete := st.Replicas == st.UpdatedReplicas && cur != nil && cur.Reason == deployReasonNewRSAvailable
	if progress && deployHasProgressDeadline(d) && !complete {
		now := s.c.now()
		switch {
		case deployComplete(d, &st):
			msg := "Deployment has successfully progressed."
			if s.newRS != nil {
				msg = fmt.Sprintf("ReplicaSet %q has successfully progressed.", s.newRS.Name)
			}
			deploySetCondition(&st, deployNewCondition(now, appsv1.DeploymentProgressing, corev1.ConditionTrue, deployReasonNewRSAvailable, msg))
		case deployProgressing(&s.stored, &st):
			msg := "Deployment is progressing."
			if s.newRS != nil {
				msg = fmt.Sprintf("ReplicaSet %q is progressing.", s.newRS.Name)
			}
			// Progress moves lastUpdateTime even when the reason stays.
			c := deployNewCondition(now, appsv1.DeploymentProgressing, corev1.ConditionTrue, deployReasonRSUpdated, msg)
			if cur != nil && cur.Status == corev1.ConditionTrue {
				c.LastTransitionTime = cur.LastTransitionTime
			}
			deployRemoveCondition(&st, appsv1.DeploymentProgressing)
			deploySetCondition(&st, c)
		case deployTimedOut(d, &st, now):
			msg := "Deployment has timed out progressing."
			if s.newRS != nil {
				msg = fmt.Sprintf("ReplicaSet %q has timed out progressing.", s.newRS.Name)
			}
			deploySetCondition(&st, deployNewCondition(now, appsv1.DeploymentProgressing, corev1.ConditionFalse, deployReasonTimedOut, msg))
		}
	}
	var after time.Duration
	if progress {
		after = s.progressCheck(&st)
	}
	if equality.Semantic.DeepEqual(s.stored, st) {
		return after, nil
	}
	_, err := s.c.store.Mutate(s.ctx, s.c.dRes, d.Namespace, d.Name, "status", func(obj runtime.Object) error {
		cur := obj.(*appsv1.Deployment)
		if cur.UID != d.UID || cur.Generation != d.Generation {
			return errDeployRetry
		}
		cur.Status = st
		return nil
	})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	return after, err
}

// calculateStatus adds up the ReplicaSets' status and sets Available.
func (s *deploySync) calculateStatus() appsv1.DeploymentStatus {
	d := s.d
	all := s.all()
	st := appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation,
		CollisionCount:     d.Status.CollisionCount,
		Conditions:         slices.Clone(d.Status.Conditions),
	}
	var specTotal, terminating int32
	terminatingKnown := true
	for _, rs := range all {
		st.Replicas += rs.Status.Replicas
		st.ReadyReplicas += rs.Status.ReadyReplicas
		st.AvailableReplicas += rs.Status.AvailableReplicas
		specTotal += deployReplicas(rs)
		if rs.Status.TerminatingReplicas == nil {
			terminatingKnown = false
		} else {
			terminating += *rs.Status.TerminatingReplicas
		}
	}
	if terminatingKnown {
		// Known only when every ReplicaSet reports it.
		st.TerminatingReplicas = &terminating
	}
	if s.newRS != nil {
		st.UpdatedReplicas = s.newRS.Status.Replicas
	}
	st.UnavailableReplicas = max(specTotal-st.AvailableReplicas, 0)
	now := s.c.now()
	if st.AvailableReplicas >= deployWanted(d)-deployMaxUnavailable(d) {
		deploySetCondition(&st, deployNewCondition(now, appsv1.DeploymentAvailable, corev1.ConditionTrue, deployReasonMinAvailable, "Deployment has minimum availability."))
	} else {
		deploySetCondition(&st, deployNewCondition(now, appsv1.DeploymentAvailable, corev1.ConditionFalse, deployReasonMinUnavailable, "Deployment does not have minimum availability."))
	}
	return st
}

// progressCheck returns when a rollout that is still progressing reaches
// its deadline (0: no deadline to watch).
func (s *deploySync) progressCheck(st *appsv1.DeploymentStatus) time.Duration {
	d := s.d
	cond := deployCondition(*st, appsv1.DeploymentProgressing)
	if !deployHasProgressDeadline(d) || cond == nil || deployComplete(d, st) {
		return 0
	}
	switch cond.Reason {
	case deployReasonNewRSAvailable, deployReasonTimedOut, deployReasonPaused:
		return 0
	}
	deadline := cond.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second)
	return max(deadline.Sub(s.c.now())+time.Second, time.Second)
}
