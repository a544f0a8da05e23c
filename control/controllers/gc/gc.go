// Package gc is the garbage collector.
package gc

import (
	"context"
	"log/slog"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/registry"
)

// Controller follows ownerReferences, as Kubernetes' garbage collector:
//   - an object all of whose owners are gone is deleted (background);
//   - an owner deleted with propagation Foreground ("foregroundDeletion"
//     finalizer) deletes its dependents (those another owner keeps only lose
//     their reference to it) and loses that finalizer once those whose
//     references block it (blockOwnerDeletion) are gone; a circle of such
//     owners is broken as upstream's collector breaks it;
//   - an owner deleted with propagation Orphan ("orphan" finalizer) has its
//     references removed from its dependents, then loses the finalizer.
//
// It sweeps the whole store after deletions (debounced) and every minute:
// isle's stores are small, and a sweep costs no writes unless it acts.
type Controller struct {
	store *registry.Store
	log   *slog.Logger
}

// New returns the garbage collector.
func New(store *registry.Store, log *slog.Logger) *Controller {
	return &Controller{store: store, log: log}
}

// Name is the controller's name in the table.
func (c *Controller) Name() string { return "garbagecollector" }

// gcDebounce gathers the deletions of a cascade into one sweep.
const (
	gcDebounce = 200 * time.Millisecond
	gcResync   = time.Minute
)

// Run reconciles until ctx ends (when this member stops leading).
func (c *Controller) Run(ctx context.Context) {
	for ctx.Err() == nil {
		changes, err := c.store.WatchChanges(ctx)
		if err != nil {
			kit.Sleep(ctx, time.Second)
			continue
		}
		c.loop(ctx, changes)
	}
}

func (c *Controller) loop(ctx context.Context, changes <-chan []registry.Change) {
	c.sweep(ctx)
	resync := time.NewTicker(gcResync)
	defer resync.Stop()
	var due <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-resync.C:
			c.sweep(ctx)
		case <-due:
			due = nil
			c.sweep(ctx)
		case batch, ok := <-changes:
			if !ok {
				return
			}
			for _, ch := range batch {
				// A deletion, or a write that marked an object deleted.
				if (ch.Deleted || ch.Meta.DeletionTimestamp != nil) && due == nil {
					due = time.After(gcDebounce)
				}
			}
		}
	}
}

// item is one stored object as the collector sees it.
type item struct {
	res *registry.Resource
	obj metav1.Object
}

func (c *Controller) sweep(ctx context.Context) {
	var items []item
	byUID := map[types.UID]item{}
	for _, r := range c.store.Resources().All() {
		if r.StorageVersion != "" {
			continue
		}
		// The metadata alone: the collector holds every object of the
		// store at once, and reads nothing else of them.
		err := c.store.ScanMeta(ctx, r, "", func(m *metav1.PartialObjectMetadata) error {
			it := item{res: r, obj: m}
			items = append(items, it)
			byUID[m.GetUID()] = it
			return nil
		})
		if err != nil {
			c.log.Warn("garbage collector: list", "resource", r.String(), "err", err)
			return
		}
	}
	dependents := map[types.UID][]dependent{}
	for _, it := range items {
		refs := it.obj.GetOwnerReferences()
		if len(refs) == 0 {
			continue
		}
		alive := false
		for _, ref := range refs {
			if owner, ok := byUID[ref.UID]; ok && sameNamespace(owner, it) {
				alive = true
				blocking := ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion
				dependents[ref.UID] = append(dependents[ref.UID], dependent{it, blocking})
			}
		}
		if !alive && it.obj.GetDeletionTimestamp() == nil {
			c.delete(ctx, it, metav1.DeletePropagationBackground)
		}
	}
	for _, owner := range items {
		if owner.obj.GetDeletionTimestamp() == nil {
			continue
		}
		fs := owner.obj.GetFinalizers()
		switch {
		case slices.Contains(fs, metav1.FinalizerDeleteDependents):
			blocking := 0
			for _, d := range dependents[owner.obj.GetUID()] {
				if solidOwner(d.item, owner.obj.GetUID(), byUID) {
					// Another owner keeps it: it only loses its reference
					// to this one, as upstream's collector patches it.
					c.orphan(ctx, d.item, owner.obj.GetUID())
					continue
				}
				if d.obj.GetDeletionTimestamp() == nil {
					// Dependents with dependents of their own go in the
					// foreground too; the rest at once.
					policy := metav1.DeletePropagationBackground
					if len(dependents[d.obj.GetUID()]) > 0 {
						policy = metav1.DeletePropagationForeground
					}
					c.delete(ctx, d.item, policy)
				}
				if !d.blocking {
					continue
				}
				blocking++
				// A dependent waiting for its own dependents, one of
				// which waits too, may be in a circle of owners: it stops
				// blocking its owners, as upstream's collector breaks
				// circles (with the same false positives on long chains).
				if deletingDependents(d.item) && slices.ContainsFunc(dependents[d.obj.GetUID()], func(x dependent) bool { return deletingDependents(x.item) }) {
					c.unblock(ctx, d.item, byUID)
				}
			}
			if blocking == 0 {
				c.dropFinalizer(ctx, owner, metav1.FinalizerDeleteDependents)
			}
		case slices.Contains(fs, metav1.FinalizerOrphanDependents):
			for _, d := range dependents[owner.obj.GetUID()] {
				c.orphan(ctx, d.item, owner.obj.GetUID())
			}
			c.dropFinalizer(ctx, owner, metav1.FinalizerOrphanDependents)
		}
	}
}

