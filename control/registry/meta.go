package registry

import (
	"context"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	sigsjson "sigs.k8s.io/json"

	"github.com/isle-cluster/isle/raft/kv"
)

// storedMeta is what a light read decodes of a stored object: the
// metadata a controller follows objects by, not their spec, status,
// annotations or managed fields, which a full decode allocates.
type storedMeta struct {
	Metadata struct {
		Name              string                  `json:"name"`
		Namespace         string                  `json:"namespace"`
		UID               types.UID               `json:"uid"`
		Labels            map[string]string       `json:"labels"`
		Finalizers        []string                `json:"finalizers"`
		OwnerReferences   []metav1.OwnerReference `json:"ownerReferences"`
		DeletionTimestamp *metav1.Time            `json:"deletionTimestamp"`
	} `json:"metadata"`
}

// ScanMeta calls fn, in key order, with the metadata of each object of r
// in ns ("" = all namespaces) as this member has applied them (a list
// with resourceVersion "0"): name, namespace, UID, labels, finalizers,
// owners and deletion timestamp, and resourceVersion. It decodes nothing
// else, for whoever reads every object for its metadata alone (the
// garbage collector): a fraction of a full decode's allocations.
func (s *Store) ScanMeta(ctx context.Context, r *Resource, ns string, fn func(*metav1.PartialObjectMetadata) error) error {
	var ferr error
	s.node.KV().View().Range(keyPrefix(r, ns), keyPrefix(r, ns), func(v kv.KeyValue) bool {
		m, err := s.metaOf(v)
		if err != nil {
			ferr = apierrors.NewInternalError(err)
			return false
		}
		if err := fn(m); err != nil {
			ferr = err
			return false
		}
		return ctx.Err() == nil
	})
	if ferr != nil {
		return ferr
	}
	if err := ctx.Err(); err != nil {
		return storeError(err)
	}
	return nil
}

// metaOf decodes the metadata of a stored value.
func (s *Store) metaOf(v kv.KeyValue) (*metav1.PartialObjectMetadata, error) {
	value, err := s.open(v.Key, v.Value)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", v.Key, err)
	}
	var sm storedMeta
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(value, &sm); err != nil {
		return nil, fmt.Errorf("registry: decode the metadata of %s: %w", v.Key, err)
	}
	m := sm.Metadata
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID,
		Labels: m.Labels, Finalizers: m.Finalizers, OwnerReferences: m.OwnerReferences, DeletionTimestamp: m.DeletionTimestamp,
		ResourceVersion: strconv.FormatInt(v.ModRevision, 10)}}, nil
}

// storedLabels is what a label selector is matched against before an
// object is decoded whole.
type storedLabels struct {
	Metadata struct {
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
}

// labelsMatch reports whether the labels of the stored value v of r match
// sel: those of the object decoded from it that the in-process watchers
// share, if one is, else read from its JSON alone; an undecodable value
// matches (its full decode then reports what is wrong with it). The
// controllers list their pods by labels at every sync, and reading the
// labels of every pod of a namespace from JSON was most of an idle
// leader's CPU at 100 boards.
func (s *Store) labelsMatch(r *Resource, v kv.KeyValue, sel labels.Selector) bool {
	if obj, ok := s.sharedObject(r, v); ok {
		if m, ok := obj.(metav1.Object); ok {
			return sel.Matches(labels.Set(m.GetLabels()))
		}
	}
	value, err := s.open(v.Key, v.Value)
	if err != nil {
		return true
	}
	var sl storedLabels
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(value, &sl); err != nil {
		return true
	}
	return sel.Matches(labels.Set(sl.Metadata.Labels))
}
