package kit

import (
	"sync"
	"time"
)

// Queue is a controller's queue of object keys (namespace/name): a key
// queued while waiting is queued once; a key being worked on is handed out
// again only after Done, if it was queued meanwhile, so no two workers sync
// the same object at once. Failed keys come back after a doubling backoff.
type Queue struct {
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

// NewQueue returns a queue whose failed keys come back after retryBase,
// doubled at each failure up to retryMax.
func NewQueue(retryBase, retryMax time.Duration) *Queue {
	q := &Queue{dirty: map[string]bool{}, processing: map[string]bool{}, timers: map[string]queueTimer{}, failures: map[string]int{},
		retryBase: retryBase, retryMax: retryMax}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// Add queues key.
func (q *Queue) Add(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addLocked(key)
}

func (q *Queue) addLocked(key string) {
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

// AddAfter queues key after d (the earliest of several such requests).
func (q *Queue) AddAfter(key string, d time.Duration) {
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

// Retry queues key again after a backoff that doubles with each failure,
// and returns the backoff.
func (q *Queue) Retry(key string) time.Duration {
	q.mu.Lock()
	n := q.failures[key]
	q.failures[key] = n + 1
	q.mu.Unlock()
	d := q.retryMax
	if n < 20 {
		d = min(q.retryBase<<n, q.retryMax)
	}
	q.AddAfter(key, d)
	return d
}

// Forget clears key's failures: its next retry waits retryBase again.
func (q *Queue) Forget(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.failures, key)
}

// Get waits for a key; false once the queue is shut down.
func (q *Queue) Get() (string, bool) {
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

// Done ends the work on key (handed out by Get); key is queued again if
// it was added meanwhile.
func (q *Queue) Done(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.processing, key)
	if q.dirty[key] && !q.closed {
		q.items = append(q.items, key)
		q.cond.Signal()
	}
}

// ShutDown stops the queue: Get returns false from now on.
func (q *Queue) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for _, t := range q.timers {
		t.t.Stop()
	}
	clear(q.timers)
	q.cond.Broadcast()
}
