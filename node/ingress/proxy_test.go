package ingress

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/isle-cluster/isle/node/netns/nstest"
)

// webSnapshot routes every request of any host to the Service default/web
// port 80 ("http"), whose endpoints are addrs.
func webSnapshot(t testing.TB, addrs ...string) Snapshot {
	return Snapshot{
		Classes:   isleClasses(),
		Ingresses: []*networkingv1.Ingress{newIngress("default", "web", 1, rule("", path("Prefix", "/", "web", 80)))},
		Services:  []*corev1.Service{service("default", "web", svcPort("http", 80))},
		Slices:    slicesFor(t, "default", "web", "http", addrs...),
	}
}

// get requests path from the controller's HTTP listener and returns the
// status and body.
func get(t testing.TB, client *http.Client, c *Controller, path string) (int, string) {
	t.Helper()
	resp, err := client.Get("http://" + c.httpAddr.String() + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading body: %v", path, err)
	}
	return resp.StatusCode, string(body)
}

// newClient returns an HTTP client whose idle connections are closed at
// the end of the test.
func newClient(t testing.TB) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func TestUnavailableBackends(t *testing.T) {
	c, err := New(Config{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	c.Update(Snapshot{
		Classes: isleClasses(),
		Ingresses: []*networkingv1.Ingress{newIngress("default", "web", 1, rule("",
			path("Prefix", "/scaled", "hello", 80),
			path("Prefix", "/unready", "unready", 80),
			path("Prefix", "/missing", "missing", 80),
			path("Prefix", "/badport", "hello", "grpc"),
			networkingv1.HTTPIngressPath{Path: "/resource", PathType: ptr(networkingv1.PathTypePrefix), Backend: networkingv1.IngressBackend{
				Resource: &corev1.TypedLocalObjectReference{Kind: "Bucket", Name: "b"}}},
		))},
		Services: []*corev1.Service{service("default", "hello", svcPort("http", 80)), service("default", "unready", svcPort("http", 80))},
		Slices: []*discoveryv1.EndpointSlice{
			endpointSlice("default", "hello", "hello-1", "http", 8080),
			endpointSlice("default", "unready", "unready-1", "http", 8080, "!10.42.0.7"),
		},
	})
	for _, tc := range []struct{ path, body string }{
		{"/scaled", "503 Service Unavailable: no ready endpoints for service default/hello\n"},
		{"/unready", "503 Service Unavailable: no ready endpoints for service default/unready\n"},
		{"/missing", "503 Service Unavailable: service default/missing not found\n"},
		{"/badport", "503 Service Unavailable: service default/hello has no port named \"grpc\"\n"},
		{"/resource", "503 Service Unavailable: resource backends are not supported\n"},
	} {
		rec := httptest.NewRecorder()
		c.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://example.com"+tc.path, nil))
		if rec.Code != http.StatusServiceUnavailable || rec.Body.String() != tc.body {
			t.Errorf("%s: got %d %q, want 503 %q", tc.path, rec.Code, rec.Body, tc.body)
		}
	}
	if got := testutil.ToFloat64(c.env.metrics.byClass[5]); got != 5 {
		t.Errorf("5xx requests counted: %v, want 5", got)
	}
}

func TestPortByNameAndNumber(t *testing.T) {
	c := newController(t, nil)
	httpSrv, altSrv := backendServer(t, "http"), backendServer(t, "alt")
	s := Snapshot{
		Classes: isleClasses(),
		Ingresses: []*networkingv1.Ingress{newIngress("default", "web", 1, rule("",
			path("Prefix", "/by-name", "web", "http"),
			path("Prefix", "/by-number", "web", 8080)))},
		Services: []*corev1.Service{service("default", "web", svcPort("http", 80), svcPort("alt", 8080))},
	}
	s.Slices = append(slicesFor(t, "default", "web", "http", addr(httpSrv)), slicesFor(t, "default", "web", "alt", addr(altSrv))...)
	s.Slices[1].Name = "web-alt" // names from slicesFor repeat across calls
	c.Update(s)
	client := newClient(t)
	for path, want := range map[string]string{"/by-name": "http", "/by-number/x": "alt"} {
		if code, body := get(t, client, c, path); code != 200 || body != want {
			t.Errorf("%s: got %d %q, want 200 %q", path, code, body, want)
		}
	}
}

func TestBalancing(t *testing.T) {
	c := newController(t, nil)
	names := []string{"a", "b", "c"}
	var addrs []string
	for _, n := range names {
		addrs = append(addrs, addr(backendServer(t, n)))
	}
	c.Update(webSnapshot(t, addrs...))
	client := newClient(t)
	count := map[string]int{}
	for range 30 {
		code, body := get(t, client, c, "/")
		if code != 200 {
			t.Fatalf("got %d %q", code, body)
		}
		count[body]++
	}
	for _, n := range names {
		if count[n] != 10 {
			t.Errorf("requests per endpoint: %v, want 10 each", count)
			break
		}
	}

	// An endpoint that turns unready leaves the rotation.
	c.Update(webSnapshot(t, addrs[0], "!"+addrs[1], addrs[2]))
	clear(count)
	for range 20 {
		_, body := get(t, client, c, "/")
		count[body]++
	}
	if count["a"] != 10 || count["c"] != 10 {
		t.Errorf("requests per endpoint with b unready: %v, want a and c 10 each", count)
	}
}

func TestRetryOnConnectFailure(t *testing.T) {
	c := newController(t, nil)
	echo := func(name string) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "%s:%s", name, body)
		}))
		t.Cleanup(s.Close)
		return s
	}
	a, b := echo("a"), echo("b")
	dead := nstest.ClosedAddr(t)
	c.Update(webSnapshot(t, addr(a), dead, addr(b)))
	client := newClient(t)
	for i := range 12 {
		body := fmt.Sprintf("payload %d", i)
		resp, err := client.Post("http://"+c.httpAddr.String()+"/", "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasSuffix(string(got), ":"+body) {
			t.Errorf("POST %d: got %d %q, want 200 with the body echoed", i, resp.StatusCode, got)
		}
	}
	if got := testutil.ToFloat64(c.env.metrics.retries); got != 1 {
		t.Errorf("retries counted: %v, want 1 (the closed port is passed by once noticed)", got)
	}

	// With no endpoint answering, the client gets 502 naming the backend.
	c.Update(webSnapshot(t, dead))
	if code, body := get(t, client, c, "/"); code != http.StatusBadGateway || body != "502 Bad Gateway: no response from backend default/web:80\n" {
		t.Errorf("all endpoints down: got %d %q", code, body)
	}
	if got := testutil.ToFloat64(c.env.metrics.upstreamErrors); got != 1 {
		t.Errorf("upstream errors counted: %v, want 1", got)
	}
}

