package wal

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name        string
		segmentSize int64
		batches     int
		perBatch    int
		dataSize    int
		minSegments int
	}{
		{name: "one segment", segmentSize: 0, batches: 20, perBatch: 5, dataSize: 100, minSegments: 1},
		{name: "many segments", segmentSize: 1024, batches: 50, perBatch: 3, dataSize: 200, minSegments: 10},
		{name: "segment per batch", segmentSize: 1, batches: 10, perBatch: 1, dataSize: 10, minSegments: 10},
		{name: "empty entries", segmentSize: 512, batches: 30, perBatch: 4, dataSize: 0, minSegments: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{SegmentSize: tc.segmentSize}
			w, st := mustOpen(t, dir, opts)
			if len(st.Entries) != 0 || st.HardState != (raftpb.HardState{}) || st.Snapshot.Index != 0 {
				t.Fatalf("new WAL: got state %+v, want empty", st)
			}
			var want []raftpb.Entry
			var hs raftpb.HardState
			next := uint64(1)
			for b := 0; b < tc.batches; b++ {
				es := ents(next, next+uint64(tc.perBatch)-1, 1, tc.dataSize)
				next += uint64(tc.perBatch)
				hs = raftpb.HardState{Term: 1, Vote: 2, Commit: next - 2}
				// Every other batch unsynced: Close must still make it durable.
				if err := w.Save(hs, es, b%2 == 0); err != nil {
					t.Fatalf("Save batch %d: %v", b, err)
				}
				want = append(want, es...)
			}
			w, st = reopen(t, w, dir, opts)
			if n := len(segmentFiles(t, dir)); n < tc.minSegments {
				t.Errorf("got %d segments, want at least %d", n, tc.minSegments)
			}
			checkEntries(t, st.Entries, want)
			if st.HardState != hs {
				t.Errorf("HardState: got %+v, want %+v", st.HardState, hs)
			}
			// Continue after reopen and reopen once more.
			more := ents(next, next+2, 2, tc.dataSize)
			hs = raftpb.HardState{Term: 2, Vote: 1, Commit: next}
			mustSave(t, w, hs, more)
			want = append(want, more...)
			_, st = reopen(t, w, dir, opts)
			checkEntries(t, st.Entries, want)
			if st.HardState != hs {
				t.Errorf("HardState after second reopen: got %+v, want %+v", st.HardState, hs)
			}
		})
	}
}

func TestConflictResolution(t *testing.T) {
	type save struct {
		lo, hi, term uint64
		snap         uint64 // if non-zero, save a snapshot marker at this index (term 1) instead
	}
	tests := []struct {
		name        string
		segmentSize int64
		saves       []save
		wantLo      uint64 // expected entries: lo..hi with the term of the last write of each index
		wantHi      uint64
		wantSnap    uint64
	}{
		{name: "overwrite tail", saves: []save{{lo: 1, hi: 10, term: 1}, {lo: 5, hi: 7, term: 2}}, wantLo: 1, wantHi: 7},
		{name: "overwrite from the first", saves: []save{{lo: 1, hi: 10, term: 1}, {lo: 1, hi: 3, term: 2}}, wantLo: 1, wantHi: 3},
		{name: "overwrite last only", saves: []save{{lo: 1, hi: 10, term: 1}, {lo: 10, hi: 12, term: 3}}, wantLo: 1, wantHi: 12},
		{name: "repeated overwrites", saves: []save{{lo: 1, hi: 10, term: 1}, {lo: 8, hi: 15, term: 2}, {lo: 9, hi: 9, term: 3}, {lo: 10, hi: 11, term: 4}}, wantLo: 1, wantHi: 11},
		{name: "across segments", segmentSize: 300, saves: []save{{lo: 1, hi: 30, term: 1}, {lo: 4, hi: 6, term: 2}, {lo: 7, hi: 20, term: 3}}, wantLo: 1, wantHi: 20},
		{name: "after snapshot marker", saves: []save{{lo: 1, hi: 10, term: 1}, {snap: 5}, {lo: 8, hi: 9, term: 2}}, wantLo: 6, wantHi: 9, wantSnap: 5},
		{name: "snapshot beyond log", saves: []save{{lo: 1, hi: 10, term: 1}, {snap: 20}, {lo: 21, hi: 22, term: 2}}, wantLo: 21, wantHi: 22, wantSnap: 20},
		{name: "snapshot covers all", saves: []save{{lo: 1, hi: 10, term: 1}, {snap: 10}}, wantLo: 11, wantHi: 10, wantSnap: 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{SegmentSize: tc.segmentSize}
			w, _ := mustOpen(t, dir, opts)
			termOf := map[uint64]uint64{}
			for _, s := range tc.saves {
				if s.snap != 0 {
					if err := w.SaveSnapshot(raftpb.SnapshotMetadata{Index: s.snap, Term: 1}); err != nil {
						t.Fatal(err)
					}
					continue
				}
				mustSave(t, w, raftpb.HardState{Term: s.term, Commit: 1}, ents(s.lo, s.hi, s.term, 20))
				for i := s.lo; i <= s.hi; i++ {
					termOf[i] = s.term
				}
			}
			var want []raftpb.Entry
			for i := tc.wantLo; i <= tc.wantHi; i++ {
				want = append(want, ents(i, i, termOf[i], 20)...)
			}
			_, st := reopen(t, w, dir, opts)
			checkEntries(t, st.Entries, want)
			if st.Snapshot.Index != tc.wantSnap {
				t.Errorf("snapshot index: got %d, want %d", st.Snapshot.Index, tc.wantSnap)
			}
		})
	}
}

