package raft_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/rafttest"
)

func writeKeys(t *testing.T, n *raft.Node, prefix string, count int) {
	t.Helper()
	for i := range count {
		if _, err := n.Propose(ctxT(t, 5*time.Second), put(fmt.Sprintf("%s%03d", prefix, i), "v")); err != nil {
			t.Fatal(err)
		}
	}
}

func countKeys(t *testing.T, n *raft.Node, prefix string) (int, int64) {
	t.Helper()
	kvs, _, rev, err := n.List(ctxT(t, 5*time.Second), prefix, "", 0, true)
	if err != nil {
		t.Fatal(err)
	}
	return len(kvs), rev
}

func TestBackupSeedsANewCluster(t *testing.T) {
	old := rafttest.NewCluster(t, rafttest.Options{Size: 3, Seed: 11})
	lead := old.WaitLeader(10 * time.Second)
	writeKeys(t, old.Node(lead), "k", 40)
	var follower uint64
	for _, id := range old.IDs() {
		if id != lead {
			follower = id
		}
	}
	// A follower's backup reflects every acknowledged write.
	b, err := old.Node(follower).Backup(ctxT(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if b.Revision != 40 || b.ClusterID != old.Node(lead).ClusterID() || b.MemberID != follower || len(b.Members) != 3 {
		t.Fatalf("backup: revision %d cluster %x member %x members %d; want revision 40 of cluster %x by %x, 3 members",
			b.Revision, b.ClusterID, b.MemberID, len(b.Members), old.Node(lead).ClusterID(), follower)
	}
	writeKeys(t, old.Node(lead), "after", 5) // not in the backup

	restored := rafttest.NewCluster(t, rafttest.Options{Size: 1, State: b.KV})
	id := restored.IDs()[0]
	n := restored.Node(id)
	if n.ClusterID() == b.ClusterID {
		t.Fatalf("the restored cluster kept the old cluster ID %x", b.ClusterID)
	}
	if got, rev := countKeys(t, n, "k"); got != 40 || rev != 40 {
		t.Fatalf("restored: %d keys at revision %d, want 40 at 40", got, rev)
	}
	if got, _ := countKeys(t, n, "after"); got != 0 {
		t.Fatalf("restored: %d keys written after the backup", got)
	}
	if ms := n.Members(); len(ms) != 1 || ms[0].ID != id {
		t.Fatalf("restored member table %+v, want only %x", ms, id)
	}
	res, err := n.Propose(ctxT(t, 5*time.Second), put("new", "v"))
	if err != nil || res.Revision != 41 {
		t.Fatalf("write after restore: %+v, %v; want revision 41", res, err)
	}
	// The seed is durable: a restart finds it, and another member joins.
	restored.Crash(id)
	restored.Restart(id)
	if got, rev := countKeys(t, restored.Node(id), "k"); got != 40 || rev != 41 {
		t.Fatalf("after restart: %d keys at revision %d, want 40 at 41", got, rev)
	}
	joined := restored.AddMember("m1", id)
	eventually(t, 10*time.Second, "the joined member has the seeded keys", func() bool {
		kvs, _, _, err := restored.Node(joined).List(ctxT(t, time.Second), "k", "", 0, false)
		return err == nil && len(kvs) == 40
	})
}

func TestForceNewCluster(t *testing.T) {
	c := rafttest.NewCluster(t, rafttest.Options{Size: 3, Seed: 12, Tune: func(cfg *raft.Config) {
		cfg.SnapshotEntries, cfg.CatchUpEntries = 20, 5 // a snapshot, then committed entries after it
	}})
	lead := c.WaitLeader(10 * time.Second)
	writeKeys(t, c.Node(lead), "k", 50)
	ids := c.IDs()
	survivor := ids[2]
	oldCluster := c.Node(survivor).ClusterID()
	if err := c.Node(survivor).Sync(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	c.Crash(ids[0])
	c.Crash(ids[1])
	if _, err := c.Node(survivor).Propose(ctxT(t, 300*time.Millisecond), put("lost", "v")); err == nil {
		t.Fatal("a write succeeded without quorum")
	}
	c.Crash(survivor)

	c.RestartWith(survivor, raft.Bootstrap{ForceNewCluster: true})
	if got := c.WaitLeader(10 * time.Second); got != survivor {
		t.Fatalf("leader %x, want the survivor %x", got, survivor)
	}
	n := c.Node(survivor)
	if n.ClusterID() == oldCluster {
		t.Fatal("forcing a new cluster kept the cluster ID")
	}
	if got, _ := countKeys(t, n, "k"); got != 50 {
		t.Fatalf("after forcing a new cluster: %d keys, want 50", got)
	}
	if ms := n.Members(); len(ms) != 1 || ms[0].ID != survivor || ms[0].Learner {
		t.Fatalf("member table %+v, want the survivor alone as a voter", ms)
	}
	if _, err := n.Propose(ctxT(t, 5*time.Second), put("new", "v")); err != nil {
		t.Fatalf("write after forcing a new cluster: %v", err)
	}
	// Restarted with the flag left on, it does not force again.
	forced := n.ClusterID()
	c.Crash(survivor)
	c.RestartWith(survivor, raft.Bootstrap{ForceNewCluster: true})
	if id := c.Node(survivor).ClusterID(); id != forced {
		t.Fatalf("a second start with the flag forced again: cluster %x, want %x", id, forced)
	}
	// Restarted without the flag, it stays the new cluster's one voter.
	c.Crash(survivor)
	c.Restart(survivor)
	if got := c.WaitLeader(10 * time.Second); got != survivor {
		t.Fatalf("after restart: leader %x, want %x", got, survivor)
	}
	if got, _ := countKeys(t, c.Node(survivor), "new"); got != 1 {
		t.Fatal("the write after forcing a new cluster was lost at restart")
	}
	// Once started without the flag, the flag works again.
	c.Crash(survivor)
	c.RestartWith(survivor, raft.Bootstrap{ForceNewCluster: true})
	if id := c.Node(survivor).ClusterID(); id == forced {
		t.Fatal("the flag after a start without it did not force a new cluster")
	}
	c.WaitLeader(10 * time.Second)
	// A member of the old cluster is removed for good.
	if err := c.Node(survivor).Promote(ctxT(t, 5*time.Second), ids[0]); !errors.Is(err, raft.ErrRefused) {
		t.Fatalf("promoting a member of the lost cluster: %v; want a refusal", err)
	}
}

func TestRecoverRefusals(t *testing.T) {
	cfg := func(dir string) raft.Config {
		return raft.Config{DataDir: dir, Name: "m0", RaftAddr: "mem:m0", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	}
	if _, err := raft.Open(cfg(t.TempDir()), raft.Bootstrap{ForceNewCluster: true}); err == nil || !strings.Contains(err.Error(), "holds no member") {
		t.Fatalf("forcing a new cluster on an empty directory: %v", err)
	}
	if _, err := raft.Open(cfg(t.TempDir()), raft.Bootstrap{Seed: []byte("x")}); err == nil {
		t.Fatal("a seed without a new cluster was accepted")
	}
	if _, err := raft.Open(cfg(t.TempDir()), raft.Bootstrap{NewCluster: true, Seed: []byte("not a state")}); err == nil || !strings.Contains(err.Error(), "seed") {
		t.Fatalf("a malformed seed: %v", err)
	}

	c := rafttest.NewCluster(t, rafttest.Options{Size: 1})
	id := c.IDs()[0]
	dir := c.Member(id).Dir
	if used, err := raft.InUse(dir); err != nil || !used {
		t.Fatalf("InUse of a running member's directory: %v, %v; want true", used, err)
	}
	c.Crash(id)
	if used, err := raft.InUse(dir); err != nil || used {
		t.Fatalf("InUse of a stopped member's directory: %v, %v; want false", used, err)
	}
	if used, err := raft.InUse(t.TempDir() + "/none"); err != nil || used {
		t.Fatalf("InUse of a missing directory: %v, %v", used, err)
	}
}
