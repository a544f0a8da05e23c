package controllers

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/registry"
)

// The two halves of most controllers' Run: an event loop that follows
// registry watches and queues keys (watchLoop), and workers that sync the
// queued keys (runWorkers).

// watchRetry is how long a watch that failed to open waits before it is
// opened again.
const watchRetry = time.Second

// runWorkers runs n workers that hand the keys of q to work, one worker
// per key at a time, until ctx ends; it then shuts q down and waits for
// them.
func runWorkers(ctx context.Context, n int, q *workQueue, work func(key string)) {
	stop := context.AfterFunc(ctx, q.shutdown)
	defer stop()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for {
				key, ok := q.get()
				if !ok {
					return
				}
				work(key)
				q.done(key)
			}
		})
	}
	wg.Wait()
}

// watchLoop is a controller's event loop: it follows registry watches,
// each opened again whenever it ends, and hands their events to their
// handlers one at a time, so that the handlers share the loop's state
// without locks.
type watchLoop struct {
	store *registry.Store
	log   *slog.Logger
	// name starts the loop's log messages ("replicaset controller").
	name string
	// resync, if set, is called every resyncEvery.
	resync      func()
	resyncEvery time.Duration
}

// watchSpec is one watch of a watchLoop.
type watchSpec struct {
	res *registry.Resource
	// changesOnly starts each watch at the store's current revision;
	// otherwise it first sends every current object as ADDED.
	changesOnly bool
	// opened, if set, is called before the first event of each watch
	// opened: state kept from the watch before may be stale by then.
	opened func()
	handle func(registry.WatchEvent)
}

// watchOf is a watchSpec whose handler gets the T objects of res; other
// events (an ERROR event, after which the watch ends) are dropped.
func watchOf[T runtime.Object](res *registry.Resource, opened func(), handle func(watch.EventType, T)) watchSpec {
	return watchSpec{res: res, opened: opened, handle: func(ev registry.WatchEvent) {
		if obj, ok := ev.Object.(T); ok {
			handle(ev.Type, obj)
		}
	}}
}

// loopEvent is an event of one of a loop's watches, or, with opened, the
// news that the watch was opened (again).
type loopEvent struct {
	w      *watchSpec
	ev     registry.WatchEvent
	opened bool
}

// run follows ws until ctx ends.
func (l *watchLoop) run(ctx context.Context, ws ...watchSpec) {
	events := make(chan loopEvent)
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range ws {
		wg.Go(func() { l.follow(ctx, &ws[i], events) })
	}
	var tick <-chan time.Time
	if l.resync != nil {
		t := time.NewTicker(l.resyncEvery)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			l.resync()
		case e := <-events:
			switch {
			case !e.opened:
				e.w.handle(e.ev)
			case e.w.opened != nil:
				e.w.opened()
			}
		}
	}
}

// follow opens w, and again whenever it ends, until ctx ends, and sends
// its events to out, each watch's preceded by the news it was opened.
func (l *watchLoop) follow(ctx context.Context, w *watchSpec, out chan<- loopEvent) {
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
		if w.changesOnly {
			opts.ResourceVersion = strconv.FormatInt(l.store.Node().KV().Revision(), 10)
		}
		events, err := l.store.Watch(ctx, w.res, "", opts)
		if err != nil {
			l.log.Warn(l.name+": watch failed; retrying", "resource", w.res.String(), "err", err)
			sleep(ctx, watchRetry)
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