func TestSnapshotMarkerRoundTrip(t *testing.T) {
	dir := t.TempDir()
	w, _ := mustOpen(t, dir, Options{})
	meta := raftpb.SnapshotMetadata{Index: 7, Term: 3, ConfState: raftpb.ConfState{Voters: []uint64{1, 2, 3}, Learners: []uint64{4}}}
	if err := w.SaveSnapshot(meta); err != nil {
		t.Fatal(err)
	}
	if err := w.SaveSnapshot(raftpb.SnapshotMetadata{Index: 6, Term: 3}); err == nil {
		t.Error("SaveSnapshot with an older index succeeded, want an error")
	}
	_, st := reopen(t, w, dir, Options{})
	if st.Snapshot.Index != 7 || st.Snapshot.Term != 3 || !slices.Equal(st.Snapshot.ConfState.Voters, []uint64{1, 2, 3}) ||
		!slices.Equal(st.Snapshot.ConfState.Learners, []uint64{4}) {
		t.Errorf("snapshot: got %+v, want %+v", st.Snapshot, meta)
	}
}

func TestEmptySaveWritesNothing(t *testing.T) {
	dir := t.TempDir()
	w, _ := mustOpen(t, dir, Options{})
	t.Cleanup(func() { w.Close() })
	path := filepath.Join(dir, segmentFiles(t, dir)[0])
	before := fileSize(t, path)
	for _, sync := range []bool{false, true} {
		if err := w.Save(raftpb.HardState{}, nil, sync); err != nil {
			t.Fatal(err)
		}
	}
	if after := fileSize(t, path); after != before {
		t.Errorf("empty Save changed the segment size from %d to %d", before, after)
	}
}

func TestRecordsAreAligned(t *testing.T) {
	dir := t.TempDir()
	w, _ := mustOpen(t, dir, Options{})
	path := filepath.Join(dir, segmentFiles(t, dir)[0])
	for i := uint64(1); i <= 20; i++ {
		// Data sizes 0..19 exercise every padding length.
		mustSave(t, w, raftpb.HardState{Term: 1, Commit: i}, ents(i, i, 1, int(i-1)))
		if size := fileSize(t, path); size%8 != 0 {
			t.Fatalf("segment size %d after entry %d is not a multiple of 8", size, i)
		}
	}
	mustClose(t, w)
	for _, off := range recordOffsets(t, path) {
		if off%8 != 0 {
			t.Errorf("record at unaligned offset %d", off)
		}
	}
}

func TestSaveRejectsGap(t *testing.T) {
	tests := []struct {
		name  string
		first []raftpb.Entry
		next  []raftpb.Entry
	}{
		{name: "gap between saves", first: ents(1, 5, 1, 8), next: ents(7, 8, 1, 8)},
		{name: "gap inside a batch", first: ents(1, 5, 1, 8), next: append(ents(6, 6, 1, 8), ents(8, 8, 1, 8)...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			w, _ := mustOpen(t, dir, Options{})
			mustSave(t, w, raftpb.HardState{}, tc.first)
			if err := w.Save(raftpb.HardState{}, tc.next, true); err == nil || errors.Is(err, ErrFailed) {
				t.Fatalf("Save with a gap: got %v, want a validation error", err)
			}
			// A rejected Save does not break the WAL.
			mustSave(t, w, raftpb.HardState{}, ents(6, 6, 1, 8))
			_, st := reopen(t, w, dir, Options{})
			checkEntries(t, st.Entries, ents(1, 6, 1, 8))
		})
	}
}

