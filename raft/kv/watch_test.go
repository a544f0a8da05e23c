package kv

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func watch(t *testing.T, s *Store, prefix string, afterRev int64) *Watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := s.Watch(ctx, prefix, afterRev)
	if err != nil {
		t.Fatalf("watch %q after %d: %v", prefix, afterRev, err)
	}
	return w
}

// checkContiguous checks that batches carry strictly increasing revisions
// from first to last with every event of a batch at the batch's revision.
func checkContiguous(t *testing.T, batches [][]Event, first, last int64) {
	t.Helper()
	want := first
	for _, b := range batches {
		if len(b) == 0 {
			t.Fatalf("empty batch")
		}
		rev := b[0].KV.ModRevision
		if rev != want {
			t.Fatalf("batch at revision %d, want %d", rev, want)
		}
		for _, ev := range b {
			if ev.KV.ModRevision != rev {
				t.Fatalf("event at revision %d in batch %d", ev.KV.ModRevision, rev)
			}
		}
		want++
	}
	if want-1 != last {
		t.Fatalf("last revision %d, want %d", want-1, last)
	}
}

func TestWatchOrdering(t *testing.T) {
	s := New(quietOptions())
	w := watch(t, s, "", 0)
	mustApply(t, s, put("a", "1", 0))                   // rev 1
	mustApply(t, s, put("b", "1", 0), put("a", "2", 1)) // rev 2: two events in op order
	if res := s.Apply(txn(0, put("a", "x", 0))); res.Succeeded {
		t.Fatal("create of existing key succeeded")
	}
	mustApply(t, s, del("zz", -1))    // rev 3: no events
	mustApply(t, s, del("a", 2))      // rev 4
	mustApply(t, s, put("a", "3", 0)) // rev 5

	type ev struct {
		typ      EventType
		key, val string
		rev      int64
		version  int64
		prevMod  int64
	}
	want := [][]ev{
		{{EventPut, "a", "1", 1, 1, 0}},
		{{EventPut, "b", "1", 2, 1, 0}, {EventPut, "a", "2", 2, 2, 1}},
		{{EventDelete, "a", "", 4, 0, 2}},
		{{EventPut, "a", "3", 5, 1, 0}},
	}
	for i, wb := range want {
		b := recvBatch(t, w)
		if len(b) != len(wb) {
			t.Fatalf("batch %d: %d events, want %d: %+v", i, len(b), len(wb), b)
		}
		for j, we := range wb {
			got := b[j]
			var prevMod int64
			if got.Prev != nil {
				prevMod = got.Prev.ModRevision
			}
			g := ev{got.Type, got.KV.Key, string(got.KV.Value), got.KV.ModRevision, got.KV.Version, prevMod}
			if g != we {
				t.Errorf("batch %d event %d: %+v, want %+v", i, j, g, we)
			}
		}
	}
	expectQuiet(t, w)
}

func TestWatchPrefix(t *testing.T) {
	tests := []struct {
		name   string
		prefix string
		want   []string // key@rev of every event received
	}{
		{name: "all", prefix: "", want: []string{"/a/1@1", "/b/1@2", "/a/2@3", "/b/2@3", "/a@4"}},
		{name: "a dir", prefix: "/a/", want: []string{"/a/1@1", "/a/2@3"}},
		{name: "a and more", prefix: "/a", want: []string{"/a/1@1", "/a/2@3", "/a@4"}},
		{name: "b dir", prefix: "/b/", want: []string{"/b/1@2", "/b/2@3"}},
		{name: "none", prefix: "/c/", want: nil},
	}
	for _, tt := range tests {
		for _, mode := range []string{"live", "history"} {
			t.Run(tt.name+"/"+mode, func(t *testing.T) {
				s := New(quietOptions())
				var w *Watcher
				if mode == "live" {
					w = watch(t, s, tt.prefix, 0)
				}
				mustApply(t, s, put("/a/1", "v", -1))
				mustApply(t, s, put("/b/1", "v", -1))
				mustApply(t, s, put("/a/2", "v", -1), put("/b/2", "v", -1))
				mustApply(t, s, put("/a", "v", -1))
				if mode == "history" {
					w = watch(t, s, tt.prefix, 0)
				}
				var got []string
				for len(got) < len(tt.want) {
					for _, ev := range recvBatch(t, w) {
						got = append(got, fmt.Sprintf("%s@%d", ev.KV.Key, ev.KV.ModRevision))
					}
				}
				if fmt.Sprint(got) != fmt.Sprint(tt.want) {
					t.Errorf("events %v, want %v", got, tt.want)
				}
				expectQuiet(t, w)
			})
		}
	}
}

