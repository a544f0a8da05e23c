package kv

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"reflect"
	"testing"
)

// buildState applies a workload covering every kind of snapshot content:
// keys with several versions, deleted keys, empty values and dedup entries
// for successful (with and without Prev) and failed transactions.
func buildState(t *testing.T, s *Store) {
	t.Helper()
	s.Apply(txn(101, put("/a", "1", 0), put("/b", "", 0)))
	s.Apply(txn(102, put("/a", "2", 1), del("/b", 1), put("/c", "c", -1)))
	s.Apply(txn(103, put("/c", "nope", 0))) // fails, Current = /c
	s.Apply(txn(104))                       // empty txn
	s.Apply(txn(105, del("/zz", -1)))       // delete of an absent key
	s.Apply(txn(0, put("/d", string(make([]byte, 1000)), -1)))
	for _, data := range randomRequests(7, 200) {
		s.Apply(data)
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	src := New(quietOptions())
	buildState(t, src)
	snap := mustSnapshot(t, src)
	if snap[0] != snapshotVersion {
		t.Fatalf("first byte %d, want %d", snap[0], snapshotVersion)
	}

	dst := New(quietOptions())
	mustApply(t, dst, put("/old", "gone after restore", -1))
	if err := dst.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if again := mustSnapshot(t, dst); !bytes.Equal(again, snap) {
		t.Fatalf("re-snapshot differs (%d vs %d bytes)", len(again), len(snap))
	}
	if dst.Revision() != src.Revision() || dst.CompactRevision() != src.Revision() {
		t.Errorf("revision %d compact %d, want %d and %d", dst.Revision(), dst.CompactRevision(), src.Revision(), src.Revision())
	}
	want, _, _ := src.List("", "", 0)
	got, _, _ := dst.List("", "", 0)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("keys differ after restore:\n got %v\nwant %v", got, want)
	}
	if _, ok, _ := dst.Get("/old"); ok {
		t.Error("restore kept a key that is not in the snapshot")
	}
	// Remembered results answer duplicates identically on both stores.
	for _, id := range []uint64{101, 102, 103, 104, 105} {
		data := txn(id, put("/dup", "x", -1))
		if a, b := src.Apply(data), dst.Apply(data); !a.Duplicate || !reflect.DeepEqual(a, b) {
			t.Errorf("id %d: duplicate results differ:\n%+v\n%+v", id, a, b)
		}
	}
	// And both continue identically.
	for _, data := range randomRequests(8, 100) {
		if a, b := src.Apply(data), dst.Apply(data); !reflect.DeepEqual(a, b) {
			t.Fatalf("results differ after restore:\n%+v\n%+v", a, b)
		}
	}
	if !bytes.Equal(mustSnapshot(t, src), mustSnapshot(t, dst)) {
		t.Error("snapshots differ after the same entries")
	}
}

func TestSnapshotEmptyStore(t *testing.T) {
	snap := mustSnapshot(t, New(quietOptions()))
	s := New(quietOptions())
	if err := s.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mustSnapshot(t, s), snap) {
		t.Error("empty snapshot does not round trip")
	}
}

func TestRestoreSmallerDedupLimit(t *testing.T) {
	src := New(quietOptions())
	for id := uint64(1); id <= 10; id++ {
		src.Apply(txn(id, put("k", "v", -1)))
	}
	opts := quietOptions()
	opts.DedupLimit = 4
	dst := New(opts)
	if err := dst.Restore(mustSnapshot(t, src)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		id      uint64
		wantDup bool
	}{{10, true}, {7, true}, {6, false}}
	for _, tt := range tests {
		if res := dst.Apply(txn(tt.id, put("k", "v", -1))); res.Duplicate != tt.wantDup {
			t.Errorf("id %d: Duplicate = %v, want %v", tt.id, res.Duplicate, tt.wantDup)
		}
	}
}

// reseal replaces the CRC trailer so that a test reaches the parser.
func reseal(body []byte) []byte {
	out := append([]byte(nil), body...)
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, castagnoli))
}