func TestReleaseTo(t *testing.T) {
	// 40 entries of 100 bytes in segments of ~512 bytes, with snapshot
	// markers at 10, 20 and 30.
	setup := func(t *testing.T) (string, *WAL) {
		dir := t.TempDir()
		w, _ := mustOpen(t, dir, Options{SegmentSize: 512})
		for i := uint64(1); i <= 40; i++ {
			mustSave(t, w, raftpb.HardState{Term: 1, Commit: i}, ents(i, i, 1, 100))
			if i%10 == 0 && i < 40 {
				if err := w.SaveSnapshot(raftpb.SnapshotMetadata{Index: i, Term: 1}); err != nil {
					t.Fatal(err)
				}
			}
		}
		return dir, w
	}
	tests := []struct {
		name     string
		index    uint64
		wantSnap uint64 // newest marker <= index (0: none, nothing removed)
	}{
		{name: "below first marker", index: 5, wantSnap: 0},
		{name: "at marker", index: 10, wantSnap: 10},
		{name: "between markers", index: 25, wantSnap: 20},
		{name: "beyond last marker", index: 1000, wantSnap: 30},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, w := setup(t)
			before := segmentFiles(t, dir)
			if err := w.ReleaseTo(tc.index); err != nil {
				t.Fatal(err)
			}
			after := segmentFiles(t, dir)
			// Expected: drop every segment before the newest one whose first
			// index is <= wantSnap+1.
			keep := 0
			for i, name := range before {
				s, _ := parseSegmentName(name)
				if s.first <= tc.wantSnap+1 {
					keep = i
				}
			}
			if tc.wantSnap == 0 {
				keep = 0
			}
			if !slices.Equal(after, before[keep:]) {
				t.Fatalf("after ReleaseTo(%d): segments %v, want %v", tc.index, after, before[keep:])
			}
			if tc.wantSnap >= 20 && len(after) >= len(before) {
				t.Fatalf("ReleaseTo(%d) removed nothing from %d segments", tc.index, len(before))
			}
			// The remaining log still replays from its newest marker.
			_, st := reopen(t, w, dir, Options{SegmentSize: 512})
			if st.Snapshot.Index != 30 {
				t.Errorf("snapshot marker: got %d, want 30", st.Snapshot.Index)
			}
			checkEntries(t, st.Entries, ents(31, 40, 1, 100))
			if st.HardState.Commit != 40 {
				t.Errorf("HardState: got %+v, want commit 40", st.HardState)
			}
		})
	}
}

func TestReleaseKeepsActiveSegment(t *testing.T) {
	dir := t.TempDir()
	w, _ := mustOpen(t, dir, Options{SegmentSize: 1})
	for i := uint64(1); i <= 5; i++ {
		mustSave(t, w, raftpb.HardState{Term: 1, Commit: i}, ents(i, i, 1, 10))
	}
	if err := w.SaveSnapshot(raftpb.SnapshotMetadata{Index: 5, Term: 1}); err != nil {
		t.Fatal(err)
	}
	if err := w.ReleaseTo(5); err != nil {
		t.Fatal(err)
	}
	files := segmentFiles(t, dir)
	if len(files) != 1 {
		t.Fatalf("got segments %v, want only the active one", files)
	}
	_, st := reopen(t, w, dir, Options{SegmentSize: 1})
	if st.Snapshot.Index != 5 || len(st.Entries) != 0 || st.HardState.Commit != 5 {
		t.Errorf("got snapshot %d, %s, hs %+v; want snapshot 5, no entries, commit 5",
			st.Snapshot.Index, describe(st.Entries), st.HardState)
	}
}

func TestFailedWriteRefusesWrites(t *testing.T) {
	dir := t.TempDir()
	w, _ := mustOpen(t, dir, Options{})
	mustSave(t, w, raftpb.HardState{Term: 1, Commit: 1}, ents(1, 3, 1, 10))
	// Break the active file underneath the WAL to make the next write fail.
	w.f.Close()
	err := w.Save(raftpb.HardState{Term: 1, Commit: 2}, ents(4, 4, 1, 10), true)
	if err == nil || !errors.Is(err, ErrFailed) || !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Save on a broken file: got %v, want an error wrapping os.ErrClosed and ErrFailed", err)
	}
	for name, op := range map[string]func() error{
		"Save":         func() error { return w.Save(raftpb.HardState{Term: 1, Commit: 2}, nil, false) },
		"SaveSnapshot": func() error { return w.SaveSnapshot(raftpb.SnapshotMetadata{Index: 1, Term: 1}) },
		"ReleaseTo":    func() error { return w.ReleaseTo(1) },
	} {
		if err := op(); !errors.Is(err, ErrFailed) {
			t.Errorf("%s after a failure: got %v, want ErrFailed", name, err)
		}
	}
	w.Close()
	_, st := reopen(t, nil, dir, Options{})
	checkEntries(t, st.Entries, ents(1, 3, 1, 10))
}

func TestClosed(t *testing.T) {
	dir := t.TempDir()
	w, _ := mustOpen(t, dir, Options{})
	mustClose(t, w)
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := w.Save(raftpb.HardState{Term: 1}, nil, true); !errors.Is(err, ErrClosed) {
		t.Errorf("Save after Close: got %v, want ErrClosed", err)
	}
}