func TestWatchStartRevision(t *testing.T) {
	s := New(quietOptions())
	for i := 0; i < 10; i++ {
		mustApply(t, s, put("k", fmt.Sprint(i), -1))
	}
	tests := []struct {
		name     string
		afterRev int64
		first    int64
	}{
		{name: "from the beginning", afterRev: 0, first: 1},
		{name: "in the past", afterRev: 5, first: 6},
		{name: "current revision", afterRev: 10, first: 11},
		{name: "future revision", afterRev: 12, first: 13},
	}
	ws := make([]*Watcher, len(tests))
	for i, tt := range tests {
		ws[i] = watch(t, s, "", tt.afterRev)
	}
	for i := 0; i < 5; i++ {
		mustApply(t, s, put("k", "later", -1))
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for rev := tt.first; rev <= 15; rev++ {
				b := recvBatch(t, ws[i])
				if b[0].KV.ModRevision != rev {
					t.Fatalf("got revision %d, want %d", b[0].KV.ModRevision, rev)
				}
			}
			expectQuiet(t, ws[i])
		})
	}
}

func TestWatchCompacted(t *testing.T) {
	opts := quietOptions()
	opts.HistoryLimit = 5
	s := New(opts)
	for i := 0; i < 20; i++ {
		mustApply(t, s, put("k", "v", -1))
	}
	if got := s.CompactRevision(); got != 15 {
		t.Fatalf("CompactRevision = %d, want 15", got)
	}
	tests := []struct {
		name     string
		afterRev int64
		wantErr  bool
	}{
		{name: "before compaction", afterRev: 3, wantErr: true},
		{name: "just before compact revision", afterRev: 14, wantErr: true},
		{name: "at compact revision", afterRev: 15, wantErr: false},
		{name: "current", afterRev: 20, wantErr: false},
		{name: "negative", afterRev: -1, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			w, err := s.Watch(ctx, "", tt.afterRev)
			if tt.wantErr {
				if err == nil {
					t.Fatal("watch succeeded")
				}
				if tt.afterRev >= 0 && !errors.Is(err, ErrCompacted) {
					t.Fatalf("error %v, want ErrCompacted", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.afterRev < s.Revision() {
				if b := recvBatch(t, w); b[0].KV.ModRevision != tt.afterRev+1 {
					t.Errorf("first batch at %d, want %d", b[0].KV.ModRevision, tt.afterRev+1)
				}
			} else {
				expectQuiet(t, w)
			}
		})
	}
	t.Run("history keeps whole revisions", func(t *testing.T) {
		s := New(opts)
		mustApply(t, s, put("a", "1", -1), put("b", "1", -1), put("c", "1", -1)) // rev 1
		mustApply(t, s, put("a", "1", -1), put("b", "1", -1))                    // rev 2
		mustApply(t, s, put("a", "1", -1))                                       // rev 3: 6 events > 5
		if got := s.CompactRevision(); got != 1 {
			t.Errorf("CompactRevision = %d, want 1", got)
		}
		mustApply(t, s, put("a", "1", -1), put("b", "1", -1), put("c", "1", -1), put("d", "1", -1), put("e", "1", -1), put("f", "1", -1)) // rev 4: larger than the history
		if got := s.CompactRevision(); got != 4 {
			t.Errorf("CompactRevision = %d after an oversized revision, want 4", got)
		}
	})
	t.Run("byte bound", func(t *testing.T) {
		o := quietOptions()
		o.HistoryBytes = 100
		s := New(o)
		for i := 0; i < 10; i++ {
			mustApply(t, s, put("k", string(make([]byte, 29)), -1)) // 30 bytes per event
		}
		if got := s.CompactRevision(); got != 7 {
			t.Errorf("CompactRevision = %d, want 7 (3 events of 30 bytes fit in 100)", got)
		}
	})
}

func TestWatchSlowWatcher(t *testing.T) {
	tests := []struct {
		name         string
		historyLimit int
		wantErr      bool
	}{
		{name: "history covers it", historyLimit: 5000},
		{name: "history too short", historyLimit: 20, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := quietOptions()
			opts.WatchBuffer = 4
			opts.HistoryLimit = tt.historyLimit
			s := New(opts)
			w := watch(t, s, "", 0)
			const n = 2000
			for i := 0; i < n; i++ { // must not block although nobody reads
				mustApply(t, s, put(fmt.Sprintf("k%d", i%7), "v", -1))
			}
			if !tt.wantErr {
				var got [][]Event
				for len(got) < n {
					got = append(got, recvBatch(t, w))
				}
				checkContiguous(t, got, 1, n)
				mustApply(t, s, put("k", "live again", -1))
				if b := recvBatch(t, w); b[0].KV.ModRevision != n+1 {
					t.Errorf("live batch at %d, want %d", b[0].KV.ModRevision, n+1)
				}
				return
			}
			got, err := drain(t, w)
			if !errors.Is(err, ErrCompacted) {
				t.Fatalf("Err = %v, want ErrCompacted", err)
			}
			if len(got) > 0 {
				checkContiguous(t, got, 1, int64(len(got)))
			}
			if len(got) >= n {
				t.Errorf("received all %d revisions although the history was too short", len(got))
			}
		})
	}
}

func TestWatchCancel(t *testing.T) {
	s := New(quietOptions())
	ctx, cancel := context.WithCancel(context.Background())
	w, err := s.Watch(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, s, put("a", "1", -1))
	recvBatch(t, w)
	mustApply(t, s, put("a", "2", -1)) // pending while cancelled
	cancel()
	_, err = drain(t, w)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Err = %v, want context.Canceled", err)
	}
	waitFor(t, "watcher unregistered", func() bool { return watcherCount(s) == 0 })
	mustApply(t, s, put("a", "3", -1)) // no watcher left to notify: must not panic or block
}