// connTracker counts a test server's connections by state.
type connTracker struct {
	mu     sync.Mutex
	states map[net.Conn]http.ConnState
}

func (ct *connTracker) hook(conn net.Conn, s http.ConnState) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.states == nil {
		ct.states = map[net.Conn]http.ConnState{}
	}
	ct.states[conn] = s
}

func (ct *connTracker) count(s http.ConnState) int {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	n := 0
	for _, st := range ct.states {
		if st == s {
			n++
		}
	}
	return n
}

func TestIdleConnsOfRemovedEndpointsClosed(t *testing.T) {
	c := newController(t, nil)
	var ct connTracker
	release := make(chan struct{})
	var blocking atomic.Bool
	gone := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if blocking.Load() {
			<-release
		}
		_, _ = w.Write([]byte("gone"))
	}))
	gone.Config.ConnState = ct.hook
	gone.Start()
	t.Cleanup(gone.Close)
	stays := backendServer(t, "stays")

	c.Update(webSnapshot(t, addr(gone)))
	client := newClient(t)
	for range 3 {
		if code, _ := get(t, client, c, "/"); code != 200 {
			t.Fatalf("got %d", code)
		}
	}
	waitFor(t, "an idle connection to the endpoint", func() bool { return ct.count(http.StateIdle) == 1 })
	c.Update(webSnapshot(t, addr(stays)))
	waitFor(t, "the idle connection closed", func() bool { return ct.count(http.StateIdle) == 0 && ct.count(http.StateClosed) == 1 })
	if _, body := get(t, client, c, "/"); body != "stays" {
		t.Errorf("after the update: got %q, want stays", body)
	}

	// A connection in use when its endpoint goes is closed when its
	// request ends, not kept idle.
	c.Update(webSnapshot(t, addr(gone)))
	blocking.Store(true)
	done := make(chan string)
	go func() {
		resp, err := client.Get("http://" + c.httpAddr.String() + "/")
		if err != nil {
			done <- err.Error()
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- string(body)
	}()
	waitFor(t, "the request in flight", func() bool { return ct.count(http.StateActive) == 1 })
	c.Update(webSnapshot(t, addr(stays)))
	close(release)
	if body := <-done; body != "gone" {
		t.Errorf("request in flight: got %q, want gone", body)
	}
	waitFor(t, "the connection closed after its request", func() bool {
		return ct.count(http.StateActive) == 0 && ct.count(http.StateIdle) == 0 && ct.count(http.StateClosed) == 2
	})
}

