package wal

import (
	"os"
	"path/filepath"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// recordTypes returns the type of each valid record in a segment file.
func recordTypes(t *testing.T, path string) []uint32 {
	t.Helper()
	s, _ := parseSegmentName(filepath.Base(path))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var types []uint32
	for _, off := range recordOffsets(t, path) {
		typ, _, _, _ := decodeRecord(data, off, s.seq)
		types = append(types, typ)
	}
	return types
}

// A synced Save ends on a page boundary when the padding is no larger
// than what it wrote; a small one, and an unsynced one, are not padded.
func TestSyncedSaveEndsOnPage(t *testing.T) {
	dir := t.TempDir()
	w, _ := mustOpen(t, dir, Options{})
	defer w.Close()
	page := int64(os.Getpagesize())
	path := filepath.Join(dir, segmentFiles(t, dir)[0])

	mustSave(t, w, raftpb.HardState{Term: 1, Commit: 3}, ents(1, 3, 1, int(page)/4)) // three quarters of a page
	if size := fileSize(t, path); size != page {
		t.Fatalf("after a synced write of most of a page the segment is %d bytes, want %d (one page)", size, page)
	}
	mustSave(t, w, raftpb.HardState{}, ents(4, 4, 1, 10))
	small := fileSize(t, path)
	if small%page == 0 || small > page+64 {
		t.Fatalf("after a synced write of one small entry the segment is %d bytes, want it unpadded", small)
	}
	if err := w.Save(raftpb.HardState{}, ents(5, 8, 1, int(page)), false); err != nil {
		t.Fatal(err)
	}
	if size := fileSize(t, path); size%page == 0 {
		t.Fatalf("an unsynced write was padded to %d bytes", size)
	}
	if err := w.SaveSnapshot(raftpb.SnapshotMetadata{Index: 2, Term: 1}); err != nil {
		t.Fatal(err)
	}
	types := recordTypes(t, path)
	pads := 0
	for _, typ := range types {
		if typ == typePad {
			pads++
		}
	}
	if pads != 2 {
		t.Fatalf("record types %v: want two padding records (the first Save and the snapshot marker after the unsynced one)", types)
	}
	_, st := reopen(t, w, dir, Options{})
	want := append(append(ents(3, 3, 1, int(page)/4), ents(4, 4, 1, 10)...), ents(5, 8, 1, int(page))...)
	checkEntries(t, st.Entries, want)
}

// A crash part-way through a padding record leaves a torn tail: the
// records before it are kept, and the WAL goes on from there.
func TestTornPaddingIsTornTail(t *testing.T) {
	dir := t.TempDir()
	w, _ := mustOpen(t, dir, Options{})
	page := int64(os.Getpagesize())
	mustSave(t, w, raftpb.HardState{Term: 1, Commit: 1}, ents(1, 3, 1, int(page)/4))
	mustClose(t, w)
	path := filepath.Join(dir, segmentFiles(t, dir)[0])
	offs := recordOffsets(t, path)
	if types := recordTypes(t, path); types[len(types)-1] != typePad {
		t.Fatalf("record types %v: want a padding record last", types)
	}
	torn := int64(offs[len(offs)-1]) + 12
	if err := os.Truncate(path, torn); err != nil {
		t.Fatal(err)
	}
	w, st := mustOpen(t, dir, Options{})
	checkEntries(t, st.Entries, ents(1, 3, 1, int(page)/4))
	if size := fileSize(t, path); size != int64(offs[len(offs)-1]) {
		t.Fatalf("segment is %d bytes after the repair, want %d (the torn padding cut off)", size, offs[len(offs)-1])
	}
	mustSave(t, w, raftpb.HardState{Term: 1, Commit: 4}, ents(4, 4, 1, 100))
	_, st = reopen(t, w, dir, Options{})
	checkEntries(t, st.Entries, append(ents(1, 3, 1, int(page)/4), ents(4, 4, 1, 100)...))
}

// A damaged padding record before the tail is corruption like any other.
func TestCorruptPadding(t *testing.T) {
	dir := t.TempDir()
	w, _ := mustOpen(t, dir, Options{})
	page := int64(os.Getpagesize())
	mustSave(t, w, raftpb.HardState{Term: 1, Commit: 1}, ents(1, 3, 1, int(page)/4))
	mustSave(t, w, raftpb.HardState{Term: 1, Commit: 4}, ents(4, 6, 1, int(page)/4))
	mustClose(t, w)
	path := filepath.Join(dir, segmentFiles(t, dir)[0])
	offs := recordOffsets(t, path)
	types := recordTypes(t, path)
	pad := -1
	for i, typ := range types {
		if typ == typePad {
			pad = offs[i]
			break
		}
	}
	if pad < 0 || pad == offs[len(offs)-1] {
		t.Fatalf("record types %v: want a padding record before the last one", types)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[pad+headerSize+5] = 1 // non-zero padding: the checksum fails
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = Open(dir, Options{Logger: discard})
	if ce := asCorrupt(t, err); ce.Offset != int64(pad) {
		t.Fatalf("corruption reported at offset %d, want %d: %v", ce.Offset, pad, err)
	}
}

// testdata/format1 is a WAL written by the isle before padding records
// (data format 1): two segments, a snapshot marker at 5, entries 1-10 of
// term 1 and 8-30 of term 2 that replace 8-10, and an unsynced hard state
// in the last segment. It reads as it did, and goes on with padding.
func TestReadsFormat1WAL(t *testing.T) {
	dir := copyDir(t, "testdata/format1")
	w, st := mustOpen(t, dir, Options{SegmentSize: 2048})
	if want := (raftpb.HardState{Term: 2, Vote: 7, Commit: 28}); st.HardState != want {
		t.Fatalf("hard state %+v, want %+v", st.HardState, want)
	}
	if st.Snapshot.Index != 5 || st.Snapshot.Term != 1 {
		t.Fatalf("snapshot marker %+v, want index 5 term 1", st.Snapshot)
	}
	want := append(ents(6, 7, 1, 100), ents(8, 30, 2, 150)...)
	checkEntries(t, st.Entries, want)
	for _, name := range segmentFiles(t, dir) {
		for _, typ := range recordTypes(t, filepath.Join(dir, name)) {
			if typ == typePad {
				t.Fatalf("%s holds a padding record: not a format 1 WAL", name)
			}
		}
	}

	mustSave(t, w, raftpb.HardState{Term: 2, Vote: 7, Commit: 30}, ents(31, 60, 2, 200))
	_, st = reopen(t, w, dir, Options{SegmentSize: 2048})
	checkEntries(t, st.Entries, append(want, ents(31, 60, 2, 200)...))
	if st.HardState.Commit != 30 {
		t.Fatalf("hard state %+v, want commit 30", st.HardState)
	}
}
