package kv

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
)

func TestApplyPreconditions(t *testing.T) {
	// Every case starts from: rev 1 put a=1, rev 2 put b=1, rev 3 put a=2.
	// So a: create 1, mod 3, version 2; b: create 2, mod 2, version 1.
	tests := []struct {
		name       string
		ops        []Op
		wantOK     bool
		wantFailed int
		wantRev    int64
		wantPrev   []int64  // ModRevision of Prev per op, 0 = nil (success only)
		wantCur    int64    // ModRevision of Current, 0 = nil (failure only)
		wantKeys   []string // key=value after the txn, "key=" for absent
	}{
		{name: "put new unconditional", ops: []Op{put("c", "1", -1)}, wantOK: true, wantFailed: -1, wantRev: 4, wantPrev: []int64{0}, wantKeys: []string{"c=1"}},
		{name: "put existing unconditional", ops: []Op{put("a", "3", -1)}, wantOK: true, wantFailed: -1, wantRev: 4, wantPrev: []int64{3}, wantKeys: []string{"a=3"}},
		{name: "create absent", ops: []Op{put("c", "1", 0)}, wantOK: true, wantFailed: -1, wantRev: 4, wantPrev: []int64{0}, wantKeys: []string{"c=1"}},
		{name: "create existing fails", ops: []Op{put("a", "x", 0)}, wantFailed: 0, wantRev: 3, wantCur: 3, wantKeys: []string{"a=2"}},
		{name: "update matching mod revision", ops: []Op{put("a", "3", 3)}, wantOK: true, wantFailed: -1, wantRev: 4, wantPrev: []int64{3}, wantKeys: []string{"a=3"}},
		{name: "update stale mod revision fails", ops: []Op{put("a", "x", 1)}, wantFailed: 0, wantRev: 3, wantCur: 3, wantKeys: []string{"a=2"}},
		{name: "update absent fails", ops: []Op{put("c", "x", 2)}, wantFailed: 0, wantRev: 3, wantCur: 0, wantKeys: []string{"c="}},
		{name: "delete matching", ops: []Op{del("b", 2)}, wantOK: true, wantFailed: -1, wantRev: 4, wantPrev: []int64{2}, wantKeys: []string{"b="}},
		{name: "delete stale fails", ops: []Op{del("b", 1)}, wantFailed: 0, wantRev: 3, wantCur: 2, wantKeys: []string{"b=1"}},
		{name: "delete absent unconditional succeeds", ops: []Op{del("c", -1)}, wantOK: true, wantFailed: -1, wantRev: 4, wantPrev: []int64{0}, wantKeys: []string{"c="}},
		{name: "delete absent must-not-exist succeeds", ops: []Op{del("c", 0)}, wantOK: true, wantFailed: -1, wantRev: 4, wantPrev: []int64{0}},
		{name: "empty txn bumps revision", ops: nil, wantOK: true, wantFailed: -1, wantRev: 4, wantKeys: []string{"a=2", "b=1"}},
		{name: "second op fails rolls back first", ops: []Op{put("a", "9", 3), put("b", "9", 1)}, wantFailed: 1, wantRev: 3, wantCur: 2, wantKeys: []string{"a=2", "b=1"}},
		{name: "third op fails rolls back delete", ops: []Op{del("a", -1), put("c", "1", 0), put("c", "2", 0)}, wantFailed: 2, wantRev: 3, wantCur: 0, wantKeys: []string{"a=2", "c="}},
		{name: "multi-key success", ops: []Op{put("a", "3", 3), del("b", 2), put("c", "1", 0)}, wantOK: true, wantFailed: -1, wantRev: 4, wantPrev: []int64{3, 2, 0}, wantKeys: []string{"a=3", "b=", "c=1"}},
		{name: "same key: later op sees earlier op", ops: []Op{put("c", "1", 0), put("c", "2", 4)}, wantOK: true, wantFailed: -1, wantRev: 4, wantPrev: []int64{0, 4}, wantKeys: []string{"c=2"}},
		{name: "same key: create twice fails", ops: []Op{put("c", "1", 0), put("c", "2", 0)}, wantFailed: 1, wantRev: 3, wantCur: 0, wantKeys: []string{"c="}},
		{name: "same key: delete then create", ops: []Op{del("a", 3), put("a", "new", 0)}, wantOK: true, wantFailed: -1, wantRev: 4, wantPrev: []int64{3, 0}, wantKeys: []string{"a=new"}},
		{name: "same key: put then delete", ops: []Op{put("a", "3", -1), del("a", 4)}, wantOK: true, wantFailed: -1, wantRev: 4, wantPrev: []int64{3, 4}, wantKeys: []string{"a="}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(quietOptions())
			mustApply(t, s, put("a", "1", -1))
			mustApply(t, s, put("b", "1", -1))
			mustApply(t, s, put("a", "2", -1))
			before := mustSnapshot(t, s)

			res := s.Apply(txn(0, tt.ops...))
			if res.Succeeded != tt.wantOK || res.FailedOp != tt.wantFailed || res.Revision != tt.wantRev {
				t.Fatalf("result %+v, want succeeded=%v failedOp=%d revision=%d", res, tt.wantOK, tt.wantFailed, tt.wantRev)
			}
			if got := s.Revision(); got != tt.wantRev {
				t.Errorf("Revision() = %d, want %d", got, tt.wantRev)
			}
			if tt.wantOK {
				if len(res.Prev) != len(tt.wantPrev) {
					t.Fatalf("len(Prev) = %d, want %d", len(res.Prev), len(tt.wantPrev))
				}
				for i, want := range tt.wantPrev {
					var got int64
					if res.Prev[i] != nil {
						got = res.Prev[i].ModRevision
					}
					if got != want {
						t.Errorf("Prev[%d].ModRevision = %d, want %d", i, got, want)
					}
				}
				if res.Current != nil {
					t.Errorf("Current = %+v on success", res.Current)
				}
			} else {
				if res.Prev != nil {
					t.Errorf("Prev = %v on failure, want nil", res.Prev)
				}
				var got int64
				if res.Current != nil {
					got = res.Current.ModRevision
					if res.Current.Key != tt.ops[tt.wantFailed].Key {
						t.Errorf("Current.Key = %q, want %q", res.Current.Key, tt.ops[tt.wantFailed].Key)
					}
				}
				if got != tt.wantCur {
					t.Errorf("Current.ModRevision = %d, want %d", got, tt.wantCur)
				}
				if after := mustSnapshot(t, s); !bytes.Equal(before, after) {
					t.Errorf("failed txn changed the state")
				}
			}
			for _, kv := range tt.wantKeys {
				var key, val string
				fmt.Sscanf(kv, "%1s=%s", &key, &val)
				got, ok, _ := s.Get(key)
				switch {
				case val == "" && ok:
					t.Errorf("key %q = %q, want absent", key, got.Value)
				case val != "" && (!ok || string(got.Value) != val):
					t.Errorf("key %q = %q (exists %v), want %q", key, got.Value, ok, val)
				}
			}
		})
	}
}

