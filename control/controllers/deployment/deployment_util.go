package deployment

import (
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Annotations and condition reasons of the Deployment controller, as
// Kubernetes names them (kubectl rollout history/undo/status read them).
const (
	deployRevisionAnnotation        = "deployment.kubernetes.io/revision"
	deployRevisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
	deployDesiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	deployMaxReplicasAnnotation     = "deployment.kubernetes.io/max-replicas"
	deployRollbackToAnnotation      = "deprecated.deployment.rollback.to"
	deployLastAppliedAnnotation     = "kubectl.kubernetes.io/last-applied-configuration"
	// deployRevisionHistoryMax bounds the revision-history annotation.
	deployRevisionHistoryMax = 2000

	deployReasonNewRSCreated   = "NewReplicaSetCreated"
	deployReasonFoundNewRS     = "FoundNewReplicaSet"
	deployReasonRSUpdated      = "ReplicaSetUpdated"
	deployReasonNewRSAvailable = "NewReplicaSetAvailable"
	deployReasonTimedOut       = "ProgressDeadlineExceeded"
	deployReasonRSCreateError  = "ReplicaSetCreateError"
	deployReasonPaused         = "DeploymentPaused"
	deployReasonResumed        = "DeploymentResumed"
	deployReasonMinAvailable   = "MinimumReplicasAvailable"
	deployReasonMinUnavailable = "MinimumReplicasUnavailable"
	deployNoProgressDeadline   = int32(1<<31 - 1)
)

// deployEqualIgnoreHash compares two pod templates but for their
// pod-template-hash label.
func deployEqualIgnoreHash(a, b *corev1.PodTemplateSpec) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	delete(a.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	delete(b.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	return equality.Semantic.DeepEqual(a, b)
}

func deployReplicas(rs *appsv1.ReplicaSet) int32 {
	if rs == nil || rs.Spec.Replicas == nil {
		return 0
	}
	return *rs.Spec.Replicas
}

// deployAvailable is how many of a ReplicaSet's available replicas a
// rolling update may count on: never more than its spec.replicas. Right
// after the Deployment scales a ReplicaSet down, its status still counts
// the surplus pods, either because the ReplicaSet controller has not
// synced the new size yet, or because it computes the status from the pods
// it listed before deleting the surplus (as Kubernetes' does). Counting
// them would let a second scale-down take away pods the first one already
// took, and the Deployment would fall below maxUnavailable.
func deployAvailable(rs *appsv1.ReplicaSet) int32 {
	return min(rs.Status.AvailableReplicas, deployReplicas(rs))
}

func deployWanted(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

func deploySumReplicas(rss []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		n += deployReplicas(rs)
	}
	return n
}

// deployByCreation orders ReplicaSets oldest first (by name among equals).
func deployByCreation(a, b *appsv1.ReplicaSet) int {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		if a.CreationTimestamp.Before(&b.CreationTimestamp) {
			return -1
		}
		return 1
	}
	return strings.Compare(a.Name, b.Name)
}

func deployAnnotationInt64(rs *appsv1.ReplicaSet, key string) (int64, bool) {
	v, ok := rs.Annotations[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

func deployAnnotationInt(rs *appsv1.ReplicaSet, key string) (int32, bool) {
	v, ok := rs.Annotations[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 32)
	return int32(n), err == nil
}

func deployMaxRevision(rss []*appsv1.ReplicaSet) int64 {
	var m int64
	for _, rs := range rss {
		if n, ok := deployAnnotationInt64(rs, deployRevisionAnnotation); ok && n > m {
			m = n
		}
	}
	return m
}

// deploySkipAnnotation: Deployment annotations not copied to its
// ReplicaSets.
func deploySkipAnnotation(k string) bool {
	switch k {
	case deployLastAppliedAnnotation, deployRevisionAnnotation, deployRevisionHistoryAnnotation,
		deployDesiredReplicasAnnotation, deployMaxReplicasAnnotation, deployRollbackToAnnotation:
		return true
	}
	return false
}

// deploySetNewRSAnnotations gives the new ReplicaSet the Deployment's
// annotations and the new revision (a ReplicaSet that becomes current
// again keeps its earlier revisions in revision-history); a ReplicaSet
// about to be created gets the replicas annotations too. It reports a
// change.
func deploySetNewRSAnnotations(d *appsv1.Deployment, rs *appsv1.ReplicaSet, newRevision string, exists bool) bool {
	changed := false
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	for k, v := range d.Annotations {
		if deploySkipAnnotation(k) {
			continue
		}
		if cur, ok := rs.Annotations[k]; !ok || cur != v {
			rs.Annotations[k] = v
			changed = true
		}
	}
	oldRevision, had := rs.Annotations[deployRevisionAnnotation]
	oldN, err := strconv.ParseInt(oldRevision, 10, 64)
	if had && err != nil {
		return changed // not a number: left alone
	}
	newN, _ := strconv.ParseInt(newRevision, 10, 64)
	if oldN < newN {
		rs.Annotations[deployRevisionAnnotation] = newRevision
		changed = true
		if had {
			hist := rs.Annotations[deployRevisionHistoryAnnotation]
			if hist == "" {
				hist = oldRevision
			} else {
				hist += "," + oldRevision
			}
			for len(hist) > deployRevisionHistoryMax {
				_, rest, ok := strings.Cut(hist, ",")
				if !ok {
					break
				}
				hist = rest
			}
			rs.Annotations[deployRevisionHistoryAnnotation] = hist
		}
	}
	if !exists && deploySetReplicasAnnotations(rs, deployWanted(d), deployWanted(d)+deployMaxSurge(d)) {
		changed = true
	}
	return changed
}

// deploySetReplicasAnnotations records the Deployment's replicas and
// replicas plus surge on a ReplicaSet it sizes; it reports a change.
func deploySetReplicasAnnotations(rs *appsv1.ReplicaSet, desired, maxReplicas int32) bool {
	d, m := strconv.Itoa(int(desired)), strconv.Itoa(int(maxReplicas))
	if rs.Annotations[deployDesiredReplicasAnnotation] == d && rs.Annotations[deployMaxReplicasAnnotation] == m {
		return false
	}
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	rs.Annotations[deployDesiredReplicasAnnotation] = d
	rs.Annotations[deployMaxReplicasAnnotation] = m
	return true
}

// deployResolveFenceposts turns maxSurge (rounded up) and maxUnavailable
// (rounded down) into numbers of pods for desired replicas; both zero
// would stall a rollout, so maxUnavailable becomes 1.
func deployResolveFenceposts(surge, unavailable *intstr.IntOrString, desired int32) (int32, int32) {
	zero := intstr.FromInt32(0)
	s, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(surge, zero), int(desired), true)
	if err != nil {
		s = 0
	}
	u, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(unavailable, zero), int(desired), false)
	if err != nil {
		u = 0
	}
	if s == 0 && u == 0 {
		u = 1
	}
	return int32(s), int32(u)
}

func deployRolling(d *appsv1.Deployment) bool {
	return d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType && d.Spec.Strategy.RollingUpdate != nil
}

func deployMaxSurge(d *appsv1.Deployment) int32 {
	if !deployRolling(d) {
		return 0
	}
	s, _ := deployResolveFenceposts(d.Spec.Strategy.RollingUpdate.MaxSurge, d.Spec.Strategy.RollingUpdate.MaxUnavailable, deployWanted(d))
	return s
}

func deployMaxUnavailable(d *appsv1.Deployment) int32 {
	want := deployWanted(d)
	if !deployRolling(d) || want == 0 {
		return 0
	}
	_, u := deployResolveFenceposts(d.Spec.Strategy.RollingUpdate.MaxSurge, d.Spec.Strategy.RollingUpdate.MaxUnavailable, want)
	return min(u, want)
}

// deployNewRSReplicas is the size the new ReplicaSet may grow to now:
// spec.replicas for Recreate; for RollingUpdate as far as the surge above
// spec.replicas allows.
func deployNewRSReplicas(d *appsv1.Deployment, oldRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) int32 {
	want := deployWanted(d)
	if !deployRolling(d) {
		return want
	}
	current := deploySumReplicas(oldRSs) + deployReplicas(newRS)
	maxTotal := want + deployMaxSurge(d)
	if current >= maxTotal {
		return deployReplicas(newRS)
	}
	up := min(maxTotal-current, want-deployReplicas(newRS))
	return deployReplicas(newRS) + max(up, 0)
}

// deploySaturated: the new ReplicaSet has all the Deployment's replicas,
// all available.
func deploySaturated(d *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	if rs == nil {
		return false
	}
	desired, ok := deployAnnotationInt(rs, deployDesiredReplicasAnnotation)
	want := deployWanted(d)
	return ok && desired == want && deployReplicas(rs) == want && rs.Status.AvailableReplicas == want
}

// deployComplete: every replica is updated and available, no old one is
// left, and the status is of the current generation.
func deployComplete(d *appsv1.Deployment, st *appsv1.DeploymentStatus) bool {
	want := deployWanted(d)
	return st.UpdatedReplicas == want && st.Replicas == want && st.AvailableReplicas == want &&
		st.ObservedGeneration >= d.Generation
}

// deployProgressing: more updated, fewer old, more ready or more available
// replicas than before.
func deployProgressing(old, st *appsv1.DeploymentStatus) bool {
	return st.UpdatedReplicas > old.UpdatedReplicas ||
		st.Replicas-st.UpdatedReplicas < old.Replicas-old.UpdatedReplicas ||
		st.ReadyReplicas > old.ReadyReplicas ||
		st.AvailableReplicas > old.AvailableReplicas
}

func deployHasProgressDeadline(d *appsv1.Deployment) bool {
	return d.Spec.ProgressDeadlineSeconds != nil && *d.Spec.ProgressDeadlineSeconds != deployNoProgressDeadline
}

// deployTimedOut: no progress was recorded for progressDeadlineSeconds.
func deployTimedOut(d *appsv1.Deployment, st *appsv1.DeploymentStatus, now time.Time) bool {
	if !deployHasProgressDeadline(d) {
		return false
	}
	c := deployCondition(*st, appsv1.DeploymentProgressing)
	if c == nil {
		return false
	}
	switch c.Reason {
	case deployReasonNewRSAvailable:
		return false
	case deployReasonTimedOut:
		return true
	}
	return c.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second).Before(now)
}

func deployCondition(st appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

func deployNewCondition(now time.Time, t appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason, msg string) appsv1.DeploymentCondition {
	ts := metav1.NewTime(now.UTC().Truncate(time.Second))
	return appsv1.DeploymentCondition{Type: t, Status: status, Reason: reason, Message: msg, LastUpdateTime: ts, LastTransitionTime: ts}
}

// deploySetCondition sets a condition: one of the same status and reason
// stands as it is; one of the same status keeps its transition time.
func deploySetCondition(st *appsv1.DeploymentStatus, c appsv1.DeploymentCondition) {
	if cur := deployCondition(*st, c.Type); cur != nil {
		if cur.Status == c.Status && cur.Reason == c.Reason {
			return
		}
		if cur.Status == c.Status {
			c.LastTransitionTime = cur.LastTransitionTime
		}
	}
	deployRemoveCondition(st, c.Type)
	st.Conditions = append(st.Conditions, c)
}

func deployRemoveCondition(st *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) {
	out := st.Conditions[:0:0]
	for _, c := range st.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	st.Conditions = out
}
