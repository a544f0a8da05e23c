package registry

import (
	"reflect"
	goruntime "runtime"
	"sync"
	"unsafe"
	"weak"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/isle-cluster/isle/raft/kv"
)

// sharedSize is how many decoded changes shared keeps alive: the changes
// of the last moments, while every watcher of their kind takes them.
const sharedSize = 128

// shared hands the watchers of a kind one decoded object per change: each
// in-process watcher (the scheduler, the controllers) decoded every
// change anew, and decoding was half the control plane's work while pods
// were placed. It also keeps one decoded copy of each stored object in
// memory, however many caches hold it: past the last sharedSize changes it
// holds its objects weakly, so an object stays shared for as long as any
// cache keeps it (the current state a watch starts with included), and
// goes when the last one lets it go. The objects are shared: whoever
// receives them from a watch must copy before changing them, as with an
// informer's.
type shared struct {
	mu      sync.Mutex
	entries map[sharedKey]weakObject
	ring    [sharedSize]runtime.Object // the newest, kept alive
	next    int
}

type sharedKey struct {
	r    *Resource
	key  string
	rev  int64
	lite bool // decoded without metadata.managedFields (WithoutManagedFields)
}

// weakObject is a weak pointer to a decoded object. weak.Pointer needs the
// pointer's type, which a runtime.Object hides: the object is held by its
// address and its type is kept beside it to make it whole again.
type weakObject struct {
	typ reflect.Type // the type the object's pointer points to
	ptr weak.Pointer[byte]
}

// object returns the object, or false once it has been collected.
func (w weakObject) object() (runtime.Object, bool) {
	p := w.ptr.Value()
	if p == nil {
		return nil, false
	}
	obj, ok := reflect.NewAt(w.typ, unsafe.Pointer(p)).Interface().(runtime.Object)
	return obj, ok
}

// get returns the object shared under k, if any cache still holds it.
func (c *shared) get(k sharedKey) (runtime.Object, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[k].object()
}

// sharedObject returns the object decoded from v of r, with or without
// its managedFields, if a watcher's cache (or the newest changes) holds it.
func (s *Store) sharedObject(r *Resource, v kv.KeyValue) (runtime.Object, bool) {
	if obj, ok := s.sharedForm(r, v, true); ok {
		return obj, true
	}
	return s.sharedForm(r, v, false)
}

// sharedForm returns the object decoded from v of r in the one form,
// with managedFields or without (lite), if it is shared.
func (s *Store) sharedForm(r *Resource, v kv.KeyValue, lite bool) (runtime.Object, bool) {
	return s.shared.get(sharedKey{r: r, key: v.Key, rev: v.ModRevision, lite: lite})
}

// decodeShared decodes v as fromStore does, or returns the object a
// watcher of r already decoded for it. With lite, the object comes without
// its managedFields: the form the in-process watchers keep (managedFields
// were a quarter of a decoded pod, and no controller reads them), made from
// the whole object, if one is shared, without decoding again. The API's
// watchers take whole objects, which they hold only while they send them.
func (s *Store) decodeShared(r *Resource, v kv.KeyValue, lite bool) (runtime.Object, error) {
	k := sharedKey{r: r, key: v.Key, rev: v.ModRevision, lite: lite}
	c := &s.shared
	if obj, ok := c.get(k); ok {
		return obj, nil
	}
	var whole runtime.Object
	if lite {
		whole, _ = s.sharedForm(r, v, false)
	}
	obj, ok := withoutManagedFieldsCopy(whole)
	if !ok {
		var err error
		if obj, err = s.decode(r, v, scanConfig{noManagedFields: lite}); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if had, ok := c.entries[k].object(); ok {
		return had, nil // decoded meanwhile by another watcher
	}
	if c.entries == nil {
		c.entries = map[sharedKey]weakObject{}
	}
	c.ring[c.next] = obj
	c.next = (c.next + 1) % sharedSize
	pv := reflect.ValueOf(obj)
	if pv.Kind() != reflect.Pointer || pv.IsNil() {
		return obj, nil // not shareable beyond the ring; never so for a stored object
	}
	p := (*byte)(pv.UnsafePointer())
	c.entries[k] = weakObject{typ: pv.Type().Elem(), ptr: weak.Make(p)}
	goruntime.AddCleanup(p, c.forget, k)
	return obj, nil
}

// withoutManagedFieldsCopy returns a shallow copy of the typed object obj
// with no managedFields: its own struct, sharing the rest (shared objects
// are never changed). An unstructured object's fields are one map that a
// shallow copy would share, so it, like a nil obj, gives false.
func withoutManagedFieldsCopy(obj runtime.Object) (runtime.Object, bool) {
	if obj == nil {
		return nil, false
	}
	if _, ok := obj.(runtime.Unstructured); ok {
		return nil, false
	}
	pv := reflect.ValueOf(obj)
	if pv.Kind() != reflect.Pointer || pv.IsNil() || pv.Elem().Kind() != reflect.Struct {
		return nil, false
	}
	cp := reflect.New(pv.Type().Elem())
	cp.Elem().Set(pv.Elem())
	out, ok := cp.Interface().(runtime.Object)
	if !ok {
		return nil, false
	}
	m, err := meta.Accessor(out)
	if err != nil {
		return nil, false
	}
	m.SetManagedFields(nil)
	return out, true
}

// forget drops the entry of a collected object.
func (c *shared) forget(k sharedKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[k].object(); !ok {
		delete(c.entries, k)
	}
}
