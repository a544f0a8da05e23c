package raft_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/rafttest"
	"github.com/isle-cluster/isle/raft/wal"
)

// singleMemberWithSnapshot writes enough to a one-member cluster for it to
// snapshot, stops it, and returns its data directory.
func singleMemberWithSnapshot(t *testing.T) string {
	t.Helper()
	c := rafttest.NewCluster(t, rafttest.Options{Size: 1, Tune: func(cfg *raft.Config) {
		cfg.SnapshotEntries, cfg.CatchUpEntries = 10, 2
	}})
	id := c.IDs()[0]
	for i := 0; i < 25; i++ {
		if _, err := c.Node(id).Propose(ctxT(t, 5*time.Second), put(fmt.Sprintf("k%02d", i), "v")); err != nil {
			t.Fatal(err)
		}
	}
	// Snapshots are written off the Ready loop; wait until one is recorded
	// in the WAL, which is what a restart reads.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := c.Node(id).Status(ctxT(t, time.Second))
		if err == nil && st.SnapshotIndex > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot recorded within 10 s (status %+v, %v)", st, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	dir := c.Member(id).Dir
	c.Crash(id)
	return dir
}

func reopen(dir string) (*raft.Node, error) {
	return raft.Open(raft.Config{
		DataDir: dir, Name: "m0", RaftAddr: "mem:m0",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, raft.Bootstrap{})
}

func TestRestartFailsOnMissingSnapshotFile(t *testing.T) {
	dir := singleMemberWithSnapshot(t)
	snaps, _ := filepath.Glob(filepath.Join(dir, "snap", "*.snap"))
	if len(snaps) == 0 {
		t.Fatal("no snapshot file was written")
	}
	for _, s := range snaps {
		if err := os.Remove(s); err != nil {
			t.Fatal(err)
		}
	}
	_, err := reopen(dir)
	if err == nil {
		t.Fatal("a member whose WAL names a missing snapshot must not start")
	}
	t.Logf("startup error: %v", err)
	// The WAL names the newest snapshot it recorded (a newer file may have
	// been written but not yet recorded when the member stopped).
	named := false
	for _, s := range snaps {
		named = named || strings.Contains(err.Error(), filepath.Base(s))
	}
	if !named {
		t.Fatalf("error must name the missing snapshot file (one of %v): %v", snaps, err)
	}
}

func TestRestartFailsOnCorruptWAL(t *testing.T) {
	dir := singleMemberWithSnapshot(t)
	segs, _ := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	if len(segs) == 0 {
		t.Fatal("no WAL segment")
	}
	seg := segs[len(segs)-1]
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	off := len(b) / 3 &^ 7
	b[off+12] ^= 0x40 // a bit flip inside an early record, well before the tail
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = reopen(dir)
	var ce *wal.CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("got %v, want a wal.CorruptError", err)
	}
	if ce.File != seg && filepath.Base(ce.File) != filepath.Base(seg) {
		t.Fatalf("corruption reported in %s, want %s", ce.File, seg)
	}
	t.Logf("startup error: %v", err)
	if !strings.Contains(err.Error(), "offset") {
		t.Fatalf("error must name the offset: %v", err)
	}
}

func TestRestartRepairsTornTail(t *testing.T) {
	dir := singleMemberWithSnapshot(t)
	segs, _ := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	seg := segs[len(segs)-1]
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Half a record header: what a power cut during a write leaves.
	if _, err := f.Write([]byte{0x10, 0, 0, 0x10}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	n, err := reopen(dir)
	if err != nil {
		t.Fatalf("a torn tail must be repaired, not stop startup: %v", err)
	}
	defer n.Stop()
	n.Start(rafttest.NewNetwork(1).Attach(n.ID(), n))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	eventually(t, 10*time.Second, "all 25 keys are back", func() bool { return n.KV().Count("k") == 25 })
	if _, err := n.Propose(ctx, put("after", "1")); err != nil {
		t.Fatalf("write after repair: %v", err)
	}
}

func TestOpenRefusesEmptyDirWithoutBootstrap(t *testing.T) {
	_, err := reopen(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "holds no member") {
		t.Fatalf("got %v, want an error saying the directory holds no member", err)
	}
}

// setFormat rewrites the data format recorded in dir's member file; -1
// removes it, as the files written before the format was recorded have it.
func setFormat(t *testing.T, dir string, format int) {
	t.Helper()
	path := filepath.Join(dir, "member.json")
	var mf map[string]any
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &mf)
	}
	if err != nil {
		t.Fatal(err)
	}
	if mf["format"] != float64(raft.DataFormat) {
		t.Fatalf("a member file written now has format %v, want %d", mf["format"], raft.DataFormat)
	}
	delete(mf, "format")
	if format >= 0 {
		mf["format"] = format
	}
	if b, err = json.Marshal(mf); err == nil {
		err = os.WriteFile(path, b, 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// A data directory of a newer format stops startup, saying which format
// it is and which this isle reads, and is left as it was.
func TestOpenRefusesNewerDataFormat(t *testing.T) {
	dir := singleMemberWithSnapshot(t)
	setFormat(t, dir, raft.DataFormat+1)
	before, _ := os.ReadFile(filepath.Join(dir, "member.json"))
	_, err := reopen(dir)
	want := fmt.Sprintf("data format %d, written by a newer isle; this isle reads formats up to %d", raft.DataFormat+1, raft.DataFormat)
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("got %v, want an error naming %s and saying %q", err, dir, want)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "member.json")); string(after) != string(before) {
		t.Fatalf("the member file was changed: %s -> %s", before, after)
	}
}

// A data directory written before the format was recorded is migrated
// forward: every key is back and the format is recorded.
func TestOpenMigratesOlderDataFormat(t *testing.T) {
	dir := singleMemberWithSnapshot(t)
	setFormat(t, dir, -1)
	n, err := reopen(dir)
	if err != nil {
		t.Fatalf("a directory of format 0 must be migrated: %v", err)
	}
	defer n.Stop()
	n.Start(rafttest.NewNetwork(1).Attach(n.ID(), n))
	eventually(t, 10*time.Second, "all 25 keys are back", func() bool { return n.KV().Count("k") == 25 })
	b, _ := os.ReadFile(filepath.Join(dir, "member.json"))
	var mf struct{ Format int }
	if err := json.Unmarshal(b, &mf); err != nil || mf.Format != raft.DataFormat {
		t.Fatalf("member file after migration: %s (%v), want format %d", b, err, raft.DataFormat)
	}
}
