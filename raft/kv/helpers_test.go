package kv

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"
)

// quietOptions returns options with a discarding logger.
func quietOptions() Options {
	return Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func put(key, value string, ifModRev int64) Op {
	return Op{Type: OpPut, Key: key, Value: []byte(value), IfModRev: ifModRev}
}

func del(key string, ifModRev int64) Op {
	return Op{Type: OpDelete, Key: key, IfModRev: ifModRev}
}

func txn(id uint64, ops ...Op) []byte {
	r := Request{ID: id, Ops: ops}
	return r.Marshal()
}

// mustApply applies ops without dedup and fails the test if the txn fails.
func mustApply(t testing.TB, s *Store, ops ...Op) Result {
	t.Helper()
	res := s.Apply(txn(0, ops...))
	if !res.Succeeded {
		t.Fatalf("apply %v: failed: %+v", ops, res)
	}
	return res
}

func mustGet(t testing.TB, s *Store, key string) KeyValue {
	t.Helper()
	kv, ok, _ := s.Get(key)
	if !ok {
		t.Fatalf("get %q: absent", key)
	}
	return kv
}

func mustSnapshot(t testing.TB, s *Store) []byte {
	t.Helper()
	b, err := s.Snapshot()
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return b
}

const waitTimeout = 10 * time.Second

// recvBatch waits for the next batch; it fails if C closes or nothing comes.
func recvBatch(t testing.TB, w *Watcher) []Event {
	t.Helper()
	select {
	case b, ok := <-w.C():
		if !ok {
			t.Fatalf("watcher closed: %v", w.Err())
		}
		return b
	case <-time.After(waitTimeout):
		t.Fatalf("no batch within %v", waitTimeout)
	}
	return nil
}

// drain reads batches until C closes and returns them with Err.
func drain(t testing.TB, w *Watcher) ([][]Event, error) {
	t.Helper()
	var out [][]Event
	deadline := time.After(waitTimeout)
	for {
		select {
		case b, ok := <-w.C():
			if !ok {
				return out, w.Err()
			}
			out = append(out, b)
		case <-deadline:
			t.Fatalf("watcher did not end within %v", waitTimeout)
		}
	}
}

// expectQuiet asserts that no batch is pending right now (the watcher
// goroutine gets a moment via a context deadline, not a sleep).
func expectQuiet(t testing.TB, w *Watcher) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	select {
	case b, ok := <-w.C():
		t.Fatalf("unexpected batch %v (open %v)", b, ok)
	case <-ctx.Done():
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(waitTimeout)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

func watcherCount(s *Store) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.watchers)
}