func TestWatchRestoreEndsWatchers(t *testing.T) {
	src := New(quietOptions())
	mustApply(t, src, put("a", "1", -1))
	snap := mustSnapshot(t, src)

	s := New(quietOptions())
	w1 := watch(t, s, "", 0)
	w2 := watch(t, s, "/x/", 0)
	mustApply(t, s, put("b", "1", -1))
	if err := s.Restore(snap); err != nil {
		t.Fatal(err)
	}
	for i, w := range []*Watcher{w1, w2} {
		if _, err := drain(t, w); !errors.Is(err, ErrCompacted) {
			t.Errorf("watcher %d: Err = %v, want ErrCompacted", i, err)
		}
	}
	if n := watcherCount(s); n != 0 {
		t.Errorf("%d watchers still registered", n)
	}
	// New watches start at the snapshot revision.
	if _, err := s.Watch(context.Background(), "", 0); !errors.Is(err, ErrCompacted) {
		t.Errorf("watch before snapshot revision: %v, want ErrCompacted", err)
	}
	w := watch(t, s, "", s.Revision())
	mustApply(t, s, put("c", "1", -1))
	if b := recvBatch(t, w); b[0].KV.Key != "c" {
		t.Errorf("got %+v after restore", b)
	}
}

func TestWatchManyWatchersConcurrent(t *testing.T) {
	opts := quietOptions()
	opts.WatchBuffer = 2
	s := New(opts)
	const watchers, writes = 8, 500
	ws := make([]*Watcher, watchers)
	for i := range ws {
		ws[i] = watch(t, s, fmt.Sprintf("/%d/", i%2), 0)
	}
	done := make(chan error, watchers)
	for i, w := range ws {
		go func() {
			want := int64(1 + i%2) // watcher i%2 sees revisions with that parity
			for want <= writes {
				b, ok := <-w.C()
				if !ok {
					done <- fmt.Errorf("watcher %d closed: %v", i, w.Err())
					return
				}
				if b[0].KV.ModRevision != want {
					done <- fmt.Errorf("watcher %d: revision %d, want %d", i, b[0].KV.ModRevision, want)
					return
				}
				want += 2
			}
			done <- nil
		}()
	}
	for i := 1; i <= writes; i++ {
		mustApply(t, s, put(fmt.Sprintf("/%d/k", (i-1)%2), "v", -1))
	}
	for range ws {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

func TestWatchProgress(t *testing.T) {
	s := New(quietOptions())
	mustApply(t, s, put("/a/1", "x", -1))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := s.Watch(ctx, "/a/", 0)
	if err != nil {
		t.Fatal(err)
	}
	// Revision 1 is owed to the reader: progress is not known yet.
	deadline := time.Now().Add(waitTimeout)
	if _, ok := w.Progress(); ok {
		t.Fatal("progress known while revision 1 was not received")
	}
	recvBatch(t, w)
	mustApply(t, s, put("/b/1", "y", -1)) // another prefix moves the store on
	for {
		rev, ok := w.Progress()
		if ok {
			if rev != 2 {
				t.Fatalf("progress %d, want 2", rev)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("progress never became known")
		}
		time.Sleep(time.Millisecond)
	}
	mustApply(t, s, put("/a/2", "z", -1))
	// The batch of revision 3 is queued or in flight until received.
	if rev, ok := w.Progress(); ok && rev >= 3 {
		t.Fatalf("progress %d reported before revision 3 was received", rev)
	}
	if b := recvBatch(t, w); b[0].KV.ModRevision != 3 {
		t.Fatalf("got revision %d, want 3", b[0].KV.ModRevision)
	}
}
