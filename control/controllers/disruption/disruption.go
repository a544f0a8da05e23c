// Package disruption is the PodDisruptionBudget controller: it keeps the
// status the eviction API decides by.
package disruption

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/events"
	"github.com/isle-cluster/isle/control/registry"
)

// Controller keeps the status of every policy/v1 PodDisruptionBudget, as
// upstream's disruption controller:
//   - expectedPods: the pods its selector matches, or, for maxUnavailable
//     or a percentage of minAvailable, the replicas their controllers ask
//     for (a ReplicaSet's Deployment, a ReplicaSet, StatefulSet,
//     ReplicationController or any kind with a scale subresource);
//   - desiredHealthy from minAvailable or maxUnavailable (percentages
//     rounded up), currentHealthy the Ready pods not being deleted nor
//     just evicted (disruptedPods, kept two minutes), disruptionsAllowed
//     the difference, and the DisruptionAllowed condition;
//   - a budget it cannot compute (pods without a controller under a
//     percentage) allows nothing.
type Controller struct {
	store  *registry.Store
	log    *slog.Logger
	events *events.Recorder
	now    func() time.Time
}

// New returns the disruption controller, recording its Events with rec.
func New(store *registry.Store, log *slog.Logger, rec *events.Recorder) *Controller {
	return &Controller{store: store, log: log, events: rec}
}

// Name is the controller's name in the table.
func (c *Controller) Name() string { return "disruption" }

const (
	resync    = 30 * time.Second
	workers   = 2
	retryBase = 20 * time.Millisecond
	retryMax  = time.Minute
	// disruptedTimeout is how long an evicted pod counts as disrupted
	// when it is not deleted (upstream's DeletionTimeout).
	disruptedTimeout = 2 * time.Minute
)

type run struct {
	*Controller
	now        func() time.Time
	pdbs, pods *registry.Resource
	queue      *kit.Queue
}

// Run reconciles until ctx ends (when this member stops leading).
func (c *Controller) Run(ctx context.Context) {
	r := &run{Controller: c, now: c.now,
		pdbs:  kit.MustLookup(c.store, policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets")),
		pods:  kit.MustLookup(c.store, corev1.SchemeGroupVersion.WithResource("pods")),
		queue: kit.NewQueue(retryBase, retryMax)}
	if r.now == nil {
		r.now = time.Now
	}
	var wg sync.WaitGroup
	wg.Go(func() { r.watch(ctx) })
	kit.RunWorkers(ctx, workers, r.queue, func(key string) { r.work(ctx, key) })
	wg.Wait()
}

// watch queues the budgets whose selectors match a changed pod.
func (r *run) watch(ctx context.Context) {
	pdbs := kit.NewCache[*policyv1.PodDisruptionBudget]()
	pods := kit.NewMetaCache()
	queueAll := func() {
		for _, key := range pdbs.Keys() {
			r.queue.Add(key)
		}
	}
	loop := kit.Loop{Store: r.store, Log: r.log, Name: "disruption controller", Resync: queueAll, ResyncEvery: resync}
	loop.Run(ctx,
		pdbs.Watch(r.pdbs, nil, func(typ watch.EventType, _, p *policyv1.PodDisruptionBudget) {
			if typ != watch.Deleted {
				r.queue.Add(kit.Key(p))
			}
		}),
		kit.WatchMeta(pods, r.pods, queueAll, func(_ watch.EventType, old, pod *metav1.PartialObjectMetadata) {
			for _, p := range pdbs.List(pod.Namespace) {
				sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
				if err == nil && (sel.Matches(labels.Set(pod.Labels)) || old != nil && sel.Matches(labels.Set(old.Labels))) {
					r.queue.Add(kit.Key(p))
				}
			}
		}))
}

func (r *run) work(ctx context.Context, key string) {
	next, err := r.sync(ctx, key)
	if err != nil && ctx.Err() == nil {
		r.log.Warn("disruption controller: reconcile failed; will retry", "poddisruptionbudget", key, "err", err)
		r.queue.Retry(key)
		return
	}
	r.queue.Forget(key)
	if next > 0 {
		r.queue.AddAfter(key, next)
	}
}

var errSkip = errors.New("disruption controller: budget changed; skipped")

// sync computes one budget's status; it returns when an evicted pod's
// mark expires.
func (r *run) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name, _ := strings.Cut(key, "/")
	obj, err := r.store.Get(ctx, r.pdbs, ns, name, metav1.GetOptions{ResourceVersion: "0"})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	pdb := obj.(*policyv1.PodDisruptionBudget)
	if pdb.DeletionTimestamp != nil {
		return 0, nil
	}
	var pods []*corev1.Pod
	if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err == nil && pdb.Spec.Selector != nil {
		list, err := r.store.List(ctx, r.pods, ns, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return 0, err
		}
		for i := range list.(*corev1.PodList).Items {
			if p := &list.(*corev1.PodList).Items[i]; sel.Matches(labels.Set(p.Labels)) {
				pods = append(pods, p)
			}
		}
	}
	now := r.now()
	st := pdb.Status.DeepCopy()
	st.ObservedGeneration = pdb.Generation
	var next time.Duration
	disrupted := map[string]metav1.Time{}
	live := map[string]bool{}
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			live[p.Name] = true
		}
	}
	for n, at := range st.DisruptedPods {
		if left := at.Add(disruptedTimeout).Sub(now); live[n] && left > 0 {
			disrupted[n] = at
			if next == 0 || left < next {
				next = left
			}
		}
	}
	if len(disrupted) == 0 {
		disrupted = nil
	}
	st.DisruptedPods = disrupted
	expected, desired, err := r.budget(ctx, pdb, pods)
	healthy := int32(0)
	for _, p := range pods {
		if _, d := disrupted[p.Name]; !d && p.DeletionTimestamp == nil && kit.PodReady(p) {
			healthy++
		}
	}
	st.CurrentHealthy, st.DesiredHealthy, st.ExpectedPods = healthy, desired, expected
	st.DisruptionsAllowed = max(healthy-desired, 0)
	cond := metav1.Condition{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionTrue, Reason: policyv1.SufficientPodsReason,
		ObservedGeneration: pdb.Generation}
	switch {
	case err != nil:
		st.DisruptionsAllowed = 0
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, policyv1.SyncFailedReason, err.Error()
		r.events.Eventf(pdb, corev1.EventTypeWarning, "CalculateExpectedPodCountFailed", "Failed to calculate the number of expected pods: %v", err)
	case st.DisruptionsAllowed == 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, policyv1.InsufficientPodsReason
	}
	meta.SetStatusCondition(&st.Conditions, cond)
	if equality.Semantic.DeepEqual(&pdb.Status, st) {
		return next, nil
	}
	_, werr := r.store.Mutate(ctx, r.pdbs, ns, name, "status", func(obj runtime.Object) error {
		cur := obj.(*policyv1.PodDisruptionBudget)
		if cur.UID != pdb.UID || cur.ResourceVersion != pdb.ResourceVersion {
			return errSkip // an eviction wrote meanwhile: its event brings it back
		}
		cur.Status = *st
		return nil
	})
	if errors.Is(werr, errSkip) || apierrors.IsNotFound(werr) {
		return next, nil
	}
	return next, werr
}

