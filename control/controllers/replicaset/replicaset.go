// Package replicaset is the ReplicaSet controller, which is also the
// ReplicationController controller (as upstream's, which converts).
package replicaset

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/events"
	"github.com/isle-cluster/isle/control/registry"
)

// Controller keeps the pods of every apps/v1 ReplicaSet at its replica
// count, as Kubernetes' ReplicaSet controller:
//   - the pods of a ReplicaSet are the active pods (not terminating, not
//     Succeeded or Failed) of its namespace that it controls; matching
//     orphans are adopted, and owned pods that no longer match its selector
//     are released; pods controlled by anything else are left alone;
//   - missing pods are created from the template in slow-start batches
//     (1, 2, 4, …), stopping at the first error; surplus pods are deleted,
//     the least useful first (see kit.DeleteFirst);
//   - the status (replicas, fullyLabeledReplicas, readyReplicas,
//     availableReplicas, terminatingReplicas, observedGeneration and the
//     ReplicaFailure condition) is written through the status subresource,
//     only when it changes;
//   - a ReplicaSet being deleted is left to the garbage collector.
//
// It watches ReplicaSets and pods and reconciles ReplicaSets from a work
// queue (one worker per key at a time), every ReplicaSet again every
// rsResync. The controller of ReplicationControllers
// (NewReplicationControllers) is the same on a ReplicaSet view of each
// (setKind).
type Controller struct {
	store *registry.Store
	log   *slog.Logger
	kind  *setKind
	// events records SuccessfulCreate, FailedCreate, SuccessfulDelete and
	// FailedDelete Events about the ReplicaSets.
	events *events.Recorder
	// now is the clock of availableReplicas (pods ready for minReadySeconds)
	// and of condition timestamps. Nil means time.Now.
	now func() time.Time
}

// New returns the ReplicaSet controller, recording its Events with rec.
func New(store *registry.Store, log *slog.Logger, rec *events.Recorder) *Controller {
	return &Controller{store: store, log: log, events: rec, kind: replicaSets}
}

// NewReplicationControllers returns the ReplicationController controller,
// recording its Events with rec.
func NewReplicationControllers(store *registry.Store, log *slog.Logger, rec *events.Recorder) *Controller {
	return &Controller{store: store, log: log, events: rec, kind: replicationControllers}
}

// Name is the controller's name in the table.
func (c *Controller) Name() string { return c.kind.name }

// setKind is a kind of replicated pods this controller keeps: its objects
// seen as ReplicaSets.
type setKind struct {
	name string // "replicaset"
	gvk  schema.GroupVersionKind
	gvr  schema.GroupVersionResource
	// view is an object of the kind as a ReplicaSet with its metadata;
	// nil for an object of another type.
	view func(runtime.Object) *appsv1.ReplicaSet
	// setStatus sets an object's status from a ReplicaSet status.
	setStatus func(runtime.Object, appsv1.ReplicaSetStatus)
}

var replicaSets = &setKind{name: "replicaset", gvk: appsv1.SchemeGroupVersion.WithKind("ReplicaSet"),
	gvr: appsv1.SchemeGroupVersion.WithResource("replicasets"),
	view: func(obj runtime.Object) *appsv1.ReplicaSet {
		rs, _ := obj.(*appsv1.ReplicaSet)
		return rs
	},
	setStatus: func(obj runtime.Object, st appsv1.ReplicaSetStatus) { obj.(*appsv1.ReplicaSet).Status = st }}

var replicationControllers = &setKind{name: "replicationcontroller", gvk: corev1.SchemeGroupVersion.WithKind("ReplicationController"),
	gvr: corev1.SchemeGroupVersion.WithResource("replicationcontrollers"),
	view: func(obj runtime.Object) *appsv1.ReplicaSet {
		rc, ok := obj.(*corev1.ReplicationController)
		if !ok {
			return nil
		}
		rs := &appsv1.ReplicaSet{ObjectMeta: rc.ObjectMeta, Spec: appsv1.ReplicaSetSpec{Replicas: rc.Spec.Replicas,
			MinReadySeconds: rc.Spec.MinReadySeconds, Selector: &metav1.LabelSelector{MatchLabels: rc.Spec.Selector}},
			Status: appsv1.ReplicaSetStatus{Replicas: rc.Status.Replicas, FullyLabeledReplicas: rc.Status.FullyLabeledReplicas,
				ReadyReplicas: rc.Status.ReadyReplicas, AvailableReplicas: rc.Status.AvailableReplicas, ObservedGeneration: rc.Status.ObservedGeneration}}
		if rc.Spec.Template != nil {
			rs.Spec.Template = *rc.Spec.Template
		}
		for _, c := range rc.Status.Conditions {
			rs.Status.Conditions = append(rs.Status.Conditions, appsv1.ReplicaSetCondition{Type: appsv1.ReplicaSetConditionType(c.Type),
				Status: c.Status, LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message})
		}
		return rs
	},
	setStatus: func(obj runtime.Object, st appsv1.ReplicaSetStatus) {
		rc := obj.(*corev1.ReplicationController)
		rc.Status = corev1.ReplicationControllerStatus{Replicas: st.Replicas, FullyLabeledReplicas: st.FullyLabeledReplicas,
			ReadyReplicas: st.ReadyReplicas, AvailableReplicas: st.AvailableReplicas, ObservedGeneration: st.ObservedGeneration}
		for _, c := range st.Conditions {
			rc.Status.Conditions = append(rc.Status.Conditions, corev1.ReplicationControllerCondition{Type: corev1.ReplicationControllerConditionType(c.Type),
				Status: c.Status, LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message})
		}
	}}