func TestRestoreInvalid(t *testing.T) {
	src := New(quietOptions())
	buildState(t, src)
	snap := mustSnapshot(t, src)
	body := snap[:len(snap)-4]

	// A snapshot of two keys, hand-built so fields can be broken one by one.
	mk := func(rev, compact uint64, keys ...[5]any) []byte {
		b := []byte{snapshotVersion}
		b = binary.AppendUvarint(b, rev)
		b = binary.AppendUvarint(b, compact)
		b = binary.AppendUvarint(b, uint64(len(keys)))
		for _, k := range keys {
			b = appendString(b, k[0].(string))
			b = appendString(b, k[1].(string))
			for _, n := range k[2:] {
				b = binary.AppendUvarint(b, uint64(n.(int)))
			}
		}
		b = binary.AppendUvarint(b, 0) // no dedup entries
		return reseal(b)
	}
	good := mk(5, 5, [5]any{"a", "v", 1, 2, 2}, [5]any{"b", "v", 3, 5, 1})
	s := New(quietOptions())
	if err := s.Restore(good); err != nil {
		t.Fatalf("hand-built snapshot rejected: %v", err)
	}

	flipped := append([]byte(nil), snap...)
	flipped[len(flipped)/2] ^= 1
	tests := []struct {
		name string
		data []byte
	}{
		{name: "empty", data: nil},
		{name: "too short", data: []byte{1, 2, 3}},
		{name: "bit flip", data: flipped},
		{name: "truncated", data: snap[:len(snap)-1]},
		{name: "truncated resealed", data: reseal(body[:len(body)-3])},
		{name: "unknown version", data: reseal(append([]byte{2}, body[1:]...))},
		{name: "trailing byte resealed", data: reseal(append(append([]byte(nil), body...), 0))},
		{name: "compact after revision", data: mk(5, 6)},
		{name: "compact before revision", data: mk(5, 4)},
		{name: "keys out of order", data: mk(5, 5, [5]any{"b", "v", 1, 1, 1}, [5]any{"a", "v", 1, 1, 1})},
		{name: "duplicate key", data: mk(5, 5, [5]any{"a", "v", 1, 1, 1}, [5]any{"a", "v", 1, 1, 1})},
		{name: "empty key", data: mk(5, 5, [5]any{"", "v", 1, 1, 1})},
		{name: "mod after store revision", data: mk(5, 5, [5]any{"a", "v", 1, 6, 1})},
		{name: "create after mod", data: mk(5, 5, [5]any{"a", "v", 3, 2, 1})},
		{name: "zero version", data: mk(5, 5, [5]any{"a", "v", 1, 1, 0})},
		{name: "key count beyond input", data: reseal([]byte{snapshotVersion, 5, 5, 0x7f, 0})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := New(quietOptions())
			mustApply(t, dst, put("keep", "me", -1))
			before := mustSnapshot(t, dst)
			err := dst.Restore(tt.data)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Restore error %v, want ErrMalformed", err)
			}
			if after := mustSnapshot(t, dst); !bytes.Equal(before, after) {
				t.Error("failed restore changed the state")
			}
		})
	}
}

func FuzzRestore(f *testing.F) {
	// Seeds and inputs are snapshot bodies without the CRC trailer: the
	// fuzz function appends a valid one so mutations reach the parser.
	body := func(snap []byte) []byte { return snap[:len(snap)-4] }
	s := New(quietOptions())
	f.Add(body(mustSnapshot(f, s)))
	s.Apply(txn(1, put("a", "1", 0), put("b", "2", 0)))
	s.Apply(txn(2, put("a", "x", 0)))
	s.Apply(txn(3, del("a", -1)))
	s.Apply(txn(4, put("b", "3", 1), put("c", "", -1)))
	f.Add(body(mustSnapshot(f, s)))
	f.Fuzz(func(t *testing.T, data []byte) {
		data = reseal(data)
		s := New(quietOptions())
		if err := s.Restore(data); err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		// Whatever is accepted round-trips exactly.
		if got := mustSnapshot(t, s); !bytes.Equal(got, data) {
			t.Fatalf("re-snapshot differs:\n in %x\nout %x", data, got)
		}
	})
}

// A frozen state encodes as the store was when frozen, however much is
// applied afterwards, and encoding may run while the store applies.
func TestFreezeIsPointInTime(t *testing.T) {
	s := New(quietOptions())
	for i := 0; i < 500; i++ {
		mustApply(t, s, put(fmt.Sprintf("k%03d", i), "v", -1))
	}
	want := mustSnapshot(t, s)
	f := s.Freeze()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 500; i++ {
			if res := s.Apply(txn(0, put(fmt.Sprintf("k%03d", i), "changed", -1), del(fmt.Sprintf("k%03d", (i+1)%500), -1))); !res.Succeeded {
				t.Errorf("apply %d: %+v", i, res)
				return
			}
		}
	}()
	got, err := f.Encode()
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the frozen state changed after Freeze")
	}
	if f.Revision() != 500 {
		t.Fatalf("frozen revision %d, want 500", f.Revision())
	}
}
