package kit

import (
	"maps"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/registry"
)

// Object is what a Cache holds: a stored object of one Go type.
type Object interface {
	runtime.Object
	metav1.Object
}

// Key is obj's key in a Cache and a Queue: namespace/name, or the name of
// a cluster-scoped object.
func Key(obj metav1.Object) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}

// Cache is a copy of one resource's objects kept by a Loop's watch (see
// Watch), found by key, by UID, by namespace and by the UID of their
// controller (the owner reference with controller set). The loop writes
// it and workers may read it at once; its objects are shared and must not
// be changed.
type Cache[T Object] struct {
	mu      sync.RWMutex
	byKey   map[string]T
	byUID   map[types.UID]string
	byNS    map[string]map[string]T
	byOwner map[types.UID]map[string]T
}

// NewCache returns an empty cache.
func NewCache[T Object]() *Cache[T] {
	c := &Cache[T]{}
	c.reset()
	return c
}

func (c *Cache[T]) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byKey = map[string]T{}
	c.byUID = map[types.UID]string{}
	c.byNS = map[string]map[string]T{}
	c.byOwner = map[types.UID]map[string]T{}
}

// Watch is a Watch of res that keeps c: c is emptied when the watch is
// opened (its first events are then the current objects), before opened
// is called; each event is applied to c before handle is called with the
// object as c held it before (the zero T if none) and as it is now (as
// deleted, for a DELETED event).
func (c *Cache[T]) Watch(res *registry.Resource, opened func(), handle func(typ watch.EventType, old, obj T)) Watch {
	return c.WatchAs(res, func(obj runtime.Object) (T, bool) {
		t, ok := obj.(T)
		return t, ok
	}, opened, handle)
}

// WatchAs is Watch for a resource whose objects c holds as Ts made by
// view (a ReplicationController seen as a ReplicaSet); events whose
// object view refuses are dropped.
func (c *Cache[T]) WatchAs(res *registry.Resource, view func(runtime.Object) (T, bool), opened func(), handle func(typ watch.EventType, old, obj T)) Watch {
	return Watch{Res: res, Opened: func() {
		c.reset()
		if opened != nil {
			opened()
		}
	}, Handle: func(ev registry.WatchEvent) {
		obj, ok := view(ev.Object)
		if !ok {
			return
		}
		old := c.apply(ev.Type, obj)
		if handle != nil {
			handle(ev.Type, old, obj)
		}
	}}
}

// NewMetaCache returns an empty cache of objects' metadata, kept by a
// WatchMeta: for a controller that only finds the objects of a kind by
// their labels and owners, and reads them from the store when it syncs,
// so that it holds no more of them (a thousand pods) than that.
func NewMetaCache() *Cache[*metav1.PartialObjectMetadata] {
	return NewCache[*metav1.PartialObjectMetadata]()
}

// WatchMeta is a Watch of res that keeps c, as Cache.Watch does, with the
// metadata of res's objects: name, namespace, UID, labels, finalizers,
// owners and deletion timestamp (not annotations nor managed fields).
// handle gets the metadata before and after each event.
func WatchMeta(c *Cache[*metav1.PartialObjectMetadata], res *registry.Resource, opened func(), handle func(typ watch.EventType, old, obj *metav1.PartialObjectMetadata)) Watch {
	return Watch{Res: res, Opened: func() {
		c.reset()
		if opened != nil {
			opened()
		}
	}, Handle: func(ev registry.WatchEvent) {
		m, ok := ev.Object.(metav1.Object)
		if !ok || ev.Type == watch.Error {
			return
		}
		obj := metaViews.of(ev.Object, m)
		old := c.apply(ev.Type, obj)
		if handle != nil {
			handle(ev.Type, old, obj)
		}
	}}
}