// controllerUID is the UID of the object of this kind controlling a pod,
// if any.
func (k *setKind) controllerUID(pod metav1.Object) types.UID {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != k.gvk.Kind {
		return ""
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != k.gvk.Group {
		return ""
	}
	return ref.UID
}

const (
	// rsResync is how often every ReplicaSet is reconciled again.
	rsResync = 30 * time.Second
	// rsWorkers reconcile different ReplicaSets at once.
	rsWorkers = 4
	// rsBurst caps the pods created or deleted in one reconcile, as
	// Kubernetes' burstReplicas.
	rsBurst = 500
	// rsRetryBase and rsRetryMax bound the backoff of a failed reconcile.
	rsRetryBase = 20 * time.Millisecond
	rsRetryMax  = time.Minute
)

// rsRun is the state of one Run (one term of leadership).
type rsRun struct {
	*Controller
	now   func() time.Time
	rsRes *registry.Resource
	pods  *registry.Resource
	queue *kit.Queue
	// podMeta is the metadata of every pod, kept by the watch.
	podMeta *kit.Cache[*metav1.PartialObjectMetadata]
}

// Run reconciles until ctx ends (when this member stops leading).
func (c *Controller) Run(ctx context.Context) {
	r := &rsRun{Controller: c, now: c.now,
		rsRes:   kit.MustLookup(c.store, c.kind.gvr),
		pods:    kit.MustLookup(c.store, corev1.SchemeGroupVersion.WithResource("pods")),
		queue:   kit.NewQueue(rsRetryBase, rsRetryMax),
		podMeta: kit.NewMetaCache()}
	if r.now == nil {
		r.now = time.Now
	}
	var wg sync.WaitGroup
	wg.Go(func() { r.watch(ctx) })
	kit.RunWorkers(ctx, rsWorkers, r.queue, func(key string) { r.work(ctx, key) })
	wg.Wait()
}

// watch follows ReplicaSets and pods and queues the ReplicaSets they
// concern, until ctx ends. A watch that ends is opened again; its first
// events are then the current objects.
func (r *rsRun) watch(ctx context.Context) {
	sets := kit.NewCache[*appsv1.ReplicaSet]()
	pods := r.podMeta
	queueAll := func() {
		for _, key := range sets.Keys() {
			r.queue.Add(key)
		}
	}
	queueUID := func(uid types.UID) {
		if key, ok := sets.KeyOfUID(uid); ok {
			r.queue.Add(key)
		}
	}
	view := func(obj runtime.Object) (*appsv1.ReplicaSet, bool) {
		rs := r.kind.view(obj)
		return rs, rs != nil
	}
	loop := kit.Loop{Store: r.store, Log: r.log, Name: r.kind.name + " controller", Resync: queueAll, ResyncEvery: rsResync}
	loop.Run(ctx,
		sets.WatchAs(r.rsRes, view, nil, func(typ watch.EventType, _, rs *appsv1.ReplicaSet) {
			if typ != watch.Deleted {
				r.queue.Add(kit.Key(rs))
			}
		}),
		// Pods deleted while the watch was away are noticed by a reconcile
		// of every ReplicaSet.
		kit.WatchMeta(pods, r.pods, queueAll, func(typ watch.EventType, old, pod *metav1.PartialObjectMetadata) {
			// A ReplicaSet that controlled the pod before this change hears
			// of it (its pod was taken, or released by someone else).
			cur := r.kind.controllerUID(pod)
			if old != nil {
				if prev := r.kind.controllerUID(old); prev != "" && prev != cur {
					queueUID(prev)
				}
			}
			switch {
			case cur != "":
				queueUID(cur)
			case metav1.GetControllerOf(pod) == nil && typ != watch.Deleted:
				// An orphan: every ReplicaSet it matches may adopt it.
				set := labels.Set(pod.Labels)
				for _, rs := range sets.List(pod.Namespace) {
					if sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector); err == nil && sel.Matches(set) {
						r.queue.Add(kit.Key(rs))
					}
				}
			}
		}))
}

