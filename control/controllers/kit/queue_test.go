package kit

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestQueue(t *testing.T) {
	q := NewQueue(20*time.Millisecond, time.Minute)
	q.Add("a")
	q.Add("b")
	q.Add("a")
	k, _ := q.Get()
	if k != "a" {
		t.Fatalf("first key %q", k)
	}
	q.Add("a") // while a is worked on: handed out again after done
	k2, _ := q.Get()
	if k2 != "b" {
		t.Fatalf("second key %q, want b (a is being worked on)", k2)
	}
	q.Done("a")
	k3, _ := q.Get()
	if k3 != "a" {
		t.Fatalf("third key %q, want a again", k3)
	}
	q.Done("a")
	q.Done("b")
	q.AddAfter("c", time.Millisecond)
	if k, _ := q.Get(); k != "c" {
		t.Fatalf("delayed key %q", k)
	}
	q.Done("c")
	done := make(chan bool)
	go func() {
		_, ok := q.Get()
		done <- ok
	}()
	q.ShutDown()
	if <-done {
		t.Fatal("get after shutdown handed out a key")
	}
}

func TestQueueRetryDoubles(t *testing.T) {
	q := NewQueue(time.Millisecond, 5*time.Millisecond)
	defer q.ShutDown()
	var got []time.Duration
	for range 5 {
		got = append(got, q.Retry("a"))
	}
	want := []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 5 * time.Millisecond, 5 * time.Millisecond}
	if !slices.Equal(got, want) {
		t.Fatalf("backoffs %v, want %v", got, want)
	}
	q.Forget("a")
	if d := q.Retry("a"); d != time.Millisecond {
		t.Fatalf("backoff after Forget %v, want 1ms", d)
	}
	if k, ok := q.Get(); !ok || k != "a" {
		t.Fatalf("Get: %q, %v", k, ok)
	}
}

// TestRunWorkers: no key is worked on by two workers at once, and
// RunWorkers returns once its context ends.
func TestRunWorkers(t *testing.T) {
	q := NewQueue(time.Millisecond, time.Millisecond)
	ctx, cancel := context.WithCancel(t.Context())
	var mu sync.Mutex
	busy := map[string]bool{}
	worked := map[string]int{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunWorkers(ctx, 4, q, func(key string) {
			mu.Lock()
			if busy[key] {
				t.Errorf("key %s worked on twice at once", key)
			}
			busy[key] = true
			mu.Unlock()
			time.Sleep(time.Millisecond)
			mu.Lock()
			busy[key] = false
			worked[key]++
			mu.Unlock()
		})
	}()
	keys := []string{"a", "b", "c"}
	for i := range 30 {
		q.Add(keys[i%3])
		time.Sleep(200 * time.Microsecond)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(worked)
		mu.Unlock()
		if n == len(keys) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("keys worked on: %v", worked)
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("RunWorkers did not return after its context ended")
	}
}
