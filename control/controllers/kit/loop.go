// Package kit is what the controllers share: the watch loop that feeds
// them, the work queue with doubling retries and its workers, a watch-fed
// cache indexed by namespace and owner, the pod-control helpers, and a
// clock tests can move.
package kit

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/registry"
)

// Controller is one reconciler of the controllers' table.
type Controller interface {
	Name() string
	// Run reconciles until ctx ends (when this member stops leading).
	Run(ctx context.Context)
}

// The two halves of most controllers' Run: an event loop that follows
// registry watches and queues keys (Loop), and workers that sync the
// queued keys (RunWorkers).

// watchRetry is how long a watch that failed to open waits before it is
// opened again.
const watchRetry = time.Second

// RunWorkers runs n workers that hand the keys of q to work, one worker
// per key at a time, until ctx ends; it then shuts q down and waits for
// them.
func RunWorkers(ctx context.Context, n int, q *Queue, work func(key string)) {
	stop := context.AfterFunc(ctx, q.ShutDown)
	defer stop()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for {
				key, ok := q.Get()
				if !ok {
					return
				}
				work(key)
				q.Done(key)
			}
		})
	}
	wg.Wait()
}

// Loop is a controller's event loop: it follows registry watches,
// each opened again whenever it ends, and hands their events to their
// handlers one at a time, so that the handlers share the loop's state
// without locks.
type Loop struct {
	Store *registry.Store
	Log   *slog.Logger
	// Name starts the loop's log messages ("replicaset controller").
	Name string
	// Resync, if set, is called every ResyncEvery.
	Resync      func()
	ResyncEvery time.Duration
}

// Watch is one watch of a Loop.
type Watch struct {
	Res *registry.Resource
	// ChangesOnly starts each watch at the store's current revision;
	// otherwise it first sends every current object as ADDED.
	ChangesOnly bool
	// Opened, if set, is called before the first event of each watch
	// opened: state kept from the watch before may be stale by then.
	Opened func()
	Handle func(registry.WatchEvent)
}

// WatchOf is a Watch whose handler gets the T objects of res; other
// events (an ERROR event, after which the watch ends) are dropped.
func WatchOf[T runtime.Object](res *registry.Resource, opened func(), handle func(watch.EventType, T)) Watch {
	return Watch{Res: res, Opened: opened, Handle: func(ev registry.WatchEvent) {
		if obj, ok := ev.Object.(T); ok {
			handle(ev.Type, obj)
		}
	}}
}

// loopEvent is an event of one of a loop's watches, or, with opened, the
// news that the watch was opened (again).
type loopEvent struct {
	w      *Watch
	ev     registry.WatchEvent
	opened bool
}

// Run follows ws until ctx ends.
func (l *Loop) Run(ctx context.Context, ws ...Watch) {
	events := make(chan loopEvent)
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range ws {
		wg.Go(func() { l.follow(ctx, &ws[i], events) })
	}
	var tick <-chan time.Time
	if l.Resync != nil {
		t := time.NewTicker(l.ResyncEvery)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			l.Resync()
		case e := <-events:
			switch {
			case !e.opened:
				e.w.Handle(e.ev)
			case e.w.Opened != nil:
				e.w.Opened()
			}
		}
	}
}

// follow opens w, and again whenever it ends, until ctx ends, and sends
// its events to out, each watch's preceded by the news it was opened.
func (l *Loop) follow(ctx context.Context, w *Watch, out chan<- loopEvent) {
	send := func(e loopEvent) bool {
		select {
		case out <- e:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for ctx.Err() == nil {
		opts := metav1.ListOptions{}
		if w.ChangesOnly {
			opts.ResourceVersion = strconv.FormatInt(l.Store.Revision(), 10)
		}
		events, err := l.Store.Watch(ctx, w.Res, "", opts, registry.WithoutManagedFields())
		if err != nil {
			l.Log.Warn(l.Name+": watch failed; retrying", "resource", w.Res.String(), "err", err)
			Sleep(ctx, watchRetry)
			continue
		}
		if !send(loopEvent{w: w, opened: true}) {
			return
		}
		for ev := range events {
			if !send(loopEvent{w: w, ev: ev}) {
				return
			}
		}
	}
}

// Sleep waits d or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// MustLookup is the served resource gvr; it panics if gvr is not served.
func MustLookup(store *registry.Store, gvr schema.GroupVersionResource) *registry.Resource {
	r, ok := store.Resources().Lookup(gvr)
	if !ok {
		panic("controllers: resource " + gvr.String() + " is not served")
	}
	return r
}