// work reconciles one queued ReplicaSet.
func (r *rsRun) work(ctx context.Context, key string) {
	if err := r.sync(ctx, key); err != nil && ctx.Err() == nil {
		r.log.Warn(r.kind.name+" controller: reconcile failed; will retry", r.kind.name, key, "err", err)
		r.queue.Retry(key)
	} else {
		r.queue.Forget(key)
	}
}

// sync reconciles one ReplicaSet.
func (r *rsRun) sync(ctx context.Context, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	obj, err := r.store.Get(ctx, r.rsRes, ns, name, metav1.GetOptions{ResourceVersion: "0"})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	rs := r.kind.view(obj)
	if rs.DeletionTimestamp != nil {
		return nil // the garbage collector deals with its pods
	}
	selector, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil {
		r.log.Warn(r.kind.name+" controller: invalid selector", r.kind.name, key, "err", err)
		return nil
	}
	// The local copy is fresh enough: this member's own writes are applied
	// here before they return, and other writes arrive as watch events,
	// which queue this ReplicaSet again.
	// The pods its selector matches (decoded, of the thousands a
	// namespace may hold, alone) and those it controls that no longer
	// match, which it releases (found by the watch's metadata).
	list, err := r.store.List(ctx, r.pods, ns, metav1.ListOptions{ResourceVersion: "0", LabelSelector: selector.String()})
	if err != nil {
		return err
	}
	candidates := list.(*corev1.PodList).Items
	for _, m := range r.podMeta.Controlled(rs.UID) {
		if m.Namespace != ns || selector.Matches(labels.Set(m.Labels)) {
			continue
		}
		obj, err := r.store.Get(ctx, r.pods, ns, m.Name, metav1.GetOptions{ResourceVersion: "0"})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		candidates = append(candidates, *obj.(*corev1.Pod))
	}
	var active []*corev1.Pod
	terminating := int32(0)
	for i := range candidates {
		pod := &candidates[i]
		if kit.PodFinished(pod) {
			continue
		}
		if pod.DeletionTimestamp != nil {
			if r.kind.controllerUID(pod) == rs.UID && selector.Matches(labels.Set(pod.Labels)) {
				terminating++
			}
			continue
		}
		active = append(active, pod)
	}
	owned, err := kit.ClaimPods(ctx, r.store, r.pods, rs, r.kind.gvk, selector, active, "")
	if err != nil {
		return err
	}
	manageErr := r.manage(ctx, obj, rs, owned)
	status, recheck := r.status(rs, owned, terminating, manageErr)
	if err := r.writeStatus(ctx, rs, status); err != nil {
		return err
	}
	if recheck > 0 {
		r.queue.AddAfter(key, recheck)
	}
	return manageErr
}

// errRSSkip aborts a status write for a ReplicaSet replaced meanwhile.
var errRSSkip = errors.New("replicaset controller: pod changed; skipped")

