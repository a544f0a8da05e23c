package wal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// TestTornTail damages the last record of the last segment at every byte
// offset in several ways; Open must truncate it, keep every earlier record
// and stay writable.
func TestTornTail(t *testing.T) {
	base := t.TempDir()
	w, _ := mustOpen(t, base, Options{})
	for i := uint64(1); i <= 5; i++ {
		mustSave(t, w, raftpb.HardState{Term: 1, Commit: i}, ents(i, i, 1, 30))
	}
	last := ents(6, 6, 1, 37) // 37 bytes of data: the record has padding
	mustSave(t, w, raftpb.HardState{}, last)
	mustClose(t, w)
	name := segmentFiles(t, base)[0]
	offs := recordOffsets(t, filepath.Join(base, name))
	start := offs[len(offs)-1]
	orig, err := os.ReadFile(filepath.Join(base, name))
	if err != nil {
		t.Fatal(err)
	}
	end := len(orig)
	if (end-start)%8 != 0 || end-start <= 8+37 {
		t.Fatalf("last record spans %d..%d: expected header, payload and padding", start, end)
	}

	tests := []struct {
		name   string
		damage func(data []byte, k int) []byte // damage the last record from byte k on
	}{
		{name: "truncated", damage: func(d []byte, k int) []byte { return d[:k] }},
		{name: "zeroes", damage: func(d []byte, k int) []byte { clear(d[k:]); return d }},
		{name: "bit flip", damage: func(d []byte, k int) []byte { d[k] ^= 0x10; return d }},
		{name: "partial then zeroes to sector", damage: func(d []byte, k int) []byte {
			return append(d[:k], make([]byte, 512-k%512)...)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for k := start; k < end; k++ {
				dir := copyDir(t, base)
				path := filepath.Join(dir, name)
				data := tc.damage(bytes.Clone(orig), k)
				if err := os.WriteFile(path, data, 0o600); err != nil {
					t.Fatal(err)
				}
				w, st, err := Open(dir, Options{Logger: discard})
				if err != nil {
					t.Fatalf("offset %d: Open: %v", k, err)
				}
				want := ents(1, 5, 1, 30)
				wantSize := int64(start)
				if len(data) >= end && bytes.Equal(data[:end], orig) { // e.g. zeroing padding changes nothing
					want, wantSize = append(want, last...), int64(end)
				}
				if !equalEntries(st.Entries, want) {
					t.Fatalf("offset %d: entries %s, want %s", k, describe(st.Entries), describe(want))
				}
				if st.HardState.Commit != 5 {
					t.Fatalf("offset %d: HardState %+v, want commit 5", k, st.HardState)
				}
				if got := fileSize(t, path); got != wantSize {
					t.Fatalf("offset %d: segment size after repair %d, want %d", k, got, wantSize)
				}
				// The repaired WAL takes new records.
				if err := w.Save(raftpb.HardState{Term: 2, Commit: 6}, ents(6, 6, 2, 5), true); err != nil {
					t.Fatalf("offset %d: Save after repair: %v", k, err)
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				w, st, err = Open(dir, Options{Logger: discard})
				if err != nil {
					t.Fatalf("offset %d: second Open: %v", k, err)
				}
				if !equalEntries(st.Entries, append(ents(1, 5, 1, 30), ents(6, 6, 2, 5)...)) {
					t.Fatalf("offset %d: after repair and Save: entries %s", k, describe(st.Entries))
				}
				w.Close()
			}
		})
	}
}

// TestTornTailTruncatedToNothing: a last segment that lost even its header
// records gets them written again.
func TestTornTailTruncatedToNothing(t *testing.T) {
	dir := t.TempDir()
	w, _ := mustOpen(t, dir, Options{SegmentSize: 1})
	mustSave(t, w, raftpb.HardState{Term: 1, Commit: 1}, ents(1, 1, 1, 10))
	mustSave(t, w, raftpb.HardState{Term: 1, Commit: 2}, ents(2, 2, 1, 10))
	mustClose(t, w)
	files := segmentFiles(t, dir)
	lastPath := filepath.Join(dir, files[len(files)-1])
	if err := os.Truncate(lastPath, 5); err != nil {
		t.Fatal(err)
	}
	_, st := reopen(t, nil, dir, Options{SegmentSize: 1})
	checkEntries(t, st.Entries, ents(1, 1, 1, 10))
	if offs := recordOffsets(t, lastPath); len(offs) == 0 {
		t.Fatal("header records were not rewritten into the emptied last segment")
	}
}

// TestCorruptBeforeTail flips bits before the tail; Open must fail with a
// *CorruptError naming the exact file and record offset.
func TestCorruptBeforeTail(t *testing.T) {
	type target struct {
		segment int // index into the segment list; -1 = last
		record  int // index into the segment's records
		byteOff int // byte within the record to flip (>= 8: payload)
	}
	tests := []struct {
		name        string
		segmentSize int64
		target      target
	}{
		{name: "payload mid-log", target: target{segment: -1, record: 4, byteOff: 12}},
		{name: "length field mid-log", target: target{segment: -1, record: 4, byteOff: 0}},
		{name: "type field mid-log", target: target{segment: -1, record: 4, byteOff: 3}},
		{name: "checksum mid-log", target: target{segment: -1, record: 4, byteOff: 5}},
		{name: "first record", target: target{segment: -1, record: 0, byteOff: 9}},
		{name: "padding mid-log", target: target{segment: -1, record: 4, byteOff: -1}},
		{name: "second to last record", target: target{segment: -1, record: -2, byteOff: 10}},
		{name: "older segment", segmentSize: 600, target: target{segment: 0, record: 2, byteOff: 10}},
		{name: "last record of older segment", segmentSize: 600, target: target{segment: 0, record: -1, byteOff: 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			w, _ := mustOpen(t, dir, Options{SegmentSize: tc.segmentSize})
			for i := uint64(1); i <= 20; i++ {
				mustSave(t, w, raftpb.HardState{Term: 1, Commit: i}, ents(i, i, 1, 45))
			}
			mustClose(t, w)
			files := segmentFiles(t, dir)
			si := tc.target.segment
			if si < 0 {
				si += len(files)
			}
			path := filepath.Join(dir, files[si])
			offs := recordOffsets(t, path)
			ri := tc.target.record
			if ri < 0 {
				ri += len(offs)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			recEnd := len(data)
			if ri+1 < len(offs) {
				recEnd = offs[ri+1]
			}
			pos := offs[ri] + tc.target.byteOff
			if tc.target.byteOff < 0 {
				pos = recEnd - 1 // last byte of the record: padding for 45-byte data
			}
			data[pos] ^= 0x04
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			_, _, err = Open(dir, Options{Logger: discard, SegmentSize: tc.segmentSize})
			ce := asCorrupt(t, err)
			if ce.File != path || ce.Offset != int64(offs[ri]) {
				t.Fatalf("got %s at %d, want %s at %d (%v)", ce.File, ce.Offset, path, offs[ri], err)
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), fmt.Sprint(offs[ri])) {
				t.Errorf("message %q does not name the file and offset", err)
			}
		})
	}
}

func TestDamagedSegments(t *testing.T) {
	setup := func(t *testing.T) (string, []string) {
		dir := t.TempDir()
		w, _ := mustOpen(t, dir, Options{SegmentSize: 400})
		for i := uint64(1); i <= 30; i++ {
			mustSave(t, w, raftpb.HardState{Term: 1, Commit: i}, ents(i, i, 1, 50))
		}
		mustClose(t, w)
		files := segmentFiles(t, dir)
		if len(files) < 4 {
			t.Fatalf("want at least 4 segments, got %v", files)
		}
		return dir, files
	}
	// Each case damages the intact log given the record offsets of its
	// segments, and returns the segment index and offset Open must report.
	tests := []struct {
		name   string
		damage func(t *testing.T, dir string, files []string, offs [][]int) (seg int, off int)
	}{
		{
			name: "non-last segment truncated mid-record",
			damage: func(t *testing.T, dir string, files []string, offs [][]int) (int, int) {
				truncate(t, filepath.Join(dir, files[1]), offs[1][2]+13)
				return 1, offs[1][2]
			},
		},
		{
			name: "non-last segment truncated at a record boundary",
			damage: func(t *testing.T, dir string, files []string, offs [][]int) (int, int) {
				o := offs[1][len(offs[1])-2]
				truncate(t, filepath.Join(dir, files[1]), o)
				return 1, o
			},
		},
		{
			name: "non-last segment zeroed tail",
			damage: func(t *testing.T, dir string, files []string, offs [][]int) (int, int) {
				p := filepath.Join(dir, files[2])
				o := offs[2][len(offs[2])-2]
				data, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				clear(data[o:])
				if err := os.WriteFile(p, data, 0o600); err != nil {
					t.Fatal(err)
				}
				return 2, o
			},
		},
		{
			name: "missing middle segment",
			damage: func(t *testing.T, dir string, files []string, offs [][]int) (int, int) {
				if err := os.Remove(filepath.Join(dir, files[2])); err != nil {
					t.Fatal(err)
				}
				return 3, 0
			},
		},
		{
			name: "missing first segment",
			damage: func(t *testing.T, dir string, files []string, offs [][]int) (int, int) {
				if err := os.Remove(filepath.Join(dir, files[0])); err != nil {
					t.Fatal(err)
				}
				return 1, offs[1][2] // after the marker and hard state: the first entry
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, files := setup(t)
			var offs [][]int
			for _, f := range files {
				offs = append(offs, recordOffsets(t, filepath.Join(dir, f)))
			}
			seg, off := tc.damage(t, dir, files, offs)
			_, _, err := Open(dir, Options{Logger: discard, SegmentSize: 400})
			ce := asCorrupt(t, err)
			if want := filepath.Join(dir, files[seg]); ce.File != want || ce.Offset != int64(off) {
				t.Fatalf("got %s at %d, want %s at %d (%v)", ce.File, ce.Offset, want, off, err)
			}
		})
	}
}

func truncate(t *testing.T, path string, size int) {
	t.Helper()
	if err := os.Truncate(path, int64(size)); err != nil {
		t.Fatal(err)
	}
}

// TestEntryGapOnRead writes records directly to build a log with an index
// gap, which Save would refuse.
func TestEntryGapOnRead(t *testing.T) {
	dir := t.TempDir()
	var e encoder
	e.reset(0, 0)
	if err := e.add(typeSnapshot, &raftpb.SnapshotMetadata{}); err != nil {
		t.Fatal(err)
	}
	for _, ent := range append(ents(1, 3, 1, 8), ents(5, 6, 1, 8)...) {
		if err := e.add(typeEntry, &ent); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, segment{}.name())
	if err := os.WriteFile(path, e.buf, 0o600); err != nil {
		t.Fatal(err)
	}
	offs := recordOffsets(t, path)
	_, _, err := Open(dir, Options{Logger: discard})
	ce := asCorrupt(t, err)
	if ce.File != path || ce.Offset != int64(offs[4]) || !strings.Contains(ce.Reason, "gap") {
		t.Fatalf("got %v, want a gap at %s offset %d", err, path, offs[4])
	}
}

// TestStaleRecordRejected: a valid record of one segment copied into
// another (or to another offset) does not verify.
func TestStaleRecordRejected(t *testing.T) {
	tests := []struct {
		name string
		seq  uint64
		off  int64
	}{
		{name: "other segment", seq: 1, off: 0},
		{name: "other offset", seq: 0, off: 8},
	}
	var e encoder
	e.reset(0, 0)
	ent := ents(1, 1, 1, 20)[0]
	if err := e.add(typeEntry, &ent); err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := append(make([]byte, tc.off), e.buf...)
			if _, _, _, reason := decodeRecord(data, int(tc.off), tc.seq); reason == "" {
				t.Fatal("record verified at a different segment or offset")
			}
		})
	}
	if _, _, _, reason := decodeRecord(e.buf, 0, 0); reason != "" {
		t.Fatalf("record does not verify where it was written: %s", reason)
	}
}

func TestCorruptErrorMatches(t *testing.T) {
	err := fmt.Errorf("open: %w", &CorruptError{File: "f", Offset: 8, Reason: "r"})
	if !errors.Is(err, ErrCorrupt) {
		t.Error("errors.Is(wrapped *CorruptError, ErrCorrupt) = false")
	}
	if errors.Is(errors.New("x"), ErrCorrupt) {
		t.Error("unrelated error matches ErrCorrupt")
	}
}