func TestRevisionsAndVersions(t *testing.T) {
	s := New(quietOptions())
	steps := []struct {
		name                 string
		ops                  []Op
		key                  string
		exists               bool
		create, mod, version int64
	}{
		{name: "create", ops: []Op{put("k", "v1", 0)}, key: "k", exists: true, create: 1, mod: 1, version: 1},
		{name: "other key", ops: []Op{put("z", "v", 0)}, key: "k", exists: true, create: 1, mod: 1, version: 1},
		{name: "update", ops: []Op{put("k", "v2", 1)}, key: "k", exists: true, create: 1, mod: 3, version: 2},
		{name: "update again", ops: []Op{put("k", "v3", -1)}, key: "k", exists: true, create: 1, mod: 4, version: 3},
		{name: "delete", ops: []Op{del("k", 4)}, key: "k", exists: false},
		{name: "recreate resets version", ops: []Op{put("k", "v4", 0)}, key: "k", exists: true, create: 6, mod: 6, version: 1},
		{name: "two puts in one txn", ops: []Op{put("k", "a", -1), put("k", "b", -1)}, key: "k", exists: true, create: 6, mod: 7, version: 3},
	}
	for i, st := range steps {
		res := mustApply(t, s, st.ops...)
		if res.Revision != int64(i+1) {
			t.Fatalf("%s: revision %d, want %d", st.name, res.Revision, i+1)
		}
		kv, ok, rev := s.Get(st.key)
		if rev != int64(i+1) {
			t.Errorf("%s: Get revision %d, want %d", st.name, rev, i+1)
		}
		if ok != st.exists {
			t.Fatalf("%s: exists = %v, want %v", st.name, ok, st.exists)
		}
		if ok && (kv.CreateRevision != st.create || kv.ModRevision != st.mod || kv.Version != st.version) {
			t.Errorf("%s: got create/mod/version %d/%d/%d, want %d/%d/%d", st.name, kv.CreateRevision, kv.ModRevision, kv.Version, st.create, st.mod, st.version)
		}
	}
	if v := mustGet(t, s, "k").Value; string(v) != "b" {
		t.Errorf("final value %q, want %q", v, "b")
	}
}

