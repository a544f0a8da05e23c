package scheduler

import (
	"container/heap"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// queue holds the pods waiting to be scheduled, as kube-scheduler's
// scheduling queue does:
//   - active pods are tried next, higher priority first, then in the order
//     they arrived;
//   - a pod that failed waits out a backoff (initialBackoff, doubling with
//     each failed attempt up to maxBackoff) before it is tried again;
//   - a pod that fit no node waits as unschedulable until the cluster
//     changes (moveAll: a node added or changed, a pod gone, a volume
//     changed) — still after its backoff — or, at the latest, until it has
//     waited maxUnschedulable; one that waits for other pods (inter-pod
//     affinity, topology spread) also moves when a pod is placed
//     (movePodWaiters).
//
// It is used by the scheduler's loop only: no locks.
type queue struct {
	pods             map[string]*queuedPod
	active           activeHeap
	initialBackoff   time.Duration
	maxBackoff       time.Duration
	maxUnschedulable time.Duration
	seq              uint64 // arrival order
	// waiters are the unschedulable pods that a pod placed may let fit.
	waiters map[string]*queuedPod
}

// queuedPod is a pod waiting in the queue.
type queuedPod struct {
	pod      *corev1.Pod
	key      string
	state    queueState
	seq      uint64
	attempts int
	// waitsForPods: it was unschedulable for want of other pods somewhere
	// (its inter-pod affinity or topology spread), which a pod placed may
	// change.
	waitsForPods bool
	// since is when the pod entered the queue (for metrics and e2e
	// latency); last is its last attempt, backoffUntil when it may next be
	// tried.
	since, last, backoffUntil time.Time
	index                     int // in the active heap
}

type queueState int

const (
	stateActive queueState = iota
	stateBackoff
	stateUnschedulable
)

func newQueue(initialBackoff, maxBackoff, maxUnschedulable time.Duration) *queue {
	return &queue{pods: map[string]*queuedPod{}, waiters: map[string]*queuedPod{}, initialBackoff: initialBackoff, maxBackoff: maxBackoff, maxUnschedulable: maxUnschedulable}
}

// add queues a new pod, or updates a queued one: an unschedulable pod
// whose spec changed may fit now, and is moved.
func (q *queue) add(pod *corev1.Pod, now time.Time) {
	key := podKey(pod)
	if qp, ok := q.pods[key]; ok {
		specChanged := !equality.Semantic.DeepEqual(qp.pod.Spec, pod.Spec)
		qp.pod = pod
		if qp.state == stateUnschedulable && specChanged {
			q.move(qp, now)
		}
		return
	}
	q.seq++
	qp := &queuedPod{pod: pod, key: key, seq: q.seq, since: now}
	q.pods[key] = qp
	q.activate(qp)
}

// requeue puts back a pod that was popped and failed: unschedulable waits
// for a change of the cluster, otherwise it backs off.
func (q *queue) requeue(qp *queuedPod, unschedulable bool, now time.Time) {
	if _, ok := q.pods[qp.key]; ok {
		return // the pod came back through the watch meanwhile
	}
	q.pods[qp.key] = qp
	qp.attempts++
	qp.last = now
	qp.backoffUntil = now.Add(q.backoff(qp.attempts))
	if unschedulable {
		qp.state = stateUnschedulable
		if qp.waitsForPods {
			q.waiters[qp.key] = qp
		}
	} else {
		qp.state = stateBackoff
	}
}

func (q *queue) backoff(attempts int) time.Duration {
	d := q.initialBackoff
	for i := 1; i < attempts && d < q.maxBackoff; i++ {
		d *= 2
	}
	return min(d, q.maxBackoff)
}

// remove forgets a pod (deleted, bound, or no longer this scheduler's).
func (q *queue) remove(key string) {
	qp, ok := q.pods[key]
	if !ok {
		return
	}
	delete(q.pods, key)
	delete(q.waiters, key)
	if qp.state == stateActive {
		heap.Remove(&q.active, qp.index)
	}
}

// pop takes the next active pod out of the queue; nil if none.
func (q *queue) pop() *queuedPod {
	if len(q.active) == 0 {
		return nil
	}
	qp := heap.Pop(&q.active).(*queuedPod)
	delete(q.pods, qp.key)
	return qp
}

func (q *queue) hasActive() bool { return len(q.active) > 0 }

// moveAll makes every unschedulable pod active again, or backing off if
// its backoff has not passed: the cluster changed.
func (q *queue) moveAll(now time.Time) {
	for _, qp := range q.pods {
		if qp.state == stateUnschedulable {
			q.move(qp, now)
		}
	}
}

// movePodWaiters moves the unschedulable pods that wait for other pods:
// one was placed.
func (q *queue) movePodWaiters(now time.Time) {
	for _, qp := range q.waiters {
		if qp.state == stateUnschedulable {
			q.move(qp, now)
		}
	}
}

func (q *queue) move(qp *queuedPod, now time.Time) {
	delete(q.waiters, qp.key)
	if now.Before(qp.backoffUntil) {
		qp.state = stateBackoff
		return
	}
	q.activate(qp)
}

func (q *queue) activate(qp *queuedPod) {
	qp.state = stateActive
	heap.Push(&q.active, qp)
}

// flush activates the pods whose backoff is over, and the unschedulable
// ones that have waited maxUnschedulable since their last attempt.
func (q *queue) flush(now time.Time) {
	for _, qp := range q.pods {
		switch {
		case qp.state == stateBackoff && !now.Before(qp.backoffUntil):
			q.activate(qp)
		case qp.state == stateUnschedulable && now.Sub(qp.last) >= q.maxUnschedulable:
			q.move(qp, now)
		}
	}
}

// counts returns the pods per state.
func (q *queue) counts() (active, backoff, unschedulable int) {
	for _, qp := range q.pods {
		switch qp.state {
		case stateActive:
			active++
		case stateBackoff:
			backoff++
		case stateUnschedulable:
			unschedulable++
		}
	}
	return active, backoff, unschedulable
}

// activeHeap orders active pods: higher priority first, then arrival.
type activeHeap []*queuedPod

func (h activeHeap) Len() int { return len(h) }
func (h activeHeap) Less(i, j int) bool {
	pi, pj := corev1helpers.PodPriority(h[i].pod), corev1helpers.PodPriority(h[j].pod)
	if pi != pj {
		return pi > pj
	}
	return h[i].seq < h[j].seq
}
func (h activeHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *activeHeap) Push(x any) {
	qp := x.(*queuedPod)
	qp.index = len(*h)
	*h = append(*h, qp)
}
func (h *activeHeap) Pop() any {
	old := *h
	qp := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return qp
}