// apply records an event of obj and returns the object it replaces.
func (c *Cache[T]) apply(typ watch.EventType, obj T) T {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := Key(obj)
	old, had := c.byKey[key]
	if had {
		delete(c.byUID, old.GetUID())
		delete(c.byNS[old.GetNamespace()], key)
		if len(c.byNS[old.GetNamespace()]) == 0 {
			delete(c.byNS, old.GetNamespace())
		}
		if ref := metav1.GetControllerOf(old); ref != nil {
			delete(c.byOwner[ref.UID], key)
			if len(c.byOwner[ref.UID]) == 0 {
				delete(c.byOwner, ref.UID)
			}
		}
		delete(c.byKey, key)
	}
	if typ == watch.Deleted {
		return old
	}
	c.byKey[key] = obj
	c.byUID[obj.GetUID()] = key
	addTo(c.byNS, obj.GetNamespace(), key, obj)
	if ref := metav1.GetControllerOf(obj); ref != nil {
		addTo(c.byOwner, ref.UID, key, obj)
	}
	return old
}

func addTo[K comparable, T any](m map[K]map[string]T, k K, key string, obj T) {
	if m[k] == nil {
		m[k] = map[string]T{}
	}
	m[k][key] = obj
}

// Get is the object of key.
func (c *Cache[T]) Get(key string) (T, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	obj, ok := c.byKey[key]
	return obj, ok
}

// KeyOfUID is the key of the object with uid.
func (c *Cache[T]) KeyOfUID(uid types.UID) (string, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	key, ok := c.byUID[uid]
	return key, ok
}

// ByUID is the object with uid.
func (c *Cache[T]) ByUID(uid types.UID) (T, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	obj, ok := c.byKey[c.byUID[uid]]
	return obj, ok
}

// Keys are the keys of every object, sorted.
func (c *Cache[T]) Keys() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.Sorted(maps.Keys(c.byKey))
}

// All is every object, by key.
func (c *Cache[T]) All() []T {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return sorted(c.byKey)
}

// List is the objects of namespace ns ("": of the cluster-scoped
// resource), by key.
func (c *Cache[T]) List(ns string) []T {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return sorted(c.byNS[ns])
}

// Controlled is the objects whose controller has uid, by key.
func (c *Cache[T]) Controlled(uid types.UID) []T {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return sorted(c.byOwner[uid])
}

func sorted[T any](m map[string]T) []T {
	out := make([]T, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}

// metaViewsKept is how many objects' metadata views metaViews keeps: the
// changes of the last moments, while every controller watching their
// kind takes them.
const metaViewsKept = 512

// metaViews gives the watches of WatchMeta one metadata view per decoded
// object: every controller that follows the pods (ReplicaSets, Jobs,
// StatefulSets, EndpointSlices, disruption budgets) receives the same
// decoded object for a change, and keeps the same view of it. Objects
// are the keys, which keeps them alive while kept: their addresses are
// not reused meanwhile.
var metaViews = &viewMemo{m: map[runtime.Object]*metav1.PartialObjectMetadata{}}

type viewMemo struct {
	mu   sync.Mutex
	m    map[runtime.Object]*metav1.PartialObjectMetadata
	ring [metaViewsKept]runtime.Object
	next int
}

// of returns the view of obj, whose metadata is m: name, namespace, UID,
// labels, finalizers, owners and deletion timestamp.
func (v *viewMemo) of(obj runtime.Object, m metav1.Object) *metav1.PartialObjectMetadata {
	v.mu.Lock()
	defer v.mu.Unlock()
	if view, ok := v.m[obj]; ok {
		return view
	}
	view := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: m.GetName(), Namespace: m.GetNamespace(),
		UID: m.GetUID(), Labels: m.GetLabels(), Finalizers: m.GetFinalizers(), OwnerReferences: m.GetOwnerReferences(),
		DeletionTimestamp: m.GetDeletionTimestamp()}}
	if old := v.ring[v.next]; old != nil {
		delete(v.m, old)
	}
	v.ring[v.next] = obj
	v.next = (v.next + 1) % metaViewsKept
	v.m[obj] = view
	return view
}
