package controllers

import (
	"sync"
	"time"
)

// workQueue is a controller's queue of object keys (namespace/name): a key
// queued while waiting is queued once; a key being worked on is handed out
// again only after done, if it was queued meanwhile, so no two workers sync
// the same object at once. Failed keys come back after a doubling backoff.
type workQueue struct {
	mu         sync.Mutex
	cond       *sync.Cond
	items      []string
	dirty      map[string]bool
	processing map[string]bool
	timers     map[string]queueTimer
	failures   map[string]int
	closed     bool
	retryBase  time.Duration
	retryMax   time.Duration
}

type queueTimer struct {
	t  *time.Timer
	at time.Time
}

func newWorkQueue(retryBase, retryMax time.Duration) *workQueue {
	q := &workQueue{dirty: map[string]bool{}, processing: map[string]bool{}, timers: map[string]queueTimer{}, failures: map[string]int{},
		retryBase: retryBase, retryMax: retryMax}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func (q *workQueue) add(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addLocked(key)
}

func (q *workQueue) addLocked(key string) {
	if q.closed || q.dirty[key] {
		return
	}
	q.dirty[key] = true
	if q.processing[key] {
		return
	}
	q.items = append(q.items, key)
	q.cond.Signal()
}

// addAfter queues key after d (the earliest of several such requests).
func (q *workQueue) addAfter(key string, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	at := time.Now().Add(d)
	if old, ok := q.timers[key]; ok {
		if !old.at.After(at) {
			return
		}
		old.t.Stop()
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if cur, ok := q.timers[key]; ok && cur.t == t {
			delete(q.timers, key)
		}
		q.addLocked(key)
	})
	q.timers[key] = queueTimer{t: t, at: at}
}

// retry queues key again after a backoff that doubles with each failure,
// and returns the backoff.
func (q *workQueue) retry(key string) time.Duration {
	q.mu.Lock()
	n := q.failures[key]
	q.failures[key] = n + 1
	q.mu.Unlock()
	d := q.retryMax
	if n < 20 {
		d = min(q.retryBase<<n, q.retryMax)
	}
	q.addAfter(key, d)
	return d
}

func (q *workQueue) forget(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.failures, key)
}

// get waits for a key; false once the queue is shut down.
func (q *workQueue) get() (string, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.items) == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return "", false
	}
	key := q.items[0]
	q.items = q.items[1:]
	q.processing[key] = true
	delete(q.dirty, key)
	return key, true
}

func (q *workQueue) done(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.processing, key)
	if q.dirty[key] && !q.closed {
		q.items = append(q.items, key)
		q.cond.Signal()
	}
}

// shutdown stops the queue: get returns false from now on.
func (q *workQueue) shutdown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for _, t := range q.timers {
		t.t.Stop()
	}
	clear(q.timers)
	q.cond.Broadcast()
}
