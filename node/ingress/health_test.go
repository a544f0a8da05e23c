package ingress

import (
	"context"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/isle-cluster/isle/node/netns/nstest"
)

// testClock is real time moved ahead by advance; requests read it
// concurrently.
type testClock struct{ offset atomic.Int64 }

func (c *testClock) now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

func (c *testClock) advance(d time.Duration) { c.offset.Add(int64(d)) }

func TestHealth(t *testing.T) {
	t1 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) func() time.Time { return func() time.Time { return t1.Add(d) } }
	var h health
	step := func(what string, gotHeld, gotTrial, wantHeld, wantTrial bool) {
		t.Helper()
		if gotHeld != wantHeld || gotTrial != wantTrial {
			t.Errorf("%s: held %v trial %v, want held %v trial %v", what, gotHeld, gotTrial, wantHeld, wantTrial)
		}
	}
	held, trial := h.held(at(0), true)
	step("healthy", held, trial, false, false)
	if h.ok() {
		t.Error("ok of a healthy endpoint says it was held")
	}

	if hold, was := h.failed(t1, false); hold != holdMin || !was {
		t.Errorf("first failure: hold %v wasHealthy %v, want %v true", hold, was, holdMin)
	}
	held, trial = h.held(at(holdMin-time.Millisecond), true)
	step("within the hold", held, trial, true, false)
	held, trial = h.held(at(holdMin), false)
	step("hold over, retry (no trial allowed)", held, trial, true, false)
	held, trial = h.held(at(holdMin), true)
	step("hold over, first try", held, trial, false, true)
	held, trial = h.held(at(holdMin), true)
	step("while the trial runs", held, trial, true, false)

	// A failure noticed by a request that was no trial does not double
	// the hold; failed trials do, up to holdMax.
	if hold, was := h.failed(t1.Add(holdMin), false); hold != holdMin || was {
		t.Errorf("failure outside a trial: hold %v wasHealthy %v, want %v false", hold, was, holdMin)
	}
	now := holdMin
	for _, want := range []time.Duration{20 * time.Second, 40 * time.Second, holdMax, holdMax} {
		now += 100 * time.Second
		held, trial = h.held(at(now), true)
		step("hold over", held, trial, false, true)
		if hold, _ := h.failed(t1.Add(now), true); hold != want {
			t.Errorf("failed trial: hold %v, want %v", hold, want)
		}
		held, trial = h.held(at(now+want-time.Millisecond), true)
		step("within the doubled hold", held, trial, true, false)
	}

	if !h.ok() {
		t.Error("ok of a held endpoint says it was not held")
	}
	held, trial = h.held(at(now), true)
	step("after a response", held, trial, false, false)
	if hold, was := h.failed(t1.Add(now), false); hold != holdMin || !was {
		t.Errorf("failure after recovery: hold %v wasHealthy %v, want %v true", hold, was, holdMin)
	}
}

func TestPick(t *testing.T) {
	clock := func() time.Time { return t0 }
	env := testEnv(t)
	env.now = clock
	var eps []*endpoint
	for _, a := range []string{"a", "dead1", "dead2", "dead3", "b"} {
		eps = append(eps, &endpoint{addr: a})
	}
	b := env.newBackend("default/web:80", eps)
	picks := func(n int, tried ...*endpoint) map[string]int {
		got := map[string]int{}
		for range n {
			ep, trial := b.pick(tried)
			if trial {
				t.Errorf("pick of %s is a trial", ep.addr)
			}
			got[ep.addr]++
		}
		return got
	}
	if got := picks(50); len(got) != 5 || got["a"] != 10 {
		t.Errorf("all healthy: %v, want 10 each", got)
	}
	for _, ep := range eps[1:4] {
		ep.health.failed(t0, false)
	}
	if got := picks(50); len(got) != 2 || got["a"] != 25 {
		t.Errorf("3 of 5 held: %v, want a and b 25 each", got)
	}
	if got := picks(10, eps[0]); len(got) != 1 || got["b"] != 10 {
		t.Errorf("3 held, a tried: %v, want b only", got)
	}
	// With every untried endpoint held, they are tried all the same.
	if got := picks(30, eps[0], eps[4]); len(got) != 3 || got["dead1"] != 10 {
		t.Errorf("a and b tried, the rest held: %v, want dead1..3 10 each", got)
	}
	// When the hold is over, the next first try is the trial of one held
	// endpoint; retries are never trials.
	env.now = func() time.Time { return t0.Add(holdMin) }
	if ep, trial := b.pick(eps[:1]); ep.addr != "b" || trial {
		t.Errorf("retry after the hold: %s trial %v, want b and no trial", ep.addr, trial)
	}
	trials := map[string]int{}
	for range 20 {
		if ep, trial := b.pick(nil); trial {
			trials[ep.addr]++
		}
	}
	if len(trials) != 3 || trials["dead1"] != 1 {
		t.Errorf("trials after the hold: %v, want one per held endpoint", trials)
	}
}