// solidOwner reports whether it has an owner besides the one of UID
// except that stays: one that exists and is not deleting its dependents.
func solidOwner(it item, except types.UID, byUID map[types.UID]item) bool {
	for _, ref := range it.obj.GetOwnerReferences() {
		if owner, ok := byUID[ref.UID]; ok && ref.UID != except && sameNamespace(owner, it) && !deletingDependents(owner) {
			return true
		}
	}
	return false
}

// dependent is an object with an owner, and whether its reference blocks
// the owner's foreground deletion (blockOwnerDeletion).
type dependent struct {
	item
	blocking bool
}

// deletingDependents: deleted in the foreground, waiting for dependents.
func deletingDependents(it item) bool {
	return it.obj.GetDeletionTimestamp() != nil && slices.Contains(it.obj.GetFinalizers(), metav1.FinalizerDeleteDependents)
}

// unblock makes it's references to owners that wait for their dependents
// non-blocking.
func (c *Controller) unblock(ctx context.Context, it item, byUID map[types.UID]item) {
	c.mutate(ctx, it, func(m metav1.Object) {
		refs := m.GetOwnerReferences()
		for i := range refs {
			if owner, ok := byUID[refs[i].UID]; ok && deletingDependents(owner) {
				no := false
				refs[i].BlockOwnerDeletion = &no
			}
		}
		m.SetOwnerReferences(refs)
	})
}

// sameNamespace: a namespaced dependent's owner is in its namespace or
// cluster-scoped.
func sameNamespace(owner, dep item) bool {
	return !owner.res.Namespaced || owner.obj.GetNamespace() == dep.obj.GetNamespace()
}

func (c *Controller) delete(ctx context.Context, it item, policy metav1.DeletionPropagation) {
	uid := it.obj.GetUID()
	_, _, err := c.store.Delete(ctx, it.res, it.obj.GetNamespace(), it.obj.GetName(), metav1.DeleteOptions{
		PropagationPolicy: &policy, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		c.log.Warn("garbage collector: delete", "resource", it.res.String(), "namespace", it.obj.GetNamespace(), "name", it.obj.GetName(), "err", err)
		return
	}
	if err == nil {
		c.log.Info("garbage collector: deleted dependent", "resource", it.res.String(), "namespace", it.obj.GetNamespace(), "name", it.obj.GetName())
	}
}

func (c *Controller) orphan(ctx context.Context, it item, owner types.UID) {
	c.mutate(ctx, it, func(m metav1.Object) {
		m.SetOwnerReferences(slices.DeleteFunc(m.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return r.UID == owner }))
	})
}

func (c *Controller) dropFinalizer(ctx context.Context, it item, f string) {
	c.mutate(ctx, it, func(m metav1.Object) {
		m.SetFinalizers(slices.DeleteFunc(m.GetFinalizers(), func(x string) bool { return x == f }))
	})
}

func (c *Controller) mutate(ctx context.Context, it item, change func(metav1.Object)) {
	_, err := c.store.Mutate(ctx, it.res, it.obj.GetNamespace(), it.obj.GetName(), "", func(obj runtime.Object) error {
		m, err := meta.Accessor(obj)
		if err != nil {
			return err
		}
		change(m)
		return nil
	})
	if err != nil && !apierrors.IsNotFound(err) {
		c.log.Warn("garbage collector: update", "resource", it.res.String(), "name", it.obj.GetName(), "err", err)
	}
}
