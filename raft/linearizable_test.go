package raft_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/kv"
	"github.com/isle-cluster/isle/raft/rafttest"
)

// TestLinearizable runs randomized histories of concurrent clients against
// an in-process cluster while a seeded nemesis partitions, drops, delays,
// crashes, restarts, pauses and moves the leader, then checks the history
// with porcupine and that every member ends with the same state.
// ISLE_LONG_SEEDS raises the number of seeds (make test-long).
func TestLinearizable(t *testing.T) {
	seeds := 6
	if s, err := strconv.Atoi(os.Getenv("ISLE_LONG_SEEDS")); err == nil && s > 0 {
		seeds = s
	}
	var ops, unknown atomic.Int64
	for seed := int64(1); seed <= int64(seeds); seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			n, u := checkLinearizable(t, seed)
			ops.Add(int64(n))
			unknown.Add(int64(u))
		})
	}
	t.Logf("porcupine: %d seeds, %d operations checked (%d with unknown outcome), 0 violations", seeds, ops.Load(), unknown.Load())
}

type recorder struct {
	mu    sync.Mutex
	start time.Time
	ops   []porcupine.Operation
}

func (r *recorder) now() int64 { return int64(time.Since(r.start)) }

func (r *recorder) add(op porcupine.Operation) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

func checkLinearizable(t *testing.T, seed int64) (total, unknownOps int) {
	size := 3
	if seed%4 == 0 {
		size = 5
	}
	c := rafttest.NewCluster(t, rafttest.Options{Size: size, Seed: seed, Tune: func(cfg *raft.Config) {
		cfg.SnapshotEntries, cfg.CatchUpEntries = 60, 10 // snapshots and catch-up by snapshot happen
	}})
	c.Net.SetFaults(0.02, 0, 2*time.Millisecond)
	ids := c.IDs()
	rec := &recorder{start: time.Now()}
	const runFor = 2500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), runFor)
	defer cancel()

	var wg sync.WaitGroup
	var unique atomic.Int64
	for client := 0; client < 6; client++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed*100 + int64(client)))
			for ctx.Err() == nil {
				node := c.Node(ids[rng.Intn(len(ids))])
				if node == nil {
					time.Sleep(time.Millisecond)
					continue
				}
				runOp(rec, node, client, rng, &unique)
			}
		}()
	}
	nemesis(ctx, t, c, rand.New(rand.NewSource(seed)))
	wg.Wait()

	// Heal and let everyone converge, then compare state machines.
	c.Net.Heal()
	c.Net.SetFaults(0, 0, 0)
	for _, id := range ids {
		c.Member(id).Clock.Resume()
		c.Restart(id)
	}
	lead := c.WaitLeader(10 * time.Second)
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if _, err := c.Node(lead).Propose(sctx, put("final", "x")); err != nil {
		t.Fatalf("write after healing: %v", err)
	}
	if st := c.Net.Stats(); st.Dropped == 0 || st.Cut == 0 {
		t.Fatalf("the nemesis injected no faults: %+v", st)
	}
	st, err := c.Node(lead).Status(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.SnapshotIndex == 0 || st.Term < 3 {
		t.Fatalf("the run must cover snapshots and elections: snapshot index %d, term %d", st.SnapshotIndex, st.Term)
	}
	var want []kv.KeyValue
	for i, id := range ids {
		kvs, _, _, err := c.Node(id).List(sctx, "", "", 0, true)
		if err != nil {
			t.Fatalf("member %x: final read: %v", id, err)
		}
		if i == 0 {
			want = kvs
			continue
		}
		if fmt.Sprint(kvs) != fmt.Sprint(want) {
			t.Fatalf("member %x diverged:\n got %v\nwant %v", id, kvs, want)
		}
	}

	// Operations whose outcome is unknown may take effect any time later.
	end := rec.now() + 1
	for i := range rec.ops {
		if rec.ops[i].Output.(kv.ModelOutput).Unknown {
			rec.ops[i].Return = end
			unknownOps++
		}
	}
	res, info := porcupine.CheckOperationsVerbose(kv.PorcupineModel(), rec.ops, 60*time.Second)
	if res != porcupine.Ok {
		path := filepath.Join(os.TempDir(), fmt.Sprintf("isle-linearizability-seed%d.html", seed))
		_ = porcupine.VisualizePath(kv.PorcupineModel(), info, path)
		t.Fatalf("seed %d: history of %d operations is not linearizable (%v); visualization: %s", seed, len(rec.ops), res, path)
	}
	return len(rec.ops), unknownOps
}