func TestLocked(t *testing.T) {
	dir := t.TempDir()
	w, _ := mustOpen(t, dir, Options{})
	if _, _, err := Open(dir, Options{Logger: discard}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: got %v, want ErrLocked", err)
	}
	mustClose(t, w)
	w2, _ := mustOpen(t, dir, Options{})
	mustClose(t, w2)
}

func TestLeftoverTempSegmentRemoved(t *testing.T) {
	dir := t.TempDir()
	w, _ := mustOpen(t, dir, Options{})
	mustSave(t, w, raftpb.HardState{Term: 1, Commit: 1}, ents(1, 2, 1, 10))
	mustClose(t, w)
	tmp := filepath.Join(dir, segment{seq: 1, first: 3}.name()+tmpExt)
	if err := os.WriteFile(tmp, []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, st := reopen(t, nil, dir, Options{})
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("leftover %s still exists (stat: %v)", tmp, err)
	}
	checkEntries(t, st.Entries, ents(1, 2, 1, 10))
}

// A crash between sealing a segment and creating the next one leaves a
// sealed last segment: Open accepts it and the next write cuts.
func TestSealedLastSegment(t *testing.T) {
	dir := t.TempDir()
	w, _ := mustOpen(t, dir, Options{SegmentSize: 1})
	mustSave(t, w, raftpb.HardState{Term: 1, Commit: 1}, ents(1, 1, 1, 10))
	mustSave(t, w, raftpb.HardState{Term: 1, Commit: 2}, ents(2, 2, 1, 10))
	mustClose(t, w)
	files := segmentFiles(t, dir)
	// Drop the newest segment: the one before it is sealed.
	if err := os.Remove(filepath.Join(dir, files[len(files)-1])); err != nil {
		t.Fatal(err)
	}
	w, st := reopen(t, nil, dir, Options{SegmentSize: 1})
	checkEntries(t, st.Entries, ents(1, 1, 1, 10))
	mustSave(t, w, raftpb.HardState{Term: 1, Commit: 2}, ents(2, 2, 1, 10))
	_, st = reopen(t, w, dir, Options{SegmentSize: 1})
	checkEntries(t, st.Entries, ents(1, 2, 1, 10))
	if got := len(segmentFiles(t, dir)); got != len(files) {
		t.Errorf("got %d segments, want %d", got, len(files))
	}
}

func TestSegmentNames(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
		want segment
	}{
		{name: "0000000000000000-0000000000000000.wal", ok: true},
		{name: "000000000000000a-00000000000000ff.wal", ok: true, want: segment{seq: 10, first: 255}},
		{name: "000000000000000A-00000000000000ff.wal"},
		{name: "000000000000000a-00000000000000ff.wal.tmp"},
		{name: "0a-ff.wal"},
		{name: "000000000000000a_00000000000000ff.wal"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseSegmentName(tc.name)
			if ok != tc.ok || got != tc.want {
				t.Fatalf("parseSegmentName(%q) = %+v, %v; want %+v, %v", tc.name, got, ok, tc.want, tc.ok)
			}
			if ok && got.name() != tc.name {
				t.Errorf("round trip: %q -> %q", tc.name, got.name())
			}
		})
	}
}

// TestConcurrentReleaseTo runs ReleaseTo from another goroutine while the
// log is written (the race detector checks the locking).
func TestConcurrentReleaseTo(t *testing.T) {
	dir := t.TempDir()
	w, _ := mustOpen(t, dir, Options{SegmentSize: 2048})
	var snapIndex atomic.Uint64
	done := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		defer close(errc)
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := w.ReleaseTo(snapIndex.Load()); err != nil {
				errc <- err
				return
			}
		}
	}()
	for i := uint64(1); i <= 300; i++ {
		mustSave(t, w, raftpb.HardState{Term: 1, Commit: i}, ents(i, i, 1, 64))
		if i%25 == 0 {
			if err := w.SaveSnapshot(raftpb.SnapshotMetadata{Index: i, Term: 1}); err != nil {
				t.Fatal(err)
			}
			snapIndex.Store(i)
		}
	}
	close(done)
	if err := <-errc; err != nil {
		t.Fatalf("ReleaseTo: %v", err)
	}
	if err := w.ReleaseTo(300); err != nil {
		t.Fatal(err)
	}
	_, st := reopen(t, w, dir, Options{SegmentSize: 2048})
	if st.Snapshot.Index != 300 || len(st.Entries) != 0 || st.HardState.Commit != 300 {
		t.Fatalf("got snapshot %d, %s, commit %d; want snapshot 300, no entries, commit 300",
			st.Snapshot.Index, describe(st.Entries), st.HardState.Commit)
	}
	if n := len(segmentFiles(t, dir)); n > 2 {
		t.Errorf("%d segments left after ReleaseTo(300), want at most 2", n)
	}
}