// budget returns the pods the budget expects and how many must be
// healthy.
func (r *run) budget(ctx context.Context, pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod) (expected, desired int32, err error) {
	min, maxU := pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable
	if maxU == nil && (min == nil || min.Type == intstr.Int) {
		if min != nil {
			desired = min.IntVal
		}
		return int32(len(pods)), desired, nil
	}
	if expected, err = r.scaleOf(ctx, pods); err != nil {
		return 0, 0, err
	}
	if maxU != nil {
		n, err := intstr.GetScaledValueFromIntOrPercent(maxU, int(expected), true)
		if err != nil {
			return expected, 0, err
		}
		return expected, max(expected-int32(n), 0), nil
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(min, int(expected), true)
	if err != nil {
		return expected, 0, err
	}
	return expected, int32(n), nil
}

// scaleOf is the sum of the replicas the pods' controllers ask for, each
// controller once.
func (r *run) scaleOf(ctx context.Context, pods []*corev1.Pod) (int32, error) {
	seen := map[types.UID]bool{}
	total := int32(0)
	for _, p := range pods {
		ref := metav1.GetControllerOf(p)
		if ref == nil {
			return 0, fmt.Errorf("found no controller ref for pod %q", p.Name)
		}
		ctl, err := r.controller(ctx, p.Namespace, ref)
		if err != nil {
			return 0, err
		}
		// A Deployment's ReplicaSets: the Deployment's replicas.
		if rsRef := metav1.GetControllerOf(ctl.meta); rsRef != nil && rsRef.Kind == "Deployment" && ref.Kind == "ReplicaSet" {
			if ctl, err = r.controller(ctx, p.Namespace, rsRef); err != nil {
				return 0, err
			}
		}
		if seen[ctl.meta.GetUID()] {
			continue
		}
		seen[ctl.meta.GetUID()] = true
		total += ctl.replicas
	}
	return total, nil
}

type controllerScale struct {
	meta     metav1.Object
	replicas int32
}

// controller reads the object ref names and its desired replicas.
func (r *run) controller(ctx context.Context, ns string, ref *metav1.OwnerReference) (controllerScale, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return controllerScale{}, err
	}
	res, ok := r.store.Resources().ForKind(gv.WithKind(ref.Kind))
	if !ok || res.Scale == nil {
		return controllerScale{}, fmt.Errorf("%s %s/%s has no scale subresource", ref.Kind, ns, ref.Name)
	}
	obj, err := r.store.Get(ctx, res, ns, ref.Name, metav1.GetOptions{ResourceVersion: "0"})
	if err != nil {
		return controllerScale{}, err
	}
	m, _ := meta.Accessor(obj)
	if m.GetUID() != ref.UID {
		return controllerScale{}, fmt.Errorf("%s %s/%s is not the pods' controller", ref.Kind, ns, ref.Name)
	}
	spec, _, _ := res.Scale.Replicas(obj)
	return controllerScale{meta: m, replicas: spec}, nil
}
