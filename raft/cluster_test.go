package raft_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/kv"
	"github.com/isle-cluster/isle/raft/rafttest"
)

func put(key, value string) kv.Op {
	return kv.Op{Type: kv.OpPut, Key: key, Value: []byte(value), IfModRev: -1}
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestClusterReplicatesAndReadsLinearizably(t *testing.T) {
	c := rafttest.NewCluster(t, rafttest.Options{Size: 3, Seed: 1})
	ids := c.IDs()
	for i, id := range ids {
		res, err := c.Node(id).Propose(ctxT(t, 5*time.Second), put(fmt.Sprintf("k%d", i), "v"))
		if err != nil {
			t.Fatalf("propose through member %d: %v", i, err)
		}
		if !res.Succeeded || res.Revision != int64(i+1) {
			t.Fatalf("propose %d: got %+v, want success at revision %d", i, res, i+1)
		}
	}
	for _, id := range ids {
		kvs, _, rev, err := c.Node(id).List(ctxT(t, 5*time.Second), "k", "", 0, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(kvs) != 3 || rev != 3 {
			t.Fatalf("member %x: linearizable list got %d keys at revision %d, want 3 at 3", id, len(kvs), rev)
		}
	}
	st, err := c.Node(ids[0]).Status(ctxT(t, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Members) != 3 {
		t.Fatalf("status lists %d members, want 3: %+v", len(st.Members), st.Members)
	}
	for _, m := range st.Members {
		if m.Learner {
			t.Errorf("member %s is still a learner", m.Name)
		}
	}
}

func TestConditionalWrites(t *testing.T) {
	c := rafttest.NewCluster(t, rafttest.Options{Size: 1})
	n := c.Node(c.IDs()[0])
	ctx := ctxT(t, 5*time.Second)
	create := kv.Op{Type: kv.OpPut, Key: "a", Value: []byte("1"), IfModRev: 0}
	if res, err := n.Propose(ctx, create); err != nil || !res.Succeeded {
		t.Fatalf("create: %+v %v", res, err)
	}
	res, err := n.Propose(ctx, create)
	if err != nil || res.Succeeded || res.Current == nil || string(res.Current.Value) != "1" {
		t.Fatalf("second create must fail with the current value: %+v %v", res, err)
	}
	upd := kv.Op{Type: kv.OpPut, Key: "a", Value: []byte("2"), IfModRev: res.Current.ModRevision}
	if res, err := n.Propose(ctx, upd); err != nil || !res.Succeeded {
		t.Fatalf("update at the current revision: %+v %v", res, err)
	}
	if res, err := n.Propose(ctx, upd); err != nil || res.Succeeded {
		t.Fatalf("update at a stale revision must fail: %+v %v", res, err)
	}
}

func TestLeaderCrashWritesResume(t *testing.T) {
	c := rafttest.NewCluster(t, rafttest.Options{Size: 3, Seed: 2})
	lead := c.WaitLeader(5 * time.Second)
	if _, err := c.Node(lead).Propose(ctxT(t, 5*time.Second), put("before", "1")); err != nil {
		t.Fatal(err)
	}
	c.Crash(lead)
	var survivor uint64
	for _, id := range c.IDs() {
		if id != lead {
			survivor = id
		}
	}
	if _, err := c.Node(survivor).Propose(ctxT(t, 10*time.Second), put("after", "1")); err != nil {
		t.Fatalf("write after the leader crashed: %v", err)
	}
	c.Restart(lead)
	eventually(t, 10*time.Second, "restarted member catches up", func() bool {
		_, ok, _ := c.Node(lead).KV().Get("after")
		return ok
	})
	if _, ok, _ := c.Node(lead).KV().Get("before"); !ok {
		t.Fatal("restarted member lost a write it had acknowledged")
	}
}

func TestSnapshotCatchUpOfLaggingMember(t *testing.T) {
	c := rafttest.NewCluster(t, rafttest.Options{Size: 3, Seed: 3, Tune: func(cfg *raft.Config) {
		cfg.SnapshotEntries, cfg.CatchUpEntries = 20, 5
	}})
	ids := c.IDs()
	lagger := ids[2]
	c.Crash(lagger)
	for i := 0; i < 200; i++ {
		if _, err := c.Node(ids[0]).Propose(ctxT(t, 5*time.Second), put(fmt.Sprintf("k%03d", i), "v")); err != nil {
			t.Fatal(err)
		}
	}
	st, err := c.Node(ids[0]).Status(ctxT(t, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if st.SnapshotIndex == 0 {
		t.Fatal("no snapshot was taken after 200 writes with SnapshotEntries=20")
	}
	c.Restart(lagger)
	eventually(t, 10*time.Second, "lagging member catches up through a snapshot", func() bool {
		return c.Node(lagger).KV().Count("k") == 200
	})
	// And it restarts from its own snapshot.
	c.Crash(lagger)
	c.Restart(lagger)
	eventually(t, 10*time.Second, "member restarted from its own snapshot has every key", func() bool {
		return c.Node(lagger).KV().Count("k") == 200
	})
}

func TestMembership(t *testing.T) {
	c := rafttest.NewCluster(t, rafttest.Options{Size: 3, Seed: 4})
	ids := c.IDs()
	lead := c.WaitLeader(5 * time.Second)

	t.Run("transfer leadership", func(t *testing.T) {
		ctx := ctxT(t, 20*time.Second)
		var to uint64
		for _, id := range ids {
			if id != lead {
				to = id
				break
			}
		}
		if err := c.Node(lead).TransferLeader(ctx, to); err != nil {
			t.Fatal(err)
		}
		lead = c.WaitLeader(5 * time.Second)
		if lead != to {
			t.Fatalf("leader is %x, want %x", lead, to)
		}
	})

	t.Run("hand off leadership before stopping", func(t *testing.T) {
		ctx := ctxT(t, 20*time.Second)
		for _, id := range ids {
			if id != lead {
				if err := c.Node(id).HandOff(ctx); err != nil {
					t.Fatalf("a follower's hand-off: %v", err)
				}
			}
		}
		if got := c.WaitLeader(5 * time.Second); got != lead {
			t.Fatalf("a follower's hand-off moved leadership from %x to %x", lead, got)
		}
		if err := c.Node(lead).HandOff(ctx); err != nil {
			t.Fatal(err)
		}
		if got := c.Node(lead).Leader(); got == lead || got == 0 {
			t.Fatalf("after the hand-off %x still sees leader %x", lead, got)
		}
		lead = c.WaitLeader(5 * time.Second)
	})

	t.Run("add a fourth member and remove it; its ID is never reused", func(t *testing.T) {
		ctx := ctxT(t, 20*time.Second)
		id := c.AddMember("m3", lead)
		if got := len(c.Node(lead).Members()); got != 4 {
			t.Fatalf("%d members, want 4", got)
		}
		if err := c.Node(lead).RemoveMember(ctx, id); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, "removal applied everywhere", func() bool {
			for _, i := range ids {
				if len(c.Node(i).Members()) != 3 {
					return false
				}
			}
			return true
		})
		_, err := c.Node(lead).AddLearner(ctx, raft.Member{Name: "m3", RaftAddr: "mem:m3"})
		if err != nil {
			t.Fatalf("the name of a removed member may be used again: %v", err)
		}
	})

	t.Run("removal that would lose quorum is refused", func(t *testing.T) {
		ctx := ctxT(t, 20*time.Second)
		lead = c.WaitLeader(5 * time.Second)
		var others []uint64
		for _, id := range ids {
			if id != lead {
				others = append(others, id)
			}
		}
		c.Crash(others[0])
		// Wait until the leader notices the crashed member is inactive.
		eventually(t, 5*time.Second, "leader sees the crashed member inactive", func() bool {
			st, err := c.Node(lead).Status(ctx)
			if err != nil {
				return false
			}
			for _, m := range st.Members {
				if m.ID == others[0] {
					return !m.Active
				}
			}
			return false
		})
		err := c.Node(lead).RemoveMember(ctx, others[1])
		if !errors.Is(err, raft.ErrRefused) {
			t.Fatalf("removing a live voter while another is down: got %v, want ErrRefused", err)
		}
		c.Restart(others[0])
	})
}

func TestProposalWithoutQuorumFails(t *testing.T) {
	c := rafttest.NewCluster(t, rafttest.Options{Size: 3, Seed: 5})
	ids := c.IDs()
	c.Crash(ids[1])
	c.Crash(ids[2])
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.Node(ids[0]).Propose(ctx, put("x", "1"))
	if !errors.Is(err, raft.ErrTimeout) && !errors.Is(err, raft.ErrNoLeader) {
		t.Fatalf("propose without quorum: got %v, want ErrTimeout or ErrNoLeader", err)
	}
	_, _, _, err = c.Node(ids[0]).Get(ctx, "x", true)
	if err == nil {
		t.Fatal("a linearizable read without quorum must fail")
	}
}

func TestWatchThroughNode(t *testing.T) {
	c := rafttest.NewCluster(t, rafttest.Options{Size: 3, Seed: 6})
	ids := c.IDs()
	ctx := ctxT(t, 10*time.Second)
	if _, err := c.Node(ids[0]).Propose(ctx, put("/w/a", "1")); err != nil {
		t.Fatal(err)
	}
	// A watch on another member from revision 0 sees the past write, then new ones.
	w, err := c.Node(ids[2]).Watch(ctx, "/w/", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Node(ids[1]).Propose(ctx, put("/w/b", "2"), put("/other", "x")); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 2 {
		select {
		case evs, ok := <-w.C():
			if !ok {
				t.Fatalf("watch ended: %v", w.Err())
			}
			for _, ev := range evs {
				got = append(got, fmt.Sprintf("%s@%d", ev.KV.Key, ev.KV.ModRevision))
			}
		case <-ctx.Done():
			t.Fatalf("watch saw only %v", got)
		}
	}
	if fmt.Sprint(got) != "[/w/a@1 /w/b@2]" {
		t.Fatalf("watch saw %v, want [/w/a@1 /w/b@2]", got)
	}
}

// TestCatchUpEntriesBoundedByBytes keeps the entries behind a snapshot
// within CatchUpBytes, however few they are: large writes once kept
// hundreds of megabytes in memory, bounded by count only.
func TestCatchUpEntriesBoundedByBytes(t *testing.T) {
	c := rafttest.NewCluster(t, rafttest.Options{Size: 1, Tune: func(cfg *raft.Config) {
		cfg.SnapshotEntries, cfg.SnapshotBytes, cfg.CatchUpEntries, cfg.CatchUpBytes = 10, 1<<20, 1000, 1<<20
	}})
	n := c.Node(c.IDs()[0])
	value := string(make([]byte, 200<<10))
	for i := range 60 {
		if _, err := n.Propose(ctxT(t, 5*time.Second), put(fmt.Sprintf("big%02d", i), value)); err != nil {
			t.Fatal(err)
		}
	}
	// Small writes until a snapshot is past every large one: what stays
	// of them is the catch-up entries. A snapshot is taken beside the
	// writes, and one of 12 MB may take seconds under the race detector:
	// the writes go on until then.
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		st, err := n.Status(ctxT(t, time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if st.SnapshotIndex > 61 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot past the large writes after %d small ones in 30 s (snapshot at %d)", i, st.SnapshotIndex)
		}
		if i >= 1000 {
			time.Sleep(10 * time.Millisecond)
		}
		if _, err := n.Propose(ctxT(t, 5*time.Second), put(fmt.Sprintf("small%04d", i), "v")); err != nil {
			t.Fatal(err)
		}
	}
	st, err := n.Status(ctxT(t, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// 1 MiB and one entry at most, and small ones; without the bound,
	// all sixty: 12 MiB.
	if st.LogBytes > 3<<19 {
		t.Errorf("%d bytes of entries in memory after 60 writes of 200 KiB, want at most 1.5 MiB", st.LogBytes)
	}
}
