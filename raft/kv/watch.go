package kv

import (
	"context"
	"fmt"
	"sync"
)

// historyScanChunk bounds how many history events a catching-up watcher
// scans per read lock, so a far-behind watcher never holds up Apply long.
const historyScanChunk = 1024

// Watcher delivers the events under a prefix, one batch per revision, in
// revision order, on C. When C is closed, Err tells why.
//
// A Watcher is either live (Apply queues matching batches for it, up to
// Options.WatchBuffer) or catching up (it reads the event history from the
// first revision it still owes). It starts catching up when it starts in the
// past or its queue overflows, and turns live again once it has read up to
// the current revision. Apply never waits for a watcher.
type Watcher struct {
	s      *Store
	prefix string
	ctx    context.Context
	c      chan []Event
	wake   chan struct{} // capacity 1: something new to deliver
	stop   chan struct{} // closed when the store ends the watcher

	mu         sync.Mutex
	slot       int       // index in Store.watchers; -1 once unregistered
	minRev     int64     // live: queue only revisions >= minRev
	pending    [][]Event // live: queued batches, oldest first
	catchingUp bool
	inflight   int   // batches taken from the queue or history, not yet received
	from       int64 // catching up: first revision still owed
	stopErr    error // set with stop
	err        error // final error, set before c is closed
}

// C returns the channel of event batches. Each batch holds the events of
// one revision that match the prefix (in op order); revisions increase
// strictly. Batches may be shared with other watchers: read-only. The
// channel is closed when the watcher ends; until then the watcher holds a
// goroutine, so cancel its context when done.
func (w *Watcher) C() <-chan []Event { return w.c }

