package wal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

var discard = slog.New(slog.DiscardHandler)

// ents returns entries lo..hi (inclusive) of the given term with size-byte
// data that depends on index and term.
func ents(lo, hi, term uint64, size int) []raftpb.Entry {
	var out []raftpb.Entry
	for i := lo; i <= hi; i++ {
		data := bytes.Repeat([]byte(fmt.Sprintf("%d/%d;", i, term)), size/4+1)[:size]
		out = append(out, raftpb.Entry{Term: term, Index: i, Type: raftpb.EntryNormal, Data: data})
	}
	return out
}

func mustOpen(t testing.TB, dir string, opts Options) (*WAL, *State) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = discard
	}
	w, st, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return w, st
}

func mustSave(t testing.TB, w *WAL, hs raftpb.HardState, es []raftpb.Entry) {
	t.Helper()
	if err := w.Save(hs, es, true); err != nil {
		t.Fatalf("Save: %v", err)
	}
}

func mustClose(t testing.TB, w *WAL) {
	t.Helper()
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// reopen closes w, opens dir again and returns the new WAL and state; the
// new WAL is closed at the end of the test.
func reopen(t *testing.T, w *WAL, dir string, opts Options) (*WAL, *State) {
	t.Helper()
	if w != nil {
		mustClose(t, w)
	}
	w2, st := mustOpen(t, dir, opts)
	t.Cleanup(func() { w2.Close() })
	return w2, st
}

func equalEntries(a, b []raftpb.Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Index != b[i].Index || a[i].Term != b[i].Term || a[i].Type != b[i].Type || !bytes.Equal(a[i].Data, b[i].Data) {
			return false
		}
	}
	return true
}

func checkEntries(t *testing.T, got, want []raftpb.Entry) {
	t.Helper()
	if !equalEntries(got, want) {
		t.Fatalf("entries: got %s, want %s", describe(got), describe(want))
	}
}

func describe(es []raftpb.Entry) string {
	if len(es) == 0 {
		return "[]"
	}
	return fmt.Sprintf("%d entries [%d(t%d)..%d(t%d)]", len(es), es[0].Index, es[0].Term, es[len(es)-1].Index, es[len(es)-1].Term)
}

// segmentFiles returns the segment file names in dir, in sequence order.
func segmentFiles(t testing.TB, dir string) []string {
	t.Helper()
	segs, _, _, err := listDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range segs {
		names = append(names, s.name())
	}
	return names
}

// recordOffsets returns the offsets of the valid records in a segment file.
func recordOffsets(t testing.TB, path string) []int {
	t.Helper()
	s, ok := parseSegmentName(filepath.Base(path))
	if !ok {
		t.Fatalf("not a segment: %s", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int
	for off := 0; off < len(data); {
		_, _, size, reason := decodeRecord(data, off, s.seq)
		if reason != "" {
			t.Fatalf("%s: bad record at %d: %s", path, off, reason)
		}
		offs = append(offs, off)
		off += size
	}
	return offs
}

// copyDir copies the regular files of src into a new temporary directory.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	des, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		in, err := os.Open(filepath.Join(src, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		in.Close()
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// asCorrupt asserts err is a *CorruptError matching ErrCorrupt.
func asCorrupt(t *testing.T, err error) *CorruptError {
	t.Helper()
	if err == nil {
		t.Fatal("Open succeeded, want a *CorruptError")
	}
	var ce *CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v (%T), want a *CorruptError", err, err)
	}
	return ce
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
