// Package namespace is the namespace controller.
package namespace

import (
	"context"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/registry"
)

// Controller gives every namespace its default ServiceAccount, and empties
// a deleted namespace before it lets it go: every object inside is deleted
// (background propagation), then the namespace's "kubernetes" finalizer is
// removed, which removes the namespace.
type Controller struct {
	store *registry.Store
	log   *slog.Logger
}

// New returns the namespace controller.
func New(store *registry.Store, log *slog.Logger) *Controller {
	return &Controller{store: store, log: log}
}

// Name is the controller's name in the table.
func (c *Controller) Name() string { return "namespace" }

// retryEvery is how often a terminating namespace is looked at again while
// objects in it are still going (pods finishing on their nodes, say).
const retryEvery = 2 * time.Second

// Run reconciles until ctx ends (when this member stops leading).
func (c *Controller) Run(ctx context.Context) {
	namespaces := kit.NewCache[*corev1.Namespace]()
	loop := kit.Loop{Store: c.store, Log: c.log, Name: "namespace controller", ResyncEvery: retryEvery, Resync: func() {
		for _, ns := range namespaces.List("") {
			if ns.DeletionTimestamp != nil {
				c.finalize(ctx, ns.Name)
			}
		}
	}}
	loop.Run(ctx, namespaces.Watch(kit.MustLookup(c.store, corev1.SchemeGroupVersion.WithResource("namespaces")), nil,
		func(typ watch.EventType, _, ns *corev1.Namespace) {
			switch {
			case typ == watch.Deleted:
			case ns.DeletionTimestamp != nil:
				c.finalize(ctx, ns.Name)
			default:
				c.ensureServiceAccount(ctx, ns.Name)
			}
		}))
}

// finalize deletes what is left in a terminating namespace and, once it is
// empty, removes the namespace's finalizer.
func (c *Controller) finalize(ctx context.Context, name string) {
	remaining := 0
	for _, r := range c.store.Resources().All() {
		if !r.Namespaced || r.StorageVersion != "" {
			continue
		}
		if c.store.Count(r, name) == 0 {
			continue
		}
		bg := metav1.DeletePropagationBackground
		if _, err := c.store.DeleteCollection(ctx, r, name, metav1.ListOptions{ResourceVersion: "0"},
			metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
			c.log.Warn("namespace controller: delete contents", "namespace", name, "resource", r.String(), "err", err)
		}
		remaining += c.store.Count(r, name)
	}
	if remaining > 0 {
		return
	}
	nsRes := kit.MustLookup(c.store, corev1.SchemeGroupVersion.WithResource("namespaces"))
	_, err := c.store.Mutate(ctx, nsRes, "", name, "", func(obj runtime.Object) error {
		ns := obj.(*corev1.Namespace)
		ns.Spec.Finalizers = slices.DeleteFunc(ns.Spec.Finalizers, func(f corev1.FinalizerName) bool { return f == registry.FinalizerNamespace })
		return nil
	})
	if err != nil && !apierrors.IsNotFound(err) {
		c.log.Warn("namespace controller: finalize", "namespace", name, "err", err)
		return
	}
	c.log.Info("namespace controller: namespace emptied and removed", "namespace", name)
}

// ensureServiceAccount creates the namespace's default ServiceAccount.
func (c *Controller) ensureServiceAccount(ctx context.Context, ns string) {
	saRes := kit.MustLookup(c.store, corev1.SchemeGroupVersion.WithResource("serviceaccounts"))
	if _, err := c.store.Get(ctx, saRes, ns, "default", metav1.GetOptions{ResourceVersion: "0"}); err == nil {
		return
	}
	_, err := c.store.Create(ctx, saRes, ns, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}, registry.WriteOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		c.log.Warn("namespace controller: default service account", "namespace", ns, "err", err)
	}
}
