package raft_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/rafttest"
)

// snapFileIndexes returns the indexes of the snapshot files in a member's
// data directory ("%016x-%016x.snap": term, index) and their sizes.
func snapFileIndexes(t *testing.T, dir string) map[uint64]int64 {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(dir, "snap"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	idx := map[uint64]int64{}
	for _, de := range des {
		base, ok := strings.CutSuffix(de.Name(), ".snap")
		if !ok || len(base) != 33 {
			continue
		}
		i, err := strconv.ParseUint(base[17:], 16, 64)
		if err != nil {
			t.Fatalf("snapshot file %s: %v", de.Name(), err)
		}
		fi, err := de.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // purged since the listing
		}
		if err != nil {
			t.Fatal(err)
		}
		idx[i] = fi.Size()
	}
	return idx
}

// counterValue reads an unlabelled counter from reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
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
	var reg *prometheus.Registry // the member's, of its latest start
	c := rafttest.NewCluster(t, rafttest.Options{Size: 1, Tune: func(cfg *raft.Config) {
		memoryOnlyTune(cfg)
		reg = prometheus.NewRegistry()
		cfg.Registerer = reg
	}})
	id := c.IDs()[0]
	n, dir := c.Node(id), c.Member(id).Dir
	value := strings.Repeat("v", 1024)
	taken, files := map[uint64]bool{}, map[uint64]int64{}
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
		for i, size := range snapFileIndexes(t, dir) {
			files[i] = size
		}
	}
	// The metric counts the snapshots' bytes, a little less than their
	// files' (each holds at least the 4 KiB of values): at least those of
	// the files seen before it is read, at most those of all files seen
	// after (one may be finishing).
	before := len(files)
	written := counterValue(t, reg, "isle_raft_snapshot_file_bytes_total")
	var fileBytes int64
	for i, size := range snapFileIndexes(t, dir) {
		files[i] = size
	}
	for _, size := range files {
		fileBytes += size
	}
	if written < float64(before)*(4<<10) || written > float64(fileBytes) {
		t.Errorf("isle_raft_snapshot_file_bytes_total is %v after %d files of %d bytes in all", written, len(files), fileBytes)
	}
	t.Logf("%d snapshots seen, %d of them files; at most %d bytes of entries in memory", len(taken), len(files), logBytes)
	if len(files) < 2 {
		t.Fatalf("%d snapshot files after 400 KiB of entries on a store of 4 KiB, want several", len(files))
	}
	if len(taken) < 2*len(files) {
		t.Fatalf("%d snapshots and %d files: want most snapshots in memory only", len(taken), len(files))
	}
	// Memory holds what it held with every snapshot in a file: 8 KiB of
	// entries and the catch-up ones, and what was applied while a snapshot
	// was encoded and written on its own goroutine. That last part is
	// bounded by time, not bytes (under -race on a busy machine a file's
	// fsync has let 200 entries through): the peak is only held to less
	// than most of the 400 KiB written, and once the last snapshot is done
	// the log is back to its bound.
	if logBytes > 300<<10 {
		t.Errorf("up to %d bytes of entries in memory of the 400 KiB written: the log is not compacted", logBytes)
	}
	eventually(t, 10*time.Second, "the in-memory log back to 8 KiB between snapshots and 5 behind", func() bool {
		st, err := n.Status(ctxT(t, time.Second))
		if err != nil {
			t.Fatal(err)
		}
		logBytes = st.LogBytes
		return logBytes <= 24<<10
	})

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
		if _, file := snapFileIndexes(t, c.Member(lead).Dir)[st.SnapshotIndex]; st.SnapshotIndex > 20 && !file {
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
	if files := snapFileIndexes(t, c.Member(lagger).Dir); files[memIndex] == 0 {
		t.Fatalf("lagging member's snapshot files %v: want the leader's in-memory snapshot at %d", files, memIndex)
	}
}
