// Package quota is the ResourceQuota controller: it keeps each quota's
// status, the limits (status.hard) and what the namespace's objects use
// of them (status.used), which the quota admission charges new objects
// against.
package quota

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/registry"
)

// Controller recounts the quotas of a namespace when a quota changes or
// an object it counts (pods, services, claims, config maps, secrets,
// replication controllers) comes, changes or goes there, and every quota
// every resync (the count/ of other kinds, and creates that were charged
// but failed).
type Controller struct {
	store *registry.Store
	log   *slog.Logger
}

// New returns the quota controller.
func New(store *registry.Store, log *slog.Logger) *Controller {
	return &Controller{store: store, log: log}
}

// Name is the controller's name in the table.
func (c *Controller) Name() string { return "resourcequota" }

const (
	resync    = 30 * time.Second
	workers   = 2
	retryBase = 20 * time.Millisecond
	retryMax  = time.Minute
)

// counted are the kinds whose changes recount their namespace's quotas.
var counted = []string{"pods", "services", "persistentvolumeclaims", "configmaps", "secrets", "replicationcontrollers"}

type run struct {
	*Controller
	quotas *registry.Resource
	queue  *kit.Queue
}

// Run reconciles until ctx ends (when this member stops leading).
func (c *Controller) Run(ctx context.Context) {
	r := &run{Controller: c, quotas: kit.MustLookup(c.store, corev1.SchemeGroupVersion.WithResource("resourcequotas")),
		queue: kit.NewQueue(retryBase, retryMax)}
	var wg sync.WaitGroup
	wg.Go(func() { r.watch(ctx) })
	kit.RunWorkers(ctx, workers, r.queue, func(key string) { r.work(ctx, key) })
	wg.Wait()
}

func (r *run) watch(ctx context.Context) {
	quotas := kit.NewCache[*corev1.ResourceQuota]()
	queueAll := func() {
		for _, key := range quotas.Keys() {
			r.queue.Add(key)
		}
	}
	queueNamespace := func(ns string) {
		for _, q := range quotas.List(ns) {
			r.queue.Add(kit.Key(q))
		}
	}
	watches := []kit.Watch{quotas.Watch(r.quotas, nil, func(typ watch.EventType, _, q *corev1.ResourceQuota) {
		if typ != watch.Deleted {
			r.queue.Add(kit.Key(q))
		}
		queueNamespace(q.Namespace) // the count of quotas
	})}
	// Changes only, and no cache: a change says which namespace to recount.
	for _, res := range counted {
		watches = append(watches, kit.Watch{Res: kit.MustLookup(r.store, corev1.SchemeGroupVersion.WithResource(res)), ChangesOnly: true,
			Opened: queueAll, Handle: func(ev registry.WatchEvent) {
				if m, ok := ev.Object.(metav1.Object); ok && ev.Type != watch.Bookmark && ev.Type != watch.Error {
					queueNamespace(m.GetNamespace())
				}
			}})
	}
	loop := kit.Loop{Store: r.store, Log: r.log, Name: "quota controller", Resync: queueAll, ResyncEvery: resync}
	loop.Run(ctx, watches...)
}

func (r *run) work(ctx context.Context, key string) {
	if err := r.sync(ctx, key); err != nil && ctx.Err() == nil {
		r.log.Warn("quota controller: recount failed; will retry", "resourcequota", key, "err", err)
		r.queue.Retry(key)
		return
	}
	r.queue.Forget(key)
}

var errUnchanged = errors.New("quota controller: status unchanged")

// sync recounts one quota and writes its status if it changed.
func (r *run) sync(ctx context.Context, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	_, err := r.store.Mutate(ctx, r.quotas, ns, name, "status", func(obj runtime.Object) error {
		q := obj.(*corev1.ResourceQuota)
		if q.DeletionTimestamp != nil {
			return errUnchanged
		}
		used, err := registry.CountQuota(ctx, r.store, q)
		if err != nil {
			return err
		}
		st := corev1.ResourceQuotaStatus{Hard: q.Spec.Hard.DeepCopy(), Used: used}
		if equality.Semantic.DeepEqual(st, q.Status) {
			return errUnchanged
		}
		q.Status = st
		return nil
	})
	if errors.Is(err, errUnchanged) || apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