func TestApplyUndecodable(t *testing.T) {
	valid := txn(7, put("a", "1", -1))
	tests := []struct {
		name string
		data []byte
	}{
		{name: "nil", data: nil},
		{name: "bad version", data: append([]byte{9}, valid[1:]...)},
		{name: "truncated", data: valid[:len(valid)-1]},
		{name: "trailing byte", data: append(append([]byte(nil), valid...), 0)},
		{name: "empty key", data: txn(1, put("", "x", -1))},
		{name: "unknown op type", data: txn(1, Op{Type: 9, Key: "a"})},
		{name: "IfModRev below -1", data: txn(1, put("a", "x", -2))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(quietOptions())
			mustApply(t, s, put("x", "1", -1))
			before := mustSnapshot(t, s)
			res := s.Apply(tt.data)
			want := Result{Revision: 1, FailedOp: -1}
			if !reflect.DeepEqual(res, want) {
				t.Errorf("result %+v, want %+v", res, want)
			}
			if after := mustSnapshot(t, s); !bytes.Equal(before, after) {
				t.Errorf("undecodable entry changed the state")
			}
		})
	}
}

func TestDedup(t *testing.T) {
	t.Run("duplicate returns remembered result", func(t *testing.T) {
		s := New(quietOptions())
		mustApply(t, s, put("a", "old", -1))
		first := s.Apply(txn(42, put("a", "new", 1), put("b", "1", 0)))
		if !first.Succeeded {
			t.Fatalf("first apply failed: %+v", first)
		}
		mustApply(t, s, put("a", "newer", -1))
		before := mustSnapshot(t, s)
		dup := s.Apply(txn(42, put("a", "new", 1), put("b", "1", 0)))
		if !dup.Duplicate || !dup.Succeeded || dup.Revision != first.Revision || dup.FailedOp != -1 {
			t.Fatalf("duplicate result %+v, want remembered %+v", dup, first)
		}
		if len(dup.Prev) != 2 || dup.Prev[1] != nil || dup.Prev[0] == nil {
			t.Fatalf("duplicate Prev %v, want [a@1 nil]", dup.Prev)
		}
		want := *first.Prev[0]
		want.Value = nil
		if !reflect.DeepEqual(*dup.Prev[0], want) {
			t.Errorf("duplicate Prev[0] = %+v, want metadata of %+v", dup.Prev[0], first.Prev[0])
		}
		if after := mustSnapshot(t, s); !bytes.Equal(before, after) {
			t.Errorf("duplicate changed the state")
		}
		if v := mustGet(t, s, "a").Value; string(v) != "newer" {
			t.Errorf("a = %q, want %q (duplicate must not re-apply)", v, "newer")
		}
	})
	t.Run("failed result is remembered", func(t *testing.T) {
		s := New(quietOptions())
		mustApply(t, s, put("a", "1", -1))
		first := s.Apply(txn(5, put("a", "x", 0)))
		if first.Succeeded || first.Current == nil {
			t.Fatalf("first: %+v, want failure with Current", first)
		}
		mustApply(t, s, del("a", -1)) // now the create would succeed
		dup := s.Apply(txn(5, put("a", "x", 0)))
		if !dup.Duplicate || dup.Succeeded || dup.FailedOp != 0 || dup.Revision != first.Revision || dup.Current == nil || dup.Current.ModRevision != first.Current.ModRevision {
			t.Errorf("duplicate %+v, want remembered failure %+v", dup, first)
		}
		if _, ok, _ := s.Get("a"); ok {
			t.Errorf("duplicate of a failed create was applied")
		}
	})
	t.Run("FIFO eviction", func(t *testing.T) {
		opts := quietOptions()
		opts.DedupLimit = 3
		s := New(opts)
		for id := uint64(1); id <= 4; id++ {
			s.Apply(txn(id, put("k", "v", -1)))
		}
		tests := []struct {
			id      uint64
			wantDup bool
		}{{id: 4, wantDup: true}, {id: 3, wantDup: true}, {id: 2, wantDup: true}, {id: 1, wantDup: false}}
		for _, tt := range tests {
			rev := s.Revision()
			res := s.Apply(txn(tt.id, put("k", "v", -1)))
			if res.Duplicate != tt.wantDup {
				t.Errorf("id %d: Duplicate = %v, want %v", tt.id, res.Duplicate, tt.wantDup)
			}
			if !tt.wantDup && res.Revision != rev+1 {
				t.Errorf("id %d: evicted ID not re-applied (revision %d, want %d)", tt.id, res.Revision, rev+1)
			}
		}
		// Re-applying ID 1 evicted ID 2, the oldest.
		if res := s.Apply(txn(2, put("k", "v", -1))); res.Duplicate {
			t.Errorf("id 2 still remembered after eviction")
		}
	})
	t.Run("ID 0 is never deduplicated", func(t *testing.T) {
		s := New(quietOptions())
		for i := int64(1); i <= 3; i++ {
			if res := s.Apply(txn(0, put("k", "v", -1))); res.Duplicate || res.Revision != i {
				t.Errorf("apply %d: %+v", i, res)
			}
		}
	})
}

