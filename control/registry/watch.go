package registry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/raft/kv"
)

// WatchEvent is one change as the API reports it.
type WatchEvent struct {
	Type   watch.EventType
	Object runtime.Object
}

// BookmarkInterval is how often a quiet watch that allows bookmarks gets
// one, so a client can resume it without a relist.
var BookmarkInterval = time.Minute

// Watch streams changes to the objects of r in ns matching the selectors.
// With resourceVersion "" or "0" it first sends every current object as
// ADDED; with N it sends the changes after N, or fails with 410 Gone if the
// store's history no longer reaches back to N. The channel closes when ctx
// ends; a watch that falls too far behind ends with an ERROR event (410).
// Of the ScanOptions, WithoutManagedFields applies.
func (s *Store) Watch(ctx context.Context, r *Resource, ns string, opts metav1.ListOptions, with ...ScanOption) (<-chan WatchEvent, error) {
	var cfg scanConfig
	for _, o := range with {
		o(&cfg)
	}
	sel, err := ParseSelector(opts)
	if err != nil {
		return nil, err
	}
	if err := checkFields(r, sel.Fields); err != nil {
		return nil, err
	}
	var initial []runtime.Object
	var from int64
	sendInitial := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	if sendInitial || opts.ResourceVersion == "" || opts.ResourceVersion == "0" {
		// The current state first, as ADDED events (a watch-list stream
		// when the client asked for sendInitialEvents), as the objects
		// watchers share: not through a List, whose typed items would be
		// copies.
		lm, err := s.Scan(ctx, r, ns, metav1.ListOptions{LabelSelector: opts.LabelSelector, FieldSelector: opts.FieldSelector, ResourceVersion: opts.ResourceVersion},
			func(obj runtime.Object) error {
				initial = append(initial, obj)
				return nil
			}, append(with, asWatched())...)
		if err != nil {
			return nil, err
		}
		from, _ = strconv.ParseInt(lm.ResourceVersion, 10, 64)
	} else {
		from, err = strconv.ParseInt(opts.ResourceVersion, 10, 64)
		if err != nil || from < 0 {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("resourceVersion %q: not a valid resource version", opts.ResourceVersion))
		}
		if err := s.notAhead(ctx, from); err != nil {
			return nil, err
		}
	}
	w, err := s.node.Watch(ctx, keyPrefix(r, ns), from)
	if errors.Is(err, kv.ErrCompacted) {
		return nil, tooOld(from, s.node.KV().CompactRevision())
	}
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	out := make(chan WatchEvent, 16)
	go s.pump(ctx, r, sel, cfg.noManagedFields, opts.AllowWatchBookmarks, sendInitial && opts.AllowWatchBookmarks, initial, w, from, out)
	return out, nil
}

func tooOld(rv, compact int64) error {
	return apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", rv, compact))
}

// pump translates store events into API events until ctx ends.
func (s *Store) pump(ctx context.Context, r *Resource, sel Selector, lite, bookmarks, initialEnd bool, initial []runtime.Object, w *kv.Watcher, from int64, out chan<- WatchEvent) {
	defer close(out)
	send := func(ev WatchEvent) bool {
		select {
		case out <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for _, obj := range initial {
		if !send(WatchEvent{Type: watch.Added, Object: obj}) {
			return
		}
	}
	if initialEnd {
		b := s.bookmark(r, from)
		m, _ := meta.Accessor(b)
		m.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
		if !send(WatchEvent{Type: watch.Bookmark, Object: b}) {
			return
		}
	}
	var tick <-chan time.Time
	if bookmarks {
		t := time.NewTicker(BookmarkInterval)
		defer t.Stop()
		tick = t.C
	}
	last := from
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			if rev, ok := w.Progress(); ok && rev > last {
				last = rev
				if !send(WatchEvent{Type: watch.Bookmark, Object: s.bookmark(r, rev)}) {
					return
				}
			}
		case batch, ok := <-w.C():
			if !ok {
				if errors.Is(w.Err(), kv.ErrCompacted) {
					st := tooOld(last, s.node.KV().CompactRevision()).(*apierrors.StatusError).ErrStatus
					send(WatchEvent{Type: watch.Error, Object: &st})
				}
				return
			}
			for _, ev := range batch {
				last = ev.KV.ModRevision
				api, ok := s.translate(r, sel, lite, ev)
				if ok && !send(api) {
					return
				}
			}
		}
	}
}

// translate turns a store event into the API event a watcher with this
// selector sees: an object moving into the selection is ADDED, out of it
// DELETED. With lite, the objects come without managedFields.
func (s *Store) translate(r *Resource, sel Selector, lite bool, ev kv.Event) (WatchEvent, bool) {
	// A watcher of everything needs the previous object only when it is
	// deleted: decoding it on every change would double the garbage each
	// event makes, once per in-process watcher.
	if sel.Labels.Empty() && sel.Fields.Empty() && ev.Type != kv.EventDelete {
		obj, err := s.decodeShared(r, ev.KV, lite)
		if err != nil {
			s.log.Error("registry: watch: undecodable object", "key", ev.KV.Key, "err", err)
			return WatchEvent{}, false
		}
		if ev.Prev != nil {
			return WatchEvent{Type: watch.Modified, Object: obj}, true
		}
		return WatchEvent{Type: watch.Added, Object: obj}, true
	}
	// The previous object, to match against the selector: the shared one
	// (every agent's watch of its pods matches each pod's previous state;
	// each decoding it anew was one decode per board per change).
	prevIn := false
	if ev.Prev != nil {
		if prev, err := s.decodeShared(r, *ev.Prev, true); err == nil {
			prevIn = sel.Matches(r, prev)
		}
	}
	if ev.Type == kv.EventDelete {
		if !prevIn {
			return WatchEvent{}, false
		}
		// The watcher's own copy: it carries the deletion's revision.
		prev, err := s.decode(r, *ev.Prev, scanConfig{noManagedFields: lite})
		if err != nil {
			return WatchEvent{}, false
		}
		m, _ := meta.Accessor(prev)
		m.SetResourceVersion(strconv.FormatInt(ev.KV.ModRevision, 10))
		return WatchEvent{Type: watch.Deleted, Object: prev}, true
	}
	obj, err := s.decodeShared(r, ev.KV, lite)
	if err != nil {
		s.log.Error("registry: watch: undecodable object", "key", ev.KV.Key, "err", err)
		return WatchEvent{}, false
	}
	in := sel.Matches(r, obj)
	switch {
	case in && prevIn:
		return WatchEvent{Type: watch.Modified, Object: obj}, true
	case in:
		return WatchEvent{Type: watch.Added, Object: obj}, true
	case prevIn:
		return WatchEvent{Type: watch.Deleted, Object: obj}, true
	}
	return WatchEvent{}, false
}

// bookmark is an empty object of r carrying only a resourceVersion.
func (s *Store) bookmark(r *Resource, rev int64) runtime.Object {
	obj := r.New()
	m, _ := meta.Accessor(obj)
	m.SetResourceVersion(strconv.FormatInt(rev, 10))
	obj.GetObjectKind().SetGroupVersionKind(r.GVK())
	return obj
}