// dialCounter counts the dials to each address.
type dialCounter struct {
	dial dialFunc
	mu   sync.Mutex
	n    map[string]int
}

func (d *dialCounter) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	if d.n == nil {
		d.n = map[string]int{}
	}
	d.n[addr]++
	d.mu.Unlock()
	return d.dial(ctx, network, addr)
}

// count returns the dials to addrs, by address.
func (d *dialCounter) count(addrs ...string) []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]int, len(addrs))
	for i, a := range addrs {
		out[i] = d.n[a]
	}
	return out
}

func TestDeadEndpointsRefused(t *testing.T) {
	t.Parallel()
	dead := []string{nstest.ClosedAddr(t), nstest.ClosedAddr(t), nstest.ClosedAddr(t)}
	live := []string{addr(backendServer(t, "live-0")), addr(backendServer(t, "live-1"))}
	testDeadEndpoints(t, live, dead, (&net.Dialer{}).DialContext, true)
}

// testDeadEndpoints plays three of five boards losing power while the
// EndpointSlices cannot change: requests to the Service of the five
// endpoints live (answering their name, as backendServer) and dead, which
// dial reaches, pass the dead ones by once noticed. It takes a few
// dialTimeouts if the dead endpoints time out. With fast (dial failing at
// once), even the first requests are answered: failures that cost nothing
// do not count against a request's tries.
func testDeadEndpoints(t *testing.T, live, dead []string, dial dialFunc, fast bool) {
	c := newController(t, nil)
	var clock testClock
	c.env.now = clock.now
	dc := &dialCounter{dial: dial}
	c.pool.dial = dc.DialContext
	all := append(append([]string(nil), dead...), live...)
	c.Update(webSnapshot(t, all...))
	client := newClient(t)
	retries := func() float64 { return testutil.ToFloat64(c.env.metrics.retries) }
	// requests sends n requests in a row, which must all be answered by a
	// live endpoint; it returns the answers by endpoint name.
	requests := func(what string, n int) map[string]int {
		t.Helper()
		got := map[string]int{}
		for range n {
			code, body := get(t, client, c, "/")
			if code != http.StatusOK {
				t.Fatalf("%s: got %d %q, want every request answered", what, code, body)
			}
			got[body]++
		}
		return got
	}
	// deadDials returns the dials to the dead endpoints so far.
	deadDials := func() []int { return dc.count(dead...) }
	noticed := func() bool {
		for _, n := range deadDials() {
			if n == 0 {
				return false
			}
		}
		return true
	}

	// The first requests notice the dead endpoints (when they time out,
	// one request may meet three in a row and get 502).
	for i := 0; !noticed(); i++ {
		if i == 3 {
			t.Fatalf("dials to the dead endpoints after 3 requests: %v, want each dialed", deadDials())
		}
		code, body := get(t, client, c, "/")
		t.Logf("request %d while noticing: %d", i, code)
		if fast && code != http.StatusOK {
			t.Fatalf("request %d while noticing endpoints that refuse: %d %q, want a live endpoint's answer", i, code, body)
		}
	}
	before, r0 := deadDials(), retries()
	got := requests("within the hold", 50)
	if after := deadDials(); !slices.Equal(after, before) {
		t.Errorf("dials to the dead endpoints within the hold: %v before, %v after, want none", before, after)
	}
	if r := retries(); r != r0 {
		t.Errorf("retries within the hold: %v, want none", r-r0)
	}
	if got["live-0"] < 20 || got["live-1"] < 20 {
		t.Errorf("answers within the hold: %v, want them spread over both live endpoints", got)
	}

	// When the hold is over, each dead endpoint gets one trial, whose
	// request goes on to a live endpoint; the hold doubles.
	clock.advance(holdMin)
	before = deadDials()
	requests("after the hold", 50)
	for i, n := range deadDials() {
		if n != before[i]+1 {
			t.Errorf("dials to %s after the hold: %d, want one trial", dead[i], n-before[i])
		}
	}
	clock.advance(holdMin)
	before = deadDials()
	requests("within the doubled hold", 20)
	if after := deadDials(); !slices.Equal(after, before) {
		t.Errorf("dials to the dead endpoints within the doubled hold: %v before, %v after, want none", before, after)
	}

	// An Update that keeps the endpoints keeps their health; one that
	// drops an endpoint forgets it.
	c.Update(webSnapshot(t, all...))
	before = deadDials()
	requests("after an Update keeping the endpoints", 20)
	if after := deadDials(); !slices.Equal(after, before) {
		t.Errorf("dials to the dead endpoints after an Update keeping them: %v before, %v after, want none", before, after)
	}
	c.Update(webSnapshot(t, all[1:]...))
	c.Update(webSnapshot(t, all...))
	before = deadDials()
	requests("after an Update bringing one dead endpoint back", 20)
	after := deadDials()
	if after[0] != before[0]+1 || !slices.Equal(after[1:], before[1:]) {
		t.Errorf("dials to the dead endpoints after dropping and adding %s: %v before, %v after, want one more dial to it alone", dead[0], before, after)
	}
}