func TestList(t *testing.T) {
	s := New(quietOptions())
	for _, k := range []string{"/a/1", "/a/2", "/a/3", "/a/30", "/b/1", "/a", "/c"} {
		mustApply(t, s, put(k, "v"+k, -1))
	}
	tests := []struct {
		name          string
		prefix, start string
		limit         int
		want          []string
		wantMore      bool
	}{
		{name: "prefix all", prefix: "/a/", want: []string{"/a/1", "/a/2", "/a/3", "/a/30"}},
		{name: "prefix limit", prefix: "/a/", limit: 2, want: []string{"/a/1", "/a/2"}, wantMore: true},
		{name: "limit equals count", prefix: "/a/", limit: 4, want: []string{"/a/1", "/a/2", "/a/3", "/a/30"}},
		{name: "start inside prefix", prefix: "/a/", start: "/a/3", want: []string{"/a/3", "/a/30"}},
		{name: "start after prefix range", prefix: "/a/", start: "/b", want: nil},
		{name: "start before prefix", prefix: "/b/", start: "/a", want: []string{"/b/1"}},
		{name: "empty prefix", prefix: "", limit: 3, want: []string{"/a", "/a/1", "/a/2"}, wantMore: true},
		{name: "no match", prefix: "/x/", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kvs, more, rev := s.List(tt.prefix, tt.start, tt.limit)
			var got []string
			for _, kv := range kvs {
				got = append(got, kv.Key)
				if string(kv.Value) != "v"+kv.Key {
					t.Errorf("%s: value %q", kv.Key, kv.Value)
				}
			}
			if !reflect.DeepEqual(got, tt.want) || more != tt.wantMore {
				t.Errorf("List = %v more=%v, want %v more=%v", got, more, tt.want, tt.wantMore)
			}
			if rev != 7 {
				t.Errorf("revision %d, want 7", rev)
			}
		})
	}
	t.Run("paging visits every key once", func(t *testing.T) {
		var got []string
		start := ""
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatal("paging does not terminate")
			}
			kvs, more, _ := s.List("/a/", start, 1)
			for _, kv := range kvs {
				got = append(got, kv.Key)
			}
			if !more {
				break
			}
			start = kvs[len(kvs)-1].Key + "\x00"
		}
		want := []string{"/a/1", "/a/2", "/a/3", "/a/30"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("paged %v, want %v", got, want)
		}
	})
}

func TestCount(t *testing.T) {
	s := New(quietOptions())
	for _, k := range []string{"/a/1", "/a/2", "/b/1", "/a"} {
		mustApply(t, s, put(k, "v", -1))
	}
	mustApply(t, s, del("/a/2", -1))
	tests := []struct {
		prefix string
		want   int
	}{{"", 3}, {"/a", 2}, {"/a/", 1}, {"/b/", 1}, {"/c/", 0}}
	for _, tt := range tests {
		t.Run("prefix "+tt.prefix, func(t *testing.T) {
			if got := s.Count(tt.prefix); got != tt.want {
				t.Errorf("Count(%q) = %d, want %d", tt.prefix, got, tt.want)
			}
		})
	}
}