func TestForwardedHeaders(t *testing.T) {
	c := newController(t, nil)
	seen := make(chan *http.Request, 1)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r
	}))
	t.Cleanup(backend.Close)
	c.Update(webSnapshot(t, addr(backend)))
	req, err := http.NewRequest("GET", "http://"+c.httpAddr.String()+"/some/path?q=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "App.Example.com"
	req.Header.Set("X-Forwarded-For", "203.0.113.7")
	req.Header.Set("X-Real-IP", "203.0.113.8")
	req.Header.Set("X-Forwarded-Proto", "https")
	resp, err := newClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	r := <-seen
	_, port, _ := net.SplitHostPort(c.httpAddr.String())
	if r.Host != "App.Example.com" || r.URL.RequestURI() != "/some/path?q=1" {
		t.Errorf("backend got Host %q URI %q, want them unchanged", r.Host, r.URL.RequestURI())
	}
	for h, want := range map[string]string{
		"X-Forwarded-For":   "203.0.113.7, 127.0.0.1",
		"X-Real-Ip":         "127.0.0.1",
		"X-Forwarded-Host":  "App.Example.com",
		"X-Forwarded-Proto": "http",
		"X-Forwarded-Port":  port,
	} {
		if got := r.Header.Values(h); len(got) != 1 || got[0] != want {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
}

func TestWebSocket(t *testing.T) {
	c := newController(t, nil)
	upgrader := websocket.Upgrader{}
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		for {
			typ, msg, err := conn.ReadMessage()
			if err != nil {
				return
			}
			if err := conn.WriteMessage(typ, append([]byte("echo: "), msg...)); err != nil {
				return
			}
		}
	}))
	t.Cleanup(backend.Close)
	c.Update(webSnapshot(t, addr(backend)))

	conn, resp, err := websocket.DefaultDialer.Dial("ws://"+c.httpAddr.String()+"/ws", nil)
	if err != nil {
		t.Fatalf("dial through the proxy: %v", err)
	}
	defer conn.Close()
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Errorf("status %d, want 101", resp.StatusCode)
	}
	for _, msg := range []string{"hello", "world"} {
		if err := conn.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		_, got, err := conn.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != "echo: "+msg {
			t.Errorf("got %q, want %q", got, "echo: "+msg)
		}
	}
	// The upgraded request is counted when its connection ends.
	conn.Close()
	waitFor(t, "the upgraded request counted as 1xx", func() bool { return testutil.ToFloat64(c.env.metrics.byClass[1]) == 1 })
}

func TestUpdateUnderLoad(t *testing.T) {
	c := newController(t, nil)
	var sets [2][]string
	for i := range 4 {
		sets[i%2] = append(sets[i%2], addr(backendServer(t, fmt.Sprint(i))))
	}
	c.Update(webSnapshot(t, sets[0]...))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var requests, failures atomic.Int64
	client := newClient(t)
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				resp, err := client.Get("http://" + c.httpAddr.String() + "/")
				if err != nil {
					failures.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				requests.Add(1)
				if resp.StatusCode != 200 {
					failures.Add(1)
				}
			}
		})
	}
	for i := range 200 {
		c.Update(webSnapshot(t, sets[i%2]...))
		if i%20 == 0 {
			waitFor(t, "requests to flow", func() bool { return requests.Load() > int64(i) })
		}
	}
	cancel()
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Errorf("%d of %d requests failed during updates", n, requests.Load())
	}
}
