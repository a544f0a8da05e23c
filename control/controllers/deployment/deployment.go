// Package deployment is the Deployment controller.
package deployment

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/events"
	"github.com/isle-cluster/isle/control/registry"
)

// Controller rolls Deployments out through ReplicaSets, as
// Kubernetes' Deployment controller does for apps/v1: one ReplicaSet per
// pod template (named <deployment>-<pod-template-hash>), revisions in
// annotations, the RollingUpdate and Recreate strategies, pausing,
// revision history pruning, and the status and conditions that
// `kubectl rollout status` reads. The ReplicaSet controller runs the pods;
// this one only sizes the ReplicaSets and reads their status.
type Controller struct {
	store *registry.Store
	log   *slog.Logger
	// events records ScalingReplicaSet and ReplicaSetCreateError Events.
	events *events.Recorder
	// now is the clock of conditions and of the progress deadline.
	now func() time.Time
	// resync is how often every Deployment is looked at again.
	resync time.Duration
	// workers is how many Deployments are synced at once.
	workers int
	// synced, if set, is called after each sync with the Deployment's key
	// and the store revision when the sync began (for tests).
	synced func(key string, rev int64)

	dRes, rsRes, podRes *registry.Resource
	// deployments and replicaSets follow the watches of a Run.
	deployments *kit.Cache[*appsv1.Deployment]
	replicaSets *kit.Cache[*appsv1.ReplicaSet]
}

// New returns the Deployment controller, recording its Events with
// events.
func New(store *registry.Store, log *slog.Logger, events *events.Recorder) *Controller {
	return &Controller{store: store, log: log, events: events, now: time.Now, resync: deployResync, workers: 2}
}

// Name is the controller's name in the table.
func (c *Controller) Name() string { return "deployment" }

const (
	deployResync = 30 * time.Second
	// Retries of a failed sync back off from deployRetryMin to deployRetryMax.
	deployRetryMin = 50 * time.Millisecond
	deployRetryMax = 30 * time.Second
	// deployReasonScaling is the reason of the Events that report a
	// ReplicaSet scaled.
	deployReasonScaling = "ScalingReplicaSet"
)

// Run reconciles until ctx ends (when this member stops leading).
func (c *Controller) Run(ctx context.Context) {
	c.dRes = kit.MustLookup(c.store, appsv1.SchemeGroupVersion.WithResource("deployments"))
	c.rsRes = kit.MustLookup(c.store, appsv1.SchemeGroupVersion.WithResource("replicasets"))
	c.podRes = kit.MustLookup(c.store, corev1.SchemeGroupVersion.WithResource("pods"))
	c.deployments = kit.NewCache[*appsv1.Deployment]()
	c.replicaSets = kit.NewCache[*appsv1.ReplicaSet]()
	q := kit.NewQueue(deployRetryMin, deployRetryMax)
	loop := kit.Loop{Store: c.store, Log: c.log, Name: "deployment controller", ResyncEvery: c.resync, Resync: func() { c.resyncAll(q) }}
	// Pods matter only when they go (Recreate waits for the old ones).
	pods := kit.WatchOf(c.podRes, nil, func(typ watch.EventType, pod *corev1.Pod) { c.onPod(q, typ, pod) })
	pods.ChangesOnly = true
	var wg sync.WaitGroup
	wg.Go(func() {
		loop.Run(ctx,
			c.deployments.Watch(c.dRes, nil, func(typ watch.EventType, _, d *appsv1.Deployment) { c.onDeployment(q, typ, d) }),
			c.replicaSets.Watch(c.rsRes, nil, func(typ watch.EventType, _, rs *appsv1.ReplicaSet) { c.onReplicaSet(q, typ, rs) }),
			pods)
	})
	kit.RunWorkers(ctx, max(c.workers, 1), q, func(key string) { c.work(ctx, q, key) })
	wg.Wait()
}

// resyncAll queues every Deployment.
func (c *Controller) resyncAll(q *kit.Queue) {
	for _, key := range c.deployments.Keys() {
		q.Add(key)
	}
}

func deployKey(ns, name string) string { return ns + "/" + name }

func (c *Controller) onDeployment(q *kit.Queue, typ watch.EventType, d *appsv1.Deployment) {
	if typ == watch.Deleted {
		return // the garbage collector deletes its ReplicaSets
	}
	q.Add(deployKey(d.Namespace, d.Name))
}

// deployOwner returns the name of the Deployment that controls obj, if any.
func deployOwner(obj metav1.Object) (string, bool) {
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != "Deployment" {
		return "", false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != appsv1.GroupName {
		return "", false
	}
	return ref.Name, true
}

func (c *Controller) onReplicaSet(q *kit.Queue, typ watch.EventType, rs *appsv1.ReplicaSet) {
	if metav1.GetControllerOf(rs) != nil {
		if name, ok := deployOwner(rs); ok {
			q.Add(deployKey(rs.Namespace, name))
		}
		return
	}
	if typ == watch.Deleted || rs.DeletionTimestamp != nil {
		return
	}
	// An orphan: the Deployments that select it may adopt it.
	for _, d := range c.deployments.List(rs.Namespace) {
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err == nil && !sel.Empty() && sel.Matches(labels.Set(rs.Labels)) {
			q.Add(deployKey(d.Namespace, d.Name))
		}
	}
}

// onPod wakes a Recreate Deployment when a pod of one of its ReplicaSets
// goes: it waits for the old pods to be gone before it starts new ones.
func (c *Controller) onPod(q *kit.Queue, typ watch.EventType, pod *corev1.Pod) {
	if typ != watch.Deleted {
		return
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return
	}
	rs, ok := c.replicaSets.Get(pod.Namespace + "/" + ref.Name)
	if !ok {
		return
	}
	name, ok := deployOwner(rs)
	if !ok || rs.UID != ref.UID {
		return
	}
	if d, ok := c.deployments.Get(deployKey(pod.Namespace, name)); ok && d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		q.Add(deployKey(pod.Namespace, name))
	}
}

// work syncs one queued Deployment.
func (c *Controller) work(ctx context.Context, q *kit.Queue, key string) {
	rev := c.store.Revision()
	after, err := c.syncKey(ctx, key)
	switch {
	case ctx.Err() != nil:
	case err != nil:
		delay := q.Retry(key)
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || errors.Is(err, errDeployRetry) {
			c.log.Debug("deployment controller: sync; retrying", "deployment", key, "err", err, "after", delay)
		} else {
			c.log.Warn("deployment controller: sync failed; retrying", "deployment", key, "err", err, "after", delay)
		}
	default:
		q.Forget(key)
		if after > 0 {
			q.AddAfter(key, after)
		}
	}
	if c.synced != nil {
		c.synced(key, rev)
	}
}

func (c *Controller) syncKey(ctx context.Context, key string) (time.Duration, error) {
	ns, name, _ := strings.Cut(key, "/")
	obj, err := c.store.Get(ctx, c.dRes, ns, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return c.syncDeployment(ctx, obj.(*appsv1.Deployment))
}