// randomRequests generates a reproducible workload of conditional and
// unconditional ops, retried IDs and multi-op transactions. Conditions are
// drawn from a scratch store so that a fair share of them hold.
func randomRequests(seed uint64, n int) [][]byte {
	r := rand.New(rand.NewPCG(seed, 1))
	scratch := New(quietOptions())
	var out [][]byte
	for i := 0; i < n; i++ {
		if len(out) > 0 && r.IntN(10) == 0 { // retry an earlier request
			out = append(out, out[r.IntN(len(out))])
			scratch.Apply(out[len(out)-1])
			continue
		}
		req := Request{ID: r.Uint64() | 1}
		for j := r.IntN(3) + 1; j > 0; j-- {
			key := fmt.Sprintf("/k/%d", r.IntN(20))
			var cond int64
			switch r.IntN(4) {
			case 0:
				cond = -1
			case 1:
				cond = 0
			case 2:
				cond = r.Int64N(scratch.Revision()+1) + 1
			default:
				kv, _, _ := scratch.Get(key)
				cond = kv.ModRevision
			}
			if r.IntN(3) == 0 {
				req.Ops = append(req.Ops, del(key, cond))
			} else {
				req.Ops = append(req.Ops, put(key, fmt.Sprintf("v%d", r.IntN(1000)), cond))
			}
		}
		out = append(out, req.Marshal())
		scratch.Apply(out[len(out)-1])
	}
	return out
}

func TestApplyDeterministic(t *testing.T) {
	reqs := randomRequests(1, 3000)
	a := New(quietOptions())
	b := New(quietOptions())
	succeeded := 0
	for i, data := range reqs {
		ra, rb := a.Apply(data), b.Apply(data)
		if !reflect.DeepEqual(ra, rb) {
			t.Fatalf("request %d: results differ:\n%+v\n%+v", i, ra, rb)
		}
		if ra.Succeeded {
			succeeded++
		}
		if i == 1500 { // b continues from a snapshot of itself, like a restarted member
			c := New(quietOptions())
			if err := c.Restore(mustSnapshot(t, b)); err != nil {
				t.Fatal(err)
			}
			b = c
		}
	}
	t.Logf("%d of %d requests succeeded", succeeded, len(reqs))
	if succeeded < 100 || succeeded == len(reqs) {
		t.Fatalf("workload not mixed enough: %d of %d succeeded", succeeded, len(reqs))
	}
	if !bytes.Equal(mustSnapshot(t, a), mustSnapshot(t, b)) {
		t.Error("snapshots differ after the same entries")
	}
}

func TestConcurrentReaders(t *testing.T) {
	s := New(quietOptions())
	const writes = 2000
	var wg sync.WaitGroup
	done := make(chan struct{})
	errs := make(chan error, 4)
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				kvs, _, rev := s.List("/p/", "", 0)
				for _, kv := range kvs {
					if kv.ModRevision > rev {
						errs <- fmt.Errorf("key %s mod %d after list revision %d", kv.Key, kv.ModRevision, rev)
						return
					}
				}
				s.Get("/p/1")
				s.Count("/p/")
				s.CompactRevision()
			}
		}()
	}
	for i := 0; i < writes; i++ {
		mustApply(t, s, put(fmt.Sprintf("/p/%d", i%50), "v", -1))
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if s.Revision() != writes {
		t.Errorf("revision %d, want %d", s.Revision(), writes)
	}
}

func TestViewIsPointInTime(t *testing.T) {
	s := New(quietOptions())
	mustApply(t, s, put("/a/1", "x", -1), put("/a/2", "y", -1), put("/b/1", "z", -1))
	v := s.View()
	mustApply(t, s, put("/a/1", "changed", -1), del("/a/2", -1), put("/a/3", "new", -1))
	var got []string
	v.Range("/a/", "", func(kv KeyValue) bool {
		got = append(got, kv.Key+"="+string(kv.Value))
		return true
	})
	if fmt.Sprint(got) != "[/a/1=x /a/2=y]" || v.Revision() != 1 {
		t.Fatalf("view at revision %d shows %v, want [/a/1=x /a/2=y] at 1", v.Revision(), got)
	}
	got = nil
	v.Range("/a/", "/a/2", func(kv KeyValue) bool { got = append(got, kv.Key); return true })
	if fmt.Sprint(got) != "[/a/2]" {
		t.Fatalf("range from /a/2: %v", got)
	}
}
