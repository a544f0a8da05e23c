package scheduler

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func withPriority(p int32) func(*corev1.Pod) {
	return func(pod *corev1.Pod) { pod.Spec.Priority = &p }
}

// drain pops every active pod and returns their names in order.
func drain(q *queue) []string {
	var out []string
	for qp := q.pop(); qp != nil; qp = q.pop() {
		out = append(out, qp.pod.Name)
	}
	return out
}

func TestQueueOrder(t *testing.T) {
	q := newQueue(time.Second, 10*time.Second, 5*time.Minute)
	now := time.Now()
	for _, p := range []*corev1.Pod{testPod("a"), testPod("b", withPriority(100)), testPod("c"), testPod("d", withPriority(100)), testPod("e", withPriority(-5))} {
		q.add(p, now)
	}
	q.remove("default/c")
	if got, want := drain(q), []string{"b", "d", "a", "e"}; !slices.Equal(got, want) {
		t.Errorf("popped %v, want %v (priority, then arrival)", got, want)
	}
}

func TestQueueBackoff(t *testing.T) {
	q := newQueue(time.Second, 10*time.Second, 5*time.Minute)
	for attempts, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second, 5: 10 * time.Second, 50: 10 * time.Second} {
		if got := q.backoff(attempts); got != want {
			t.Errorf("backoff after %d attempts: %v, want %v", attempts, got, want)
		}
	}

	start := time.Now()
	q.add(testPod("error"), start)
	q.add(testPod("unschedulable"), start)
	errPod, unsched := q.pop(), q.pop()
	q.requeue(errPod, false, start)
	q.requeue(unsched, true, start)
	if q.hasActive() {
		t.Fatal("a failed pod is active at once")
	}

	// A change of the cluster within the backoff: the unschedulable pod
	// waits out its backoff; a failed one was waiting for it anyway.
	q.moveAll(start.Add(500 * time.Millisecond))
	q.flush(start.Add(900 * time.Millisecond))
	if q.hasActive() {
		t.Fatal("a pod is active before its backoff is over")
	}
	q.flush(start.Add(time.Second))
	if got := drain(q); !slices.Equal(got, []string{"error", "unschedulable"}) {
		t.Fatalf("after the backoff: %v active, want both", got)
	}

	// Without a change, an unschedulable pod waits for one; a change after
	// the backoff moves it at once.
	q.requeue(unsched, true, start.Add(2*time.Second)) // second attempt: 2 s backoff
	q.flush(start.Add(time.Minute))
	if q.hasActive() {
		t.Fatal("an unschedulable pod was retried without a change of the cluster")
	}
	q.moveAll(start.Add(time.Minute))
	if got := drain(q); !slices.Equal(got, []string{"unschedulable"}) {
		t.Fatalf("after a change: %v active", got)
	}

	// At the latest, it is retried after maxUnschedulable.
	q.requeue(unsched, true, start)
	q.flush(start.Add(5*time.Minute - time.Second))
	if q.hasActive() {
		t.Fatal("retried before maxUnschedulable")
	}
	q.flush(start.Add(5 * time.Minute))
	if got := drain(q); !slices.Equal(got, []string{"unschedulable"}) {
		t.Fatalf("after maxUnschedulable: %v active", got)
	}
}

func TestQueueUpdate(t *testing.T) {
	q := newQueue(time.Second, 10*time.Second, 5*time.Minute)
	start := time.Now()
	q.add(testPod("p"), start)
	qp := q.pop()
	q.requeue(qp, true, start)

	// A status change (the scheduler's own condition) leaves it waiting.
	changed := testPod("p")
	changed.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse}}
	q.add(changed, start.Add(2*time.Second))
	if q.hasActive() {
		t.Fatal("a status change made an unschedulable pod active")
	}
	// A spec change (a toleration added) may let it fit.
	tolerating := testPod("p", tolerate(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists}))
	q.add(tolerating, start.Add(2*time.Second))
	got := q.pop()
	if got == nil || len(got.pod.Spec.Tolerations) != 1 {
		t.Fatalf("after a spec change: popped %v, want the updated pod", got)
	}
	if a, b, u := q.counts(); a+b+u != 0 {
		t.Errorf("queue holds %d/%d/%d pods after the last was popped", a, b, u)
	}
}
