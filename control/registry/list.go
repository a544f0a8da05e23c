package registry

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/isle-cluster/isle/raft/kv"
)

// Selector is a parsed label and field selector.
type Selector struct {
	Labels labels.Selector
	Fields fields.Selector
}

// ParseSelector parses the selectors of a list or watch request.
func ParseSelector(opts metav1.ListOptions) (Selector, error) {
	sel := Selector{Labels: labels.Everything(), Fields: fields.Everything()}
	var err error
	if opts.LabelSelector != "" {
		if sel.Labels, err = labels.Parse(opts.LabelSelector); err != nil {
			return sel, apierrors.NewBadRequest(fmt.Sprintf("unable to parse requirement: labelSelector %q: %v", opts.LabelSelector, err))
		}
	}
	if opts.FieldSelector != "" {
		if sel.Fields, err = fields.ParseSelector(opts.FieldSelector); err != nil {
			return sel, apierrors.NewBadRequest(fmt.Sprintf("fieldSelector %q: %v", opts.FieldSelector, err))
		}
	}
	return sel, nil
}

// checkFields rejects field selectors on fields the resource does not index,
// as Kubernetes does ("field label not supported").
func checkFields(r *Resource, sel fields.Selector) error {
	for _, req := range sel.Requirements() {
		if _, ok := r.Fields[req.Field]; !ok && req.Field != "metadata.name" && req.Field != "metadata.namespace" {
			return apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", req.Field))
		}
	}
	return nil
}

// Matches reports whether obj, an object of r, satisfies the selector.
func (sel Selector) Matches(r *Resource, obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	if !sel.Labels.Matches(labels.Set(m.GetLabels())) {
		return false
	}
	return sel.Fields.Empty() || sel.Fields.Matches(fieldSet(r, m, obj))
}

// fieldSet is the set of fields a field selector may use for obj.
func fieldSet(r *Resource, m metav1.Object, obj runtime.Object) fields.Set {
	set := make(fields.Set, 2+len(r.Fields))
	set["metadata.name"], set["metadata.namespace"] = m.GetName(), m.GetNamespace()
	for name, get := range r.Fields {
		set[name] = get(obj)
	}
	return set
}

// continueToken is the opaque "continue" of a paged list.
type continueToken struct {
	RV    int64  `json:"rv"`
	Start string `json:"start"`
}