// manage creates or deletes pods to bring rs (the view of obj) to its
// replica count.
func (r *rsRun) manage(ctx context.Context, obj runtime.Object, rs *appsv1.ReplicaSet, owned []*corev1.Pod) error {
	diff := len(owned) - rsWant(rs)
	switch {
	case diff < 0:
		n := min(-diff, rsBurst)
		created, err := kit.SlowStart(n, func() error { return r.createPod(ctx, obj, rs) })
		if created > 0 {
			r.log.Info(r.kind.name+" controller: created pods", r.kind.name, rs.Namespace+"/"+rs.Name, "count", created)
		}
		return err
	case diff > 0:
		victims := rsVictims(owned, min(diff, rsBurst))
		errs := make([]error, len(victims))
		var wg sync.WaitGroup
		for i, pod := range victims {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = r.deletePod(ctx, obj, pod)
			}()
		}
		wg.Wait()
		deleted := 0
		for _, err := range errs {
			if err == nil {
				deleted++
			}
		}
		if deleted > 0 {
			r.log.Info(r.kind.name+" controller: deleted pods", r.kind.name, rs.Namespace+"/"+rs.Name, "count", deleted)
		}
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// rsWant is the replica count rs asks for.
func rsWant(rs *appsv1.ReplicaSet) int {
	if rs.Spec.Replicas == nil {
		return 1
	}
	return int(*rs.Spec.Replicas)
}

// createPod creates one pod from the template of rs, the view of obj.
func (r *rsRun) createPod(ctx context.Context, obj runtime.Object, rs *appsv1.ReplicaSet) error {
	t := &rs.Spec.Template
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    rs.Name + "-",
			Namespace:       rs.Namespace,
			Labels:          maps.Clone(t.Labels),
			Annotations:     maps.Clone(t.Annotations),
			Finalizers:      slices.Clone(t.Finalizers),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, r.kind.gvk)},
		},
		Spec: *t.Spec.DeepCopy(),
	}
	if len(pod.Labels) == 0 {
		return errors.New("unable to create pods, no labels")
	}
	out, err := r.store.Create(ctx, r.pods, rs.Namespace, pod, registry.WriteOptions{})
	switch {
	case err == nil:
		r.events.Eventf(obj, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: %v", out.(*corev1.Pod).Name)
	case kit.NamespaceTerminating(err):
		return nil // the namespace controller is deleting the ReplicaSet too
	default:
		r.events.Eventf(obj, corev1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
	}
	return err
}

// deletePod deletes a surplus pod of obj; one already gone is not an
// error.
func (r *rsRun) deletePod(ctx context.Context, obj runtime.Object, pod *corev1.Pod) error {
	uid := pod.UID
	_, _, err := r.store.Delete(ctx, r.pods, pod.Namespace, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case err == nil:
		r.events.Eventf(obj, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %v", pod.Name)
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return nil
	default:
		r.events.Eventf(obj, corev1.EventTypeWarning, "FailedDelete", "Error deleting: %v", err)
	}
	return err
}

// rsVictims returns the n pods to delete first.
func rsVictims(pods []*corev1.Pod, n int) []*corev1.Pod {
	if n >= len(pods) {
		return pods
	}
	// Pods sharing a node with more of the set's pods go first (Kubernetes
	// ranks by all related pods; isle by the ReplicaSet's own).
	perNode := map[string]int{}
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			perNode[p.Spec.NodeName]++
		}
	}
	ranked := slices.Clone(pods)
	slices.SortStableFunc(ranked, func(a, b *corev1.Pod) int {
		return kit.DeleteFirst(a, b, perNode[a.Spec.NodeName], perNode[b.Spec.NodeName])
	})
	return ranked[:n]
}

// status computes rs's status from its active pods and the outcome of
// manage, and how long until a ready pod becomes available (0: none
// pending).
func (r *rsRun) status(rs *appsv1.ReplicaSet, owned []*corev1.Pod, terminating int32, manageErr error) (appsv1.ReplicaSetStatus, time.Duration) {
	st := *rs.Status.DeepCopy()
	now := r.now()
	minReady := time.Duration(rs.Spec.MinReadySeconds) * time.Second
	template := labels.SelectorFromSet(rs.Spec.Template.Labels)
	var fully, ready, available int32
	var recheck time.Duration
	for _, pod := range owned {
		if template.Matches(labels.Set(pod.Labels)) {
			fully++
		}
		if !kit.PodReady(pod) {
			continue
		}
		ready++
		since := kit.ReadySince(pod)
		switch {
		case minReady == 0:
			available++
		case since.IsZero():
		case since.Add(minReady).Before(now):
			available++
		default:
			if d := since.Add(minReady).Sub(now) + 100*time.Millisecond; recheck == 0 || d < recheck {
				recheck = d
			}
		}
	}
	failure := -1
	for i, c := range st.Conditions {
		if c.Type == appsv1.ReplicaSetReplicaFailure {
			failure = i
		}
	}
	switch {
	case manageErr != nil && failure < 0:
		reason := "FailedCreate"
		if len(owned) > rsWant(rs) {
			reason = "FailedDelete"
		}
		st.Conditions = append(st.Conditions, appsv1.ReplicaSetCondition{Type: appsv1.ReplicaSetReplicaFailure,
			Status: corev1.ConditionTrue, Reason: reason, Message: manageErr.Error(),
			LastTransitionTime: metav1.NewTime(now.UTC().Truncate(time.Second))})
	case manageErr == nil && failure >= 0:
		st.Conditions = slices.Delete(st.Conditions, failure, failure+1)
		if len(st.Conditions) == 0 {
			st.Conditions = nil
		}
	}
	st.Replicas = int32(len(owned))
	st.FullyLabeledReplicas = fully
	st.ReadyReplicas = ready
	st.AvailableReplicas = available
	st.TerminatingReplicas = &terminating
	st.ObservedGeneration = rs.Generation
	return st, recheck
}

// writeStatus writes rs's status if it changed.
func (r *rsRun) writeStatus(ctx context.Context, rs *appsv1.ReplicaSet, st appsv1.ReplicaSetStatus) error {
	if equality.Semantic.DeepEqual(rs.Status, st) {
		return nil
	}
	_, err := r.store.Mutate(ctx, r.rsRes, rs.Namespace, rs.Name, "status", func(obj runtime.Object) error {
		if r.kind.view(obj).UID != rs.UID {
			return errRSSkip
		}
		r.kind.setStatus(obj, st)
		return nil
	})
	if errors.Is(err, errRSSkip) || apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
