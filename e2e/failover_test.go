package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// watchRecorder follows a raw watch stream of configmaps and records the
// names and resourceVersions of ADDED events in order.
type watchRecorder struct {
	mu     sync.Mutex
	added  []string
	lastRV int64
	seen   map[string]int
}

func (w *watchRecorder) follow(ctx context.Context, t *testing.T, c *apiClient, fromRV int64) error {
	req, _ := http.NewRequestWithContext(ctx, "GET",
		fmt.Sprintf("%s/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=%d&allowWatchBookmarks=true", c.base, fromRV), nil)
	hc := &http.Client{Transport: c.http.Transport}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("watch: HTTP %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			Type   string `json:"type"`
			Object struct {
				Metadata struct {
					Name            string `json:"name"`
					ResourceVersion string `json:"resourceVersion"`
				} `json:"metadata"`
			} `json:"object"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("watch: bad event %q: %w", sc.Text(), err)
		}
		rv, _ := strconv.ParseInt(ev.Object.Metadata.ResourceVersion, 10, 64)
		w.mu.Lock()
		if rv <= w.lastRV && ev.Type != "BOOKMARK" {
			w.mu.Unlock()
			return fmt.Errorf("watch: event %s %s at revision %d after revision %d", ev.Type, ev.Object.Metadata.Name, rv, w.lastRV)
		}
		if rv > w.lastRV {
			w.lastRV = rv
		}
		if ev.Type == "ADDED" {
			w.added = append(w.added, ev.Object.Metadata.Name)
			w.seen[ev.Object.Metadata.Name]++
		}
		w.mu.Unlock()
	}
	return sc.Err()
}

// TestLeaderKillUnderApplies kills the Raft leader while kubectl applies
// objects through every server: each apply either succeeded and its object
// exists afterwards, or failed with an error; a watch that loses its
// server resumes on another from its last resourceVersion without gaps.
func TestLeaderKillUnderApplies(t *testing.T) {
	bin := isleBinary(t)
	c := startStore(t, bin, 3)
	admins := make([]*apiClient, 3)
	runners := make([]*kubectlRunner, 3)
	for i, m := range c.members {
		admins[i] = adminClient(t, bin, m)
		runners[i] = newKubectl(t, bin, m)
	}
	waitAPIReady(t, admins[0])
	lead := c.leader(t)
	leadIdx := 0
	for i, m := range c.members {
		if m == lead {
			leadIdx = i
		}
	}
	// The watch runs on the leader, so it loses its server.
	rec := &watchRecorder{seen: map[string]int{}}
	wctx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	watchErr := make(chan error, 1)
	go func() { watchErr <- rec.follow(wctx, t, admins[leadIdx], 0) }()

	type result struct {
		name string
		ok   bool
	}
	var results []result
	apply := func(i int) {
		name := fmt.Sprintf("applied-%03d", i)
		manifest := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  n: %q\n", name, strconv.Itoa(i))
		_, _, err := runners[i%3].run(manifest, "apply", "--request-timeout=15s", "-f", "-")
		results = append(results, result{name, err == nil})
	}
	i := 0
	for ; i < 15; i++ {
		apply(i)
	}
	t.Logf("kill -9 the leader %s", lead.name)
	lead.kill(t)
	for ; i < 40; i++ {
		apply(i)
	}
	// Resume the watch on a survivor from the last revision it saw.
	<-watchErr
	survivor := (leadIdx + 1) % 3
	rec.mu.Lock()
	from := rec.lastRV
	rec.mu.Unlock()
	go func() { watchErr <- rec.follow(wctx, t, admins[survivor], from) }()

	okCount := 0
	for _, r := range results {
		code, body, _ := admins[survivor].do(t, "GET", "/api/v1/namespaces/default/configmaps/"+r.name, "", nil)
		if r.ok {
			okCount++
			if code != 200 {
				t.Errorf("kubectl apply of %s succeeded but the object is missing: %d %s", r.name, code, truncate(body))
			}
		}
	}
	if okCount < 30 {
		t.Fatalf("only %d of %d applies succeeded; the survivors should have taken most", okCount, len(results))
	}
	_, list, _ := admins[survivor].do(t, "GET", "/api/v1/namespaces/default/configmaps", "", nil)
	want := strings.Count(list, `"name":"applied-`)
	waitFor(t, 15*time.Second, "the resumed watch to see every object", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.seen) >= want
	})
	stopWatch()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for name, n := range rec.seen {
		if n != 1 && strings.HasPrefix(name, "applied-") {
			t.Errorf("the watch saw %s ADDED %d times", name, n)
		}
	}
	t.Logf("%d of %d applies succeeded across the failover; the watch saw %d objects, each once", okCount, len(results), len(rec.seen))
}

// TestQuorumLoss stops two of three servers: the survivor answers writes
// with 503, fails /readyz, and recovers once a second server is back.
func TestQuorumLoss(t *testing.T) {
	bin := isleBinary(t)
	c := startStore(t, bin, 3)
	admin := adminClient(t, bin, c.members[0])
	waitAPIReady(t, admin)
	c.members[1].kill(t)
	c.members[2].kill(t)
	cm := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"lost"}}`)
	code, body, _ := admin.do(t, "POST", "/api/v1/namespaces/default/configmaps", "application/json", cm)
	if code != 503 || !strings.Contains(body, "no quorum") {
		t.Fatalf("a write without quorum: %d %s, want 503 naming the lost quorum", code, truncate(body))
	}
	code, body, _ = admin.do(t, "GET", "/readyz?verbose", "", nil)
	if code != 500 || !strings.Contains(body, "[-]etcd failed") {
		t.Fatalf("/readyz without quorum: %d %s", code, body)
	}
	if code, _, _ := admin.do(t, "GET", "/livez", "", nil); code != 200 {
		t.Fatalf("/livez without quorum: %d, want 200 (the process is alive)", code)
	}
	c.members[1].start(t)
	waitFor(t, 20*time.Second, "/readyz to pass again", func() bool {
		code, _, _ := admin.do(t, "GET", "/readyz", "", nil)
		return code == 200
	})
	code, body, _ = admin.do(t, "POST", "/api/v1/namespaces/default/configmaps", "application/json", []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"back"}}`))
	if code != 201 {
		t.Fatalf("a write with quorum back: %d %s", code, truncate(body))
	}
}