func encodeContinue(rv int64, start string) string {
	b, _ := json.Marshal(continueToken{RV: rv, Start: start})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeContinue(s string) (continueToken, error) {
	var t continueToken
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	if err != nil || t.Start == "" {
		return t, apierrors.NewBadRequest("continue: not a continue token this server issued")
	}
	return t, nil
}

// List reads the objects of r in namespace ns ("" = all namespaces) that
// match the selectors, at most opts.Limit of them (0 = all) with a continue
// token for the rest. See Scan.
func (s *Store) List(ctx context.Context, r *Resource, ns string, opts metav1.ListOptions) (runtime.Object, error) {
	var items []runtime.Object
	lm, err := s.Scan(ctx, r, ns, opts, func(obj runtime.Object) error {
		items = append(items, obj)
		return nil
	})
	if err != nil {
		return nil, err
	}
	list := r.NewList()
	if err := meta.SetList(list, items); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	la, _ := meta.ListAccessor(list)
	la.SetResourceVersion(lm.ResourceVersion)
	la.SetContinue(lm.Continue)
	la.SetRemainingItemCount(lm.RemainingItemCount)
	list.GetObjectKind().SetGroupVersionKind(r.GroupVersion().WithKind(r.Kind + "List"))
	return list, nil
}

// ScanOption changes the objects Scan hands its callback.
type ScanOption func(*scanConfig)

type scanConfig struct {
	noManagedFields bool
	shared          bool // objects as watchers get them (see shared)
	readOnly        bool // the caller changes no object (see ReadOnly)
}

// asWatched makes Scan's objects the ones watchers share: a watch's
// initial state, which its watcher may keep as its events' objects.
func asWatched() ScanOption {
	return func(c *scanConfig) { c.shared = true }
}

// WithoutManagedFields makes Scan's and Watch's objects come without
// metadata.managedFields, which are often half of an object and most of
// its decoding, for a caller that shows none (a Table's rows) or has no use
// for them (the in-process watchers).
func WithoutManagedFields() ScanOption {
	return func(c *scanConfig) { c.noManagedFields = true }
}

// ReadOnly says that Scan's caller changes none of the objects it is
// handed: the ones the watchers share (in the form WithoutManagedFields
// asks for) are then handed as they are, not decoded again. A Table of a
// thousand pods was most of its time decoding them.
func ReadOnly() ScanOption {
	return func(c *scanConfig) { c.readOnly = true }
}

// Scan calls fn, in key order, for each object of r in ns that matches the
// selectors, at most opts.Limit of them, and returns the list's metadata
// (resourceVersion, continue). It reads one consistent view of the store,
// decoding one object at a time, so a caller that streams its answer holds
// one object in memory, not the whole list. Pages after the first come from
// the store's state when they are asked for (isle keeps no old versions);
// a continue token older than the store's watch history answers 410 Gone,
// as in Kubernetes.
func (s *Store) Scan(ctx context.Context, r *Resource, ns string, opts metav1.ListOptions, fn func(runtime.Object) error, with ...ScanOption) (metav1.ListMeta, error) {
	var lm metav1.ListMeta
	var cfg scanConfig
	for _, o := range with {
		o(&cfg)
	}
	sel, err := ParseSelector(opts)
	if err != nil {
		return lm, err
	}
	if err := checkFields(r, sel.Fields); err != nil {
		return lm, err
	}
	if opts.Limit < 0 {
		return lm, apierrors.NewBadRequest("limit: must be non-negative")
	}
	prefix := keyPrefix(r, ns)
	start := prefix
	if opts.Continue != "" {
		tok, err := decodeContinue(opts.Continue)
		if err != nil {
			return lm, err
		}
		if tok.RV < s.node.KV().CompactRevision() {
			return lm, apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
		}
		start = tok.Start
	} else if err := s.listFreshness(ctx, opts); err != nil {
		return lm, err
	}
	view := s.node.KV().View()
	var n int64
	var next string
	var ferr error
	view.Range(prefix, start, func(v kv.KeyValue) bool {
		if opts.Limit > 0 && n == opts.Limit {
			next = v.Key
			return false
		}
		// A label selector is matched before the whole object is decoded:
		// most objects a controller lists by labels are not its own.
		if !sel.Labels.Empty() && !s.labelsMatch(r, v, sel.Labels) {
			return true
		}
		var obj runtime.Object
		var found bool
		if cfg.readOnly && !cfg.shared {
			obj, found = s.sharedForm(r, v, cfg.noManagedFields)
		}
		switch {
		case found:
		case cfg.shared:
			obj, err = s.decodeShared(r, v, cfg.noManagedFields)
		default:
			obj, err = s.decode(r, v, cfg)
		}
		if err != nil {
			ferr = err
			return false
		}
		if !sel.Matches(r, obj) {
			return true
		}
		n++
		if err := fn(obj); err != nil {
			ferr = err
			return false
		}
		return ctx.Err() == nil
	})
	if ferr != nil {
		return lm, ferr
	}
	if err := ctx.Err(); err != nil {
		return lm, storeError(err)
	}
	lm.ResourceVersion = strconv.FormatInt(view.Revision(), 10)
	if next != "" {
		lm.Continue = encodeContinue(view.Revision(), next)
		// As Kubernetes: without selectors, how many objects the next
		// pages hold (a count of keys, nothing decoded).
		if sel.Labels.Empty() && sel.Fields.Empty() {
			var left int64
			view.Range(prefix, next, func(kv.KeyValue) bool { left++; return true })
			lm.RemainingItemCount = &left
		}
	}
	return lm, nil
}

// listFreshness makes the local copy fresh enough for the requested
// resourceVersion: "" is linearizable, "0" is any, N is at least N.
func (s *Store) listFreshness(ctx context.Context, opts metav1.ListOptions) error {
	switch opts.ResourceVersion {
	case "0":
		return nil
	case "":
		return s.sync(ctx, "")
	}
	rv, err := strconv.ParseInt(opts.ResourceVersion, 10, 64)
	if err != nil || rv < 0 {
		return apierrors.NewBadRequest(fmt.Sprintf("resourceVersion %q: not a valid resource version", opts.ResourceVersion))
	}
	if opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact && rv != s.node.KV().Revision() {
		return apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d): isle serves lists at the current revision only", rv, s.node.KV().Revision()))
	}
	return s.notAhead(ctx, rv)
}

// aheadWait is how long a read at a revision the store has not reached
// waits for it, as kube-apiserver's watch cache does.
const aheadWait = 3 * time.Second

// notAhead waits up to aheadWait for the store to reach revision rv, and
// answers as kube-apiserver does if it does not: 504 Too large resource
// version, try again in a second.
func (s *Store) notAhead(ctx context.Context, rv int64) error {
	if rv <= s.node.KV().Revision() {
		return nil
	}
	if err := s.sync(ctx, ""); err != nil {
		return err
	}
	deadline := time.Now().Add(aheadWait)
	for cur := s.node.KV().Revision(); rv > cur; cur = s.node.KV().Revision() {
		if time.Now().After(deadline) {
			return apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", rv, cur), 1)
		}
		select {
		case <-ctx.Done():
			return apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", rv, cur), 1)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// Count returns the number of stored objects of r in ns without decoding them.
func (s *Store) Count(r *Resource, ns string) int {
	return s.node.KV().Count(keyPrefix(r, ns))
}
