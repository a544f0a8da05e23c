// Package e2e drives the built isle binary as real processes: whole-cluster
// tests. ISLE_BIN names the binary (make test-e2e sets it); without it the
// tests build one.
package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/isle-cluster/isle/raft/storeapi"
)

// TestStoreSurvivesKill9 writes continuously to a three-member store while
// killing the leader with SIGKILL, then all three members at once, and
// checks that every acknowledged write is there after the restarts.
func TestStoreSurvivesKill9(t *testing.T) {
	bin := isleBinary(t)
	c := startStore(t, bin, 3)

	var mu sync.Mutex
	acked := map[string]string{}
	ctx, stopWriters := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			for i := 0; ctx.Err() == nil; i++ {
				m := c.members[rng.Intn(len(c.members))]
				key, val := fmt.Sprintf("/e2e/w%d/%06d", w, i), fmt.Sprintf("v%d-%d", w, i)
				rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				_, err := m.client().Put(rctx, key, []byte(val), -1)
				cancel()
				if err == nil {
					mu.Lock()
					acked[key] = val
					mu.Unlock()
				}
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	waitFor(t, 20*time.Second, "first writes acknowledged", func() bool { return count() > 200 })

	lead := c.leader(t)
	t.Logf("kill -9 the leader %s after %d acknowledged writes", lead.name, count())
	lead.kill(t)
	before := count()
	waitFor(t, 20*time.Second, "writes resume after the leader died", func() bool { return count() > before+200 })
	lead.start(t)
	waitFor(t, 20*time.Second, "writes go on with the restarted member", func() bool { return count() > before+400 })

	t.Logf("kill -9 all three members after %d acknowledged writes", count())
	for _, m := range c.members {
		m.kill(t)
	}
	stopWriters()
	wg.Wait()
	for _, m := range c.members {
		m.start(t)
	}
	c.leader(t)

	mu.Lock()
	defer mu.Unlock()
	for _, m := range c.members {
		lctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var list storeapi.ListResponse
		var err error
		for {
			list, err = m.client().List(lctx, "/e2e/", 0)
			if err == nil || lctx.Err() != nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		cancel()
		if err != nil {
			t.Fatalf("%s: list after restart: %v", m.name, err)
		}
		got := map[string]string{}
		for _, kv := range list.KVs {
			got[kv.Key] = kv.Value
		}
		lost := 0
		for k, v := range acked {
			if got[k] != v {
				lost++
				if lost <= 5 {
					t.Errorf("%s: acknowledged write %s=%s is missing after kill -9 (got %q)", m.name, k, v, got[k])
				}
			}
		}
		if lost > 0 {
			t.Fatalf("%s: %d of %d acknowledged writes lost", m.name, lost, len(acked))
		}
		t.Logf("%s: all %d acknowledged writes present (%d keys stored)", m.name, len(acked), len(got))
	}
}
