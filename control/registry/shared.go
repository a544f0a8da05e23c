package registry

import (
	"sync"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/isle-cluster/isle/raft/kv"
)

// sharedSize is how many decoded changes shared keeps: the changes of the
// last moments, while every watcher of their kind takes them.
const sharedSize = 512

// shared hands the watchers of a kind one decoded object per change: each
// in-process watcher (the scheduler, the controllers) decoded every
// change anew, and decoding was half the control plane's work while pods
// were placed. The objects are shared: whoever receives them from a
// watch must copy before changing them, as with an informer's.
type shared struct {
	mu      sync.Mutex
	entries map[sharedKey]runtime.Object
	ring    [sharedSize]sharedKey
	next    int
}

type sharedKey struct {
	r   *Resource
	key string
	rev int64
}

// decodeShared decodes v as fromStore does, or returns the object a
// watcher of r already decoded for it.
func (s *Store) decodeShared(r *Resource, v kv.KeyValue) (runtime.Object, error) {
	k := sharedKey{r: r, key: string(v.Key), rev: v.ModRevision}
	c := &s.shared
	c.mu.Lock()
	obj, ok := c.entries[k]
	c.mu.Unlock()
	if ok {
		return obj, nil
	}
	obj, err := s.fromStore(r, v)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[sharedKey]runtime.Object{}
	}
	if _, ok := c.entries[k]; !ok {
		delete(c.entries, c.ring[c.next])
		c.ring[c.next] = k
		c.next = (c.next + 1) % sharedSize
		c.entries[k] = obj
	}
	return c.entries[k], nil
}
