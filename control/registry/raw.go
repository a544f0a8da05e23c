package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/isle-cluster/isle/raft/kv"
)

// Revision is the store's current revision: a watch from it sends only
// the changes made after now.
func (s *Store) Revision() int64 { return s.node.KV().Revision() }

// Change is a change of one stored object, of any resource, as
// WatchChanges reports it.
type Change struct {
	// Deleted: the object is gone; Meta is then as it was last stored.
	Deleted bool
	// Meta is the object's identity, owners and deletion state, parsed
	// from the object as stored (empty if it does not parse).
	Meta metav1.ObjectMeta
}

// storedMetadata is what a Change parses of an object's metadata.
type storedMetadata struct {
	Name              string                  `json:"name"`
	Namespace         string                  `json:"namespace"`
	UID               types.UID               `json:"uid"`
	DeletionTimestamp *metav1.Time            `json:"deletionTimestamp"`
	Finalizers        []string                `json:"finalizers"`
	OwnerReferences   []metav1.OwnerReference `json:"ownerReferences"`
}

// WatchChanges follows the changes of every stored object made after now,
// a batch per revision, until ctx ends or the watch falls too far behind;
// the channel is then closed.
func (s *Store) WatchChanges(ctx context.Context) (<-chan []Change, error) {
	w, err := s.node.Watch(ctx, "/registry/", s.Revision())
	if err != nil {
		return nil, fmt.Errorf("registry: watch changes: %w", err)
	}
	out := make(chan []Change)
	go func() {
		defer close(out)
		for batch := range w.C() {
			changes := make([]Change, 0, len(batch))
			for _, ev := range batch {
				changes = append(changes, s.changeOf(ev))
			}
			select {
			case out <- changes:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

func (s *Store) changeOf(ev kv.Event) Change {
	c := Change{Deleted: ev.Type == kv.EventDelete}
	value := ev.KV.Value
	if c.Deleted && ev.Prev != nil {
		value = ev.Prev.Value
	}
	value, err := s.open(ev.KV.Key, value)
	if err != nil {
		s.log.Warn("registry: a stored change does not decrypt", "key", ev.KV.Key, "err", err)
	}
	if md, ok := parseMeta(value); err == nil && ok {
		c.Meta = metav1.ObjectMeta{Name: md.Name, Namespace: md.Namespace, UID: md.UID, DeletionTimestamp: md.DeletionTimestamp,
			Finalizers: md.Finalizers, OwnerReferences: md.OwnerReferences}
	}
	return c
}

// parseMeta reads the metadata of a stored object and stops there: every
// write of the store passes through it, and the spec and status after the
// metadata are most of an object's bytes.
func parseMeta(value []byte) (storedMetadata, bool) {
	var md storedMetadata
	dec := json.NewDecoder(bytes.NewReader(value))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return md, false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return md, false
		}
		if t == "metadata" {
			return md, dec.Decode(&md) == nil
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return md, false
		}
	}
	return md, false
}
