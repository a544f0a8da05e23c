package raft_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/rafttest"
)

// snapFileIndexes returns the indexes of the snapshot files in a member's
// data directory ("%016x-%016x.snap": term, index).
func snapFileIndexes(t *testing.T, dir string) map[uint64]bool {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(dir, "snap"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	idx := map[uint64]bool{}
	for _, de := range des {
		base, ok := strings.CutSuffix(de.Name(), ".snap")
		if !ok || len(base) != 33 {
			continue
		}
		i, err := strconv.ParseUint(base[17:], 16, 64)
		if err != nil {
			t.Fatalf("snapshot file %s: %v", de.Name(), err)
		}
		idx[i] = true
	}
	return idx
}

// memoryOnlyTune takes snapshots by bytes only (every 8 KiB of entries
// on a store of a few KiB), and keeps few entries behind them.
func memoryOnlyTune(cfg *raft.Config) {
	cfg.SnapshotEntries, cfg.SnapshotBytes, cfg.CatchUpEntries = 1<<20, 8<<10, 5
}

// TestSnapshotFilesEveryRatio: of the snapshots a small store takes by
// bytes, only those after SnapshotFileRatio (default 4) times the last
// file's size of entries go to a file; the others compact the in-memory
// log just the same. A restart replays the WAL across them.
func TestSnapshotFilesEveryRatio(t *testing.T) {
	c := rafttest.NewCluster(t, rafttest.Options{Size: 1, Tune: memoryOnlyTune})
	id := c.IDs()[0]
	n, dir := c.Node(id), c.Member(id).Dir
	value := strings.Repeat("v", 1024)
	taken, files := map[uint64]bool{}, map[uint64]bool{}
	var logBytes uint64
	for i := range 400 {
		if _, err := n.Propose(ctxT(t, 5*time.Second), put(fmt.Sprintf("k%d", i%4), value+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
		st, err := n.Status(ctxT(t, time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if st.SnapshotIndex > 0 {
			taken[st.SnapshotIndex] = true
		}
		logBytes = max(logBytes, st.LogBytes)
		for i := range snapFileIndexes(t, dir) {
			files[i] = true
		}
	}
	t.Logf("%d snapshots seen, %d of them files; at most %d bytes of entries in memory", len(taken), len(files), logBytes)
	if len(files) < 2 {
		t.Fatalf("%d snapshot files after 400 KiB of entries on a store of 4 KiB, want several", len(files))
	}
	if len(taken) < 2*len(files) {
		t.Fatalf("%d snapshots and %d files: want most snapshots in memory only", len(taken), len(files))
	}
	// Memory holds what it held with every snapshot in a file: 8 KiB of
	// entries and the catch-up ones, not the 400 KiB written.
	if logBytes > 32<<10 {
		t.Errorf("up to %d bytes of entries in memory, want the 8 KiB between snapshots and 5 behind", logBytes)
	}

	c.Crash(id)
	c.Restart(id)
	n = c.Node(id)
	eventually(t, 10*time.Second, "restarted member has every last value", func() bool {
		for k := range 4 {
			v, ok, _ := n.KV().Get(fmt.Sprintf("k%d", k))
			if !ok || string(v.Value) != value+strconv.Itoa(396+k) {
				return false
			}
		}
		return true
	})
}

// TestLaggingMemberGetsMemorySnapshot: a member that missed entries the
// leader dropped from memory is sent the leader's newest snapshot, also
// when that one is in memory only, and writes it to its own file.
func TestLaggingMemberGetsMemorySnapshot(t *testing.T) {
	c := rafttest.NewCluster(t, rafttest.Options{Size: 3, Seed: 5, Tune: memoryOnlyTune})
	lead := c.WaitLeader(5 * time.Second)
	var lagger uint64
	for _, id := range c.IDs() {
		if id != lead {
			lagger = id
		}
	}
	c.Crash(lagger)
	value := strings.Repeat("v", 1024)
	n := c.Node(lead)
	// Write until the leader's newest snapshot is one it kept in memory.
	var memIndex uint64
	for i := 0; memIndex == 0; i++ {
		if i == 1000 {
			t.Fatal("no snapshot in memory only after 1000 writes")
		}
		if _, err := n.Propose(ctxT(t, 5*time.Second), put(fmt.Sprintf("k%d", i%4), value)); err != nil {
			t.Fatal(err)
		}
		st, err := n.Status(ctxT(t, time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if st.SnapshotIndex > 20 && !snapFileIndexes(t, c.Member(lead).Dir)[st.SnapshotIndex] {
			memIndex = st.SnapshotIndex
		}
	}
	if _, err := n.Propose(ctxT(t, 5*time.Second), put("last", "1")); err != nil {
		t.Fatal(err)
	}
	c.Restart(lagger)
	eventually(t, 10*time.Second, "lagging member catches up", func() bool {
		_, ok, _ := c.Node(lagger).KV().Get("last")
		return ok
	})
	if files := snapFileIndexes(t, c.Member(lagger).Dir); !files[memIndex] {
		t.Fatalf("lagging member's snapshot files %v: want the leader's in-memory snapshot at %d", files, memIndex)
	}
}