// Err returns why the watcher ended once C is closed (nil before): the
// context's error, or ErrCompacted if the watcher fell behind the history or
// the store was restored from a snapshot.
func (w *Watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Watch returns a watcher for the events with revision > afterRev on keys
// that start with prefix. It fails with ErrCompacted if afterRev <
// CompactRevision; afterRev may lie in the future. The watcher ends when ctx
// is done.
func (s *Store) Watch(ctx context.Context, prefix string, afterRev int64) (*Watcher, error) {
	if afterRev < 0 {
		return nil, fmt.Errorf("kv: watch %q: negative revision %d", prefix, afterRev)
	}
	w := &Watcher{
		s:      s,
		prefix: prefix,
		ctx:    ctx,
		c:      make(chan []Event),
		wake:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		minRev: afterRev + 1,
	}
	s.mu.Lock()
	if afterRev < s.hist.compactRev {
		compact := s.hist.compactRev
		s.mu.Unlock()
		return nil, fmt.Errorf("kv: watch %q after revision %d: history starts after revision %d: %w", prefix, afterRev, compact, ErrCompacted)
	}
	if afterRev < s.rev {
		w.catchingUp = true
		w.from = afterRev + 1
	}
	w.slot = len(s.watchers)
	s.watchers = append(s.watchers, w)
	s.mu.Unlock()
	go w.run()
	return w, nil
}

// notifyLocked queues the events of revision rev for every live watcher
// they concern. Called by Apply with s.mu held for writing; never blocks.
func (s *Store) notifyLocked(rev int64, evs []Event) {
	for _, w := range s.watchers {
		batch := filterEvents(evs, w.prefix)
		if len(batch) == 0 {
			continue
		}
		w.mu.Lock()
		if !w.catchingUp && rev >= w.minRev {
			if len(w.pending) < s.opts.WatchBuffer {
				w.pending = append(w.pending, batch)
			} else {
				// Overflow: drop the queue and read from the history,
				// starting with the oldest revision not handed over yet.
				w.catchingUp = true
				w.from = w.pending[0][0].KV.ModRevision
				w.pending = nil
			}
		}
		w.mu.Unlock()
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// filterEvents returns the events under prefix, sharing evs when all match.
func filterEvents(evs []Event, prefix string) []Event {
	n := 0
	for i := range evs {
		if hasPrefix(evs[i].KV.Key, prefix) {
			n++
		}
	}
	if n == len(evs) || n == 0 {
		return evs[:n]
	}
	out := make([]Event, 0, n)
	for i := range evs {
		if hasPrefix(evs[i].KV.Key, prefix) {
			out = append(out, evs[i])
		}
	}
	return out
}

// run is the watcher's delivery goroutine.
func (w *Watcher) run() {
	err := w.loop()
	w.s.unregister(w)
	w.mu.Lock()
	w.err = err
	w.mu.Unlock()
	close(w.c)
}

func (w *Watcher) loop() error {
	for {
		batches, err := w.next()
		if err != nil {
			return err
		}
		if batches == nil {
			select {
			case <-w.wake:
				continue
			case <-w.stop:
				return w.stopError()
			case <-w.ctx.Done():
				return w.ctx.Err()
			}
		}
		for _, b := range batches {
			select {
			case w.c <- b:
				w.mu.Lock()
				w.inflight--
				w.mu.Unlock()
			case <-w.stop:
				return w.stopError()
			case <-w.ctx.Done():
				return w.ctx.Err()
			}
		}
	}
}

// next takes the queued batches, or reads the next chunk of history when
// catching up. nil, nil means nothing to deliver yet.
func (w *Watcher) next() ([][]Event, error) {
	w.mu.Lock()
	if w.stopErr != nil {
		w.mu.Unlock()
		return nil, w.stopErr
	}
	if !w.catchingUp {
		b := w.pending
		w.pending = nil
		w.inflight = len(b) // taken in the same critical section: Progress never misses them
		w.mu.Unlock()
		return b, nil
	}
	w.mu.Unlock()
	return w.readHistory()
}

// readHistory reads one chunk of history for a catching-up watcher. Holding
// the store's read lock makes the switch back to live atomic with respect
// to Apply: every revision up to s.rev comes from the history, every later
// one is queued by Apply.
func (w *Watcher) readHistory() ([][]Event, error) {
	s := w.s
	s.mu.RLock()
	defer s.mu.RUnlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopErr != nil {
		return nil, w.stopErr
	}
	if w.from-1 < s.hist.compactRev {
		return nil, fmt.Errorf("kv: watch %q: fell behind: needs revision %d, history starts after %d: %w", w.prefix, w.from, s.hist.compactRev, ErrCompacted)
	}
	batches, through, end := s.hist.read(w.from, w.prefix, historyScanChunk)
	if end {
		w.catchingUp = false
		if w.minRev <= s.rev {
			w.minRev = s.rev + 1
		}
	} else {
		w.from = through + 1
	}
	if batches == nil {
		batches = [][]Event{} // non-nil: go round again, not to sleep
		if end {
			batches = nil
		}
	}
	w.inflight = len(batches)
	return batches, nil
}

// Progress returns a revision through which the reader has received every
// matching event, and whether that is known now: it is not while the
// watcher is catching up or has batches not yet received. An API server
// uses it for bookmarks, which let a client resume after a quiet spell.
func (w *Watcher) Progress() (int64, bool) {
	s := w.s
	s.mu.RLock()
	defer s.mu.RUnlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.catchingUp || len(w.pending) > 0 || w.inflight > 0 || w.stopErr != nil {
		return 0, false
	}
	return max(s.rev, w.minRev-1), true
}

func (w *Watcher) stopError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopErr
}

func (s *Store) unregister(w *Watcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.mu.Lock()
	i := w.slot
	w.slot = -1
	w.mu.Unlock()
	if i < 0 {
		return
	}
	last := len(s.watchers) - 1
	moved := s.watchers[last]
	s.watchers[i] = moved
	s.watchers[last] = nil
	s.watchers = s.watchers[:last]
	if moved != w {
		moved.mu.Lock()
		moved.slot = i
		moved.mu.Unlock()
	}
}

// endWatchersLocked ends every watcher with err (Restore). s.mu is held for
// writing.
func (s *Store) endWatchersLocked(err error) {
	for _, w := range s.watchers {
		w.mu.Lock()
		w.slot = -1
		w.stopErr = err
		w.pending = nil
		w.mu.Unlock()
		close(w.stop)
	}
	clear(s.watchers)
	s.watchers = s.watchers[:0]
}
