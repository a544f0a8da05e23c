package snap

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

var discard = slog.New(slog.DiscardHandler)

func newSnap(term, index uint64, size int) raftpb.Snapshot {
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + int(index))
	}
	return raftpb.Snapshot{
		Data: data,
		Metadata: raftpb.SnapshotMetadata{
			Term: term, Index: index,
			ConfState: raftpb.ConfState{Voters: []uint64{1, 2, 3}},
		},
	}
}

func mustNew(t *testing.T, dir string) *Snapshotter {
	t.Helper()
	s, err := New(dir, discard)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSaveLoad(t *testing.T) {
	tests := []struct {
		name string
		size int
	}{
		{name: "empty data", size: 0},
		{name: "small", size: 100},
		{name: "exactly one chunk", size: chunkSize - 40},
		{name: "several chunks", size: 3*chunkSize + 123},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "snap") // New creates it
			s := mustNew(t, dir)
			want := newSnap(3, 42, tc.size)
			if err := s.Save(want); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(dir, "0000000000000003-000000000000002a.snap")); err != nil {
				t.Fatalf("snapshot file: %v", err)
			}
			got, err := mustNew(t, dir).Load(want.Metadata)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Data, want.Data) || got.Metadata.Term != 3 || got.Metadata.Index != 42 ||
				!slices.Equal(got.Metadata.ConfState.Voters, want.Metadata.ConfState.Voters) {
				t.Fatalf("Load returned %+v, want %+v", got.Metadata, want.Metadata)
			}
			if matches, _ := filepath.Glob(filepath.Join(dir, "*"+tmpExt)); len(matches) != 0 {
				t.Errorf("temporary files left behind: %v", matches)
			}
		})
	}
}

func TestSaveRejectsEmpty(t *testing.T) {
	s := mustNew(t, t.TempDir())
	if err := s.Save(raftpb.Snapshot{}); err == nil {
		t.Fatal("Save of an empty snapshot succeeded")
	}
}

func TestLoadNotFound(t *testing.T) {
	dir := t.TempDir()
	s := mustNew(t, dir)
	if err := s.Save(newSnap(1, 10, 10)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		meta raftpb.SnapshotMetadata
	}{
		{name: "other index", meta: raftpb.SnapshotMetadata{Term: 1, Index: 11}},
		{name: "other term", meta: raftpb.SnapshotMetadata{Term: 2, Index: 10}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Load(tc.meta)
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("got %v, want ErrNotFound", err)
			}
			if want := filepath.Join(dir, fileName(tc.meta.Term, tc.meta.Index)); !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %s", err, want)
			}
		})
	}
}

func TestLoadCorrupt(t *testing.T) {
	const size = 3*chunkSize + 500
	tests := []struct {
		name    string
		damage  func(data []byte) []byte
		wantOff int64 // -1: the intact file's size; -2: two bytes less
	}{
		{name: "flip in first chunk", damage: func(d []byte) []byte { d[headerSize+10] ^= 1; return d }, wantOff: headerSize},
		{name: "flip in third chunk", damage: func(d []byte) []byte { d[headerSize+2*chunkSize+5] ^= 1; return d }, wantOff: headerSize + 2*chunkSize},
		{name: "flip in checksum table", damage: func(d []byte) []byte { d[len(d)-1] ^= 1; return d }, wantOff: headerSize + 3*chunkSize},
		{name: "flip in header length", damage: func(d []byte) []byte { d[9] ^= 1; return d }, wantOff: 0},
		{name: "bad magic", damage: func(d []byte) []byte { d[0] = 'X'; return d }, wantOff: 0},
		{name: "truncated payload", damage: func(d []byte) []byte { return d[:headerSize+1000] }, wantOff: headerSize + 1000},
		{name: "truncated table", damage: func(d []byte) []byte { return d[:len(d)-2] }, wantOff: -2},
		{name: "truncated header", damage: func(d []byte) []byte { return d[:10] }, wantOff: 10},
		{name: "trailing bytes", damage: func(d []byte) []byte { return append(d, 0, 0) }, wantOff: -1},
		{name: "empty file", damage: func(d []byte) []byte { return nil }, wantOff: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := mustNew(t, dir)
			snap := newSnap(2, 7, size)
			if err := s.Save(snap); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, fileName(2, 7))
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, tc.damage(bytes.Clone(data)), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err = s.Load(snap.Metadata)
			var ce *CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v, want a *CorruptError", err)
			}
			want := tc.wantOff
			switch want {
			case -1:
				want = int64(len(data))
			case -2:
				want = int64(len(data)) - 2
			}
			if ce.File != path || ce.Offset != want {
				t.Fatalf("got %s at %d, want %s at %d (%v)", ce.File, ce.Offset, path, want, err)
			}
		})
	}
}

// TestLoadWrongContent: a valid file under another snapshot's name.
func TestLoadWrongContent(t *testing.T) {
	dir := t.TempDir()
	s := mustNew(t, dir)
	if err := s.Save(newSnap(1, 5, 10)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, fileName(1, 5)), filepath.Join(dir, fileName(1, 6))); err != nil {
		t.Fatal(err)
	}
	_, err := s.Load(raftpb.SnapshotMetadata{Term: 1, Index: 6})
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v, want ErrCorrupt", err)
	}
}

func TestPurge(t *testing.T) {
	tests := []struct {
		name  string
		keep  int
		snaps [][2]uint64 // term, index
		want  []string
	}{
		{name: "keep two", keep: 2, snaps: [][2]uint64{{1, 10}, {1, 20}, {2, 30}, {2, 40}},
			want: []string{fileName(2, 30), fileName(2, 40)}},
		{name: "keep more than exist", keep: 5, snaps: [][2]uint64{{1, 10}, {1, 20}},
			want: []string{fileName(1, 10), fileName(1, 20)}},
		{name: "keep none", keep: 0, snaps: [][2]uint64{{1, 10}}, want: nil},
		{name: "ordered by index not term", keep: 1, snaps: [][2]uint64{{5, 10}, {3, 20}},
			want: []string{fileName(3, 20)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := mustNew(t, dir)
			for _, ti := range tc.snaps {
				if err := s.Save(newSnap(ti[0], ti[1], 10)); err != nil {
					t.Fatal(err)
				}
			}
			// A leftover temporary file and an unrelated file.
			if err := os.WriteFile(filepath.Join(dir, fileName(9, 99)+tmpExt), []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "README"), []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := s.Purge(tc.keep); err != nil {
				t.Fatal(err)
			}
			des, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, de := range des {
				if de.Name() != "README" {
					got = append(got, de.Name())
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("after Purge(%d): %v, want %v", tc.keep, got, tc.want)
			}
			if _, err := os.Stat(filepath.Join(dir, "README")); err != nil {
				t.Errorf("Purge removed an unrelated file: %v", err)
			}
		})
	}
	if err := mustNew(t, t.TempDir()).Purge(-1); err == nil {
		t.Error("Purge(-1) succeeded, want an error")
	}
}

func TestSaveOverwrites(t *testing.T) {
	dir := t.TempDir()
	s := mustNew(t, dir)
	first, second := newSnap(1, 5, 10), newSnap(1, 5, 20)
	for _, sn := range []raftpb.Snapshot{first, second} {
		if err := s.Save(sn); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Load(first.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Data, second.Data) {
		t.Fatal("second Save of the same snapshot did not replace the file")
	}
}

func TestNewOnFileFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := New(filepath.Join(path, "snap"), discard)
	if err == nil {
		t.Fatalf("New under a regular file succeeded: %+v", s)
	}
}