// runOp performs one random operation and records it.
func runOp(rec *recorder, node *raft.Node, client int, rng *rand.Rand, unique *atomic.Int64) {
	key := fmt.Sprintf("k%d", rng.Intn(4))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	op := porcupine.Operation{ClientId: client}
	switch p := rng.Intn(10); {
	case p < 4: // linearizable read
		op.Input = kv.ModelInput{Op: kv.ModelGet, Key: key}
		op.Call = rec.now()
		v, ok, _, err := node.Get(ctx, key, true)
		op.Return = rec.now()
		if err != nil {
			return // a failed read has no effect
		}
		op.Output = kv.ModelOutput{Found: ok, Value: string(v.Value)}
	case p < 7: // put
		val := strconv.FormatInt(unique.Add(1), 10)
		op.Input = kv.ModelInput{Op: kv.ModelPut, Key: key, Value: val}
		op.Call = rec.now()
		_, err := node.Propose(ctx, put(key, val))
		op.Return = rec.now()
		if !writeOutcome(&op, err) {
			return
		}
		op.Output = kv.ModelOutput{Unknown: err != nil}
	case p < 8: // delete
		op.Input = kv.ModelInput{Op: kv.ModelDelete, Key: key}
		op.Call = rec.now()
		_, err := node.Propose(ctx, kv.Op{Type: kv.OpDelete, Key: key, IfModRev: -1})
		op.Return = rec.now()
		if !writeOutcome(&op, err) {
			return
		}
		op.Output = kv.ModelOutput{Unknown: err != nil}
	default: // compare-and-swap on the value last read (values are unique, so
		// "mod revision unchanged" is "value unchanged")
		cur, ok, _, err := node.Get(ctx, key, false)
		if err != nil || !ok {
			return
		}
		val := strconv.FormatInt(unique.Add(1), 10)
		op.Input = kv.ModelInput{Op: kv.ModelCAS, Key: key, Old: string(cur.Value), Value: val}
		op.Call = rec.now()
		res, err := node.Propose(ctx, kv.Op{Type: kv.OpPut, Key: key, Value: []byte(val), IfModRev: cur.ModRevision})
		op.Return = rec.now()
		if !writeOutcome(&op, err) {
			return
		}
		op.Output = kv.ModelOutput{OK: err == nil && res.Succeeded, Unknown: err != nil}
	}
	rec.add(op)
}

// writeOutcome reports whether a write belongs in the history: a write raft
// never took (ErrNoLeader) did not happen; any other error is an unknown
// outcome.
func writeOutcome(op *porcupine.Operation, err error) bool {
	return err == nil || !errors.Is(err, raft.ErrNoLeader)
}

// nemesis injects one fault at a time until ctx ends.
func nemesis(ctx context.Context, t *testing.T, c *rafttest.Cluster, rng *rand.Rand) {
	ids := c.IDs()
	pick := func() uint64 { return ids[rng.Intn(len(ids))] }
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(100+rng.Intn(200)) * time.Millisecond):
		}
		switch rng.Intn(7) {
		case 0: // isolate a member
			c.Net.Isolate(pick())
		case 1: // split into a minority and a majority
			perm := rng.Perm(len(ids))
			var a, b []uint64
			for i, p := range perm {
				if i < len(ids)/2 {
					a = append(a, ids[p])
				} else {
					b = append(b, ids[p])
				}
			}
			c.Net.Partition(a, b)
		case 2: // crash the leader
			if lead := c.Leader(); lead != 0 {
				c.Crash(lead)
			}
		case 3: // crash a member
			c.Crash(pick())
		case 4: // move leadership
			if lead := c.Leader(); lead != 0 {
				tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				_ = c.Node(lead).TransferLeader(tctx, pick())
				cancel()
			}
		case 5: // stall a member's clock
			c.Member(pick()).Clock.Pause()
		case 6: // heal everything
			c.Net.Heal()
			for _, id := range ids {
				c.Member(id).Clock.Resume()
				c.Restart(id)
			}
		}
		// Never keep more than a minority down for long: restart the rest.
		down := 0
		for _, id := range ids {
			if c.Node(id) == nil {
				down++
			}
		}
		if down > (len(ids)-1)/2 {
			for _, id := range ids {
				c.Restart(id)
			}
		}
	}
}
