package islemap

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

const testToken = "abcdef.0123456789abcdef"

// seen is a request as the API server behind the proxy saw it.
type seen struct {
	method, path, rawQuery, host string
	auth, cookie, origin         string
}

// fakeAPI is an API server (TLS, as isle's is) that records what it is
// asked and answers 200 to everything; /ws upgrades to a WebSocket that
// echoes.
type fakeAPI struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []seen
}

func newFakeAPI(t *testing.T) *fakeAPI {
	t.Helper()
	api := &fakeAPI{}
	up := websocket.Upgrader{}
	api.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api.mu.Lock()
		api.reqs = append(api.reqs, seen{
			method: r.Method, path: r.URL.Path, rawQuery: r.URL.RawQuery, host: r.Host,
			auth: r.Header.Get("Authorization"), cookie: r.Header.Get("Cookie"), origin: r.Header.Get("Origin"),
		})
		api.mu.Unlock()
		if r.URL.Path == "/ws" {
			c, err := up.Upgrade(w, r, nil)
			if err != nil {
				return // Upgrade answered the error
			}
			defer c.Close()
			for {
				typ, msg, err := c.ReadMessage()
				if err != nil {
					return
				}
				if err := c.WriteMessage(typ, append([]byte("echo: "), msg...)); err != nil {
					return
				}
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Status","from":"api"}`))
	}))
	t.Cleanup(api.Close)
	return api
}

// take returns the requests seen since the last take.
func (api *fakeAPI) take() []seen {
	api.mu.Lock()
	defer api.mu.Unlock()
	r := api.reqs
	api.reqs = nil
	return r
}

func (api *fakeAPI) proxy(t *testing.T, token string) http.Handler {
	t.Helper()
	u, err := url.Parse(api.URL)
	if err != nil {
		t.Fatal(err)
	}
	return Proxy(u, api.Client().Transport, token)
}

func TestProxy(t *testing.T) {
	api := newFakeAPI(t)
	target, _ := url.Parse(api.URL)
	p := api.proxy(t, testToken)

	const local = "127.0.0.1:8001"
	tests := []struct {
		name           string
		method, target string
		host           string            // the Host header; local if empty
		header         map[string]string // more request headers
		want           int
		location       string // of a redirect
	}{
		{name: "list pods", method: "GET", target: "/api/v1/pods", want: http.StatusOK},
		{name: "watch pods with a query", method: "GET", target: "/api/v1/namespaces/default/pods?watch=1&resourceVersion=10", want: http.StatusOK},
		{name: "HEAD", method: "HEAD", target: "/api/v1/nodes", want: http.StatusOK},
		{name: "the map's files", method: "GET", target: Path + "main.js", want: http.StatusOK},

		// Only loopback, by name or address.
		{name: "foreign host", method: "GET", target: "/api/v1/pods", host: "evil.example:8001", want: http.StatusForbidden},
		{name: "foreign host without port", method: "GET", target: "/api/v1/pods", host: "evil.example", want: http.StatusForbidden},
		{name: "rebound name of loopback", method: "GET", target: "/api/v1/pods", host: "localhost.evil.example:8001", want: http.StatusForbidden},
		{name: "private address", method: "GET", target: "/api/v1/pods", host: "192.168.1.10:8001", want: http.StatusForbidden},
		{name: "unspecified address", method: "GET", target: "/api/v1/pods", host: "0.0.0.0:8001", want: http.StatusForbidden},
		{name: "localhost", method: "GET", target: "/api/v1/pods", host: "localhost:8001", want: http.StatusOK},
		{name: "IPv6 loopback", method: "GET", target: "/api/v1/pods", host: "[::1]:8001", want: http.StatusOK},
		{name: "loopback without port", method: "GET", target: "/api/v1/pods", host: "127.0.0.1", want: http.StatusOK},
		{name: "another loopback address", method: "GET", target: "/api/v1/pods", host: "127.0.0.2:8001", want: http.StatusOK},

		// Only the proxy's own pages.
		{name: "foreign origin", method: "GET", target: "/api/v1/pods", header: map[string]string{"Origin": "http://evil.example"}, want: http.StatusForbidden},
		{name: "null origin", method: "GET", target: "/api/v1/pods", header: map[string]string{"Origin": "null"}, want: http.StatusForbidden},
		{name: "other loopback port's origin", method: "GET", target: "/api/v1/pods", header: map[string]string{"Origin": "http://127.0.0.1:9999"}, want: http.StatusForbidden},
		{name: "https origin", method: "GET", target: "/api/v1/pods", header: map[string]string{"Origin": "https://" + local}, want: http.StatusForbidden},
		{name: "own origin", method: "GET", target: "/api/v1/pods", header: map[string]string{"Origin": "http://" + local}, want: http.StatusOK},
		{name: "own origin, localhost", method: "GET", target: "/api/v1/pods", host: "localhost:8001", header: map[string]string{"Origin": "http://localhost:8001"}, want: http.StatusOK},
		{name: "foreign origin posting a review", method: "POST", target: "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", header: map[string]string{"Origin": "http://evil.example"}, want: http.StatusForbidden},

		// Only what the map asks.
		{name: "create a pod", method: "POST", target: "/api/v1/namespaces/default/pods", want: http.StatusForbidden},
		{name: "access review", method: "POST", target: "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", header: map[string]string{"Origin": "http://" + local}, want: http.StatusOK},
		{name: "subject access review", method: "POST", target: "/apis/authorization.k8s.io/v1/subjectaccessreviews", want: http.StatusForbidden},
		{name: "token review", method: "POST", target: "/apis/authentication.k8s.io/v1/tokenreviews", want: http.StatusForbidden},
		{name: "delete a pod", method: "DELETE", target: "/api/v1/namespaces/default/pods/web-1", want: http.StatusOK},
		{name: "delete pods", method: "DELETE", target: "/api/v1/namespaces/default/pods", want: http.StatusForbidden},
		{name: "delete a deployment", method: "DELETE", target: "/apis/apps/v1/namespaces/default/deployments/web", want: http.StatusForbidden},
		{name: "delete a service", method: "DELETE", target: "/api/v1/namespaces/default/services/web", want: http.StatusForbidden},
		{name: "delete a namespace", method: "DELETE", target: "/api/v1/namespaces/default", want: http.StatusForbidden},
		{name: "delete a node", method: "DELETE", target: "/api/v1/nodes/board-1", want: http.StatusForbidden},
		{name: "delete a pod's subresource", method: "DELETE", target: "/api/v1/namespaces/default/pods/web-1/status", want: http.StatusForbidden},
		{name: "put a pod", method: "PUT", target: "/api/v1/namespaces/default/pods/web-1", want: http.StatusForbidden},
		{name: "patch a pod", method: "PATCH", target: "/api/v1/namespaces/default/pods/web-1", want: http.StatusForbidden},
		{name: "exec", method: "GET", target: "/api/v1/namespaces/default/pods/web-1/exec?command=sh&stdin=true", want: http.StatusForbidden},
		{name: "attach", method: "GET", target: "/api/v1/namespaces/default/pods/web-1/attach", want: http.StatusForbidden},
		{name: "portforward", method: "GET", target: "/api/v1/namespaces/default/pods/web-1/portforward", want: http.StatusForbidden},
		{name: "exec with trailing slash", method: "GET", target: "/api/v1/namespaces/default/pods/web-1/exec/", want: http.StatusForbidden},
		{name: "exec escaped", method: "GET", target: "/api/v1/namespaces/default/pods/web-1/%65xec", want: http.StatusForbidden},
		{name: "exec by POST", method: "POST", target: "/api/v1/namespaces/default/pods/web-1/exec", want: http.StatusForbidden},
		{name: "pod named exec-demo", method: "GET", target: "/api/v1/namespaces/default/pods/exec-demo", want: http.StatusOK},
		{name: "pod named exec", method: "GET", target: "/api/v1/namespaces/default/pods/exec", want: http.StatusOK},
		{name: "pod's log", method: "GET", target: "/api/v1/namespaces/default/pods/web-1/log", want: http.StatusOK},
		// A proxied page would run in the proxy's origin, with its credentials.
		{name: "pod proxy", method: "GET", target: "/api/v1/namespaces/default/pods/web-1/proxy/", want: http.StatusForbidden},
		{name: "service proxy", method: "GET", target: "/api/v1/namespaces/default/services/web:80/proxy/x", want: http.StatusForbidden},
		{name: "node proxy", method: "GET", target: "/api/v1/nodes/pi1/proxy/metrics", want: http.StatusForbidden},
		{name: "pod named proxy", method: "GET", target: "/api/v1/namespaces/default/pods/proxy", want: http.StatusOK},
		{name: "namespace named pods", method: "GET", target: "/api/v1/namespaces/pods/pods/web-1/exec", want: http.StatusForbidden},
		{name: "host in capitals", method: "GET", target: "/api/v1/pods", host: "LOCALHOST:8001", want: http.StatusOK},

		{name: "root", method: "GET", target: "/", want: http.StatusFound, location: Path},
		{name: "root, foreign host", method: "GET", target: "/", host: "evil.example", want: http.StatusForbidden},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api.take()
			host := tc.host
			if host == "" {
				host = local
			}
			r := httptest.NewRequest(tc.method, "http://"+local+tc.target, nil)
			r.Host = host
			r.Header.Set("Cookie", "session=secret")
			for k, v := range tc.header {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			p.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Fatalf("%s %s (Host %s): status %d, want %d: %s", tc.method, tc.target, host, w.Code, tc.want, w.Body)
			}
			reqs := api.take()
			if tc.want != http.StatusOK {
				if len(reqs) != 0 {
					t.Errorf("refused, yet the API server was asked %+v", reqs)
				}
				if tc.location != "" {
					if got := w.Header().Get("Location"); got != tc.location {
						t.Errorf("Location %q, want %q", got, tc.location)
					}
				}
				return
			}
			if len(reqs) != 1 {
				t.Fatalf("the API server was asked %d times, want once: %+v", len(reqs), reqs)
			}
			got := reqs[0]
			want, _ := url.Parse(tc.target)
			if got.method != tc.method || got.path != want.Path || got.rawQuery != want.RawQuery {
				t.Errorf("the API server was asked %s %s?%s, want %s %s?%s", got.method, got.path, got.rawQuery, tc.method, want.Path, want.RawQuery)
			}
			if got.auth != "Bearer "+testToken {
				t.Errorf("Authorization %q, want the token", got.auth)
			}
			if got.cookie != "" {
				t.Errorf("Cookie %q passed on", got.cookie)
			}
			if got.origin != "" {
				t.Errorf("Origin %q passed on", got.origin)
			}
			if got.host != target.Host {
				t.Errorf("the API server saw Host %q, want its own %q", got.host, target.Host)
			}
			if tc.method == "GET" && !strings.Contains(w.Body.String(), `"from":"api"`) {
				t.Errorf("body %q is not the API server's", w.Body)
			}
		})
	}
}

// TestProxyAuthorization: the token is the proxy's, whatever the
// request carried; without a token, the transport's certificate is the
// credential and the request's own Authorization passes.
func TestProxyAuthorization(t *testing.T) {
	api := newFakeAPI(t)
	for _, tc := range []struct {
		name, token, sent, want string
	}{
		{"token replaces the request's", testToken, "Bearer forged", "Bearer " + testToken},
		{"token", testToken, "", "Bearer " + testToken},
		{"no token", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := api.proxy(t, tc.token)
			api.take()
			r := httptest.NewRequest("GET", "http://127.0.0.1:8001/api/v1/pods", nil)
			if tc.sent != "" {
				r.Header.Set("Authorization", tc.sent)
			}
			w := httptest.NewRecorder()
			p.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			reqs := api.take()
			if len(reqs) != 1 {
				t.Fatalf("%d requests", len(reqs))
			}
			if reqs[0].auth != tc.want {
				t.Errorf("Authorization %q, want %q", reqs[0].auth, tc.want)
			}
		})
	}
}

// TestProxyTargetPath: a target with a path prefix keeps it.
func TestProxyTargetPath(t *testing.T) {
	api := newFakeAPI(t)
	u, _ := url.Parse(api.URL + "/prefix")
	p := Proxy(u, api.Client().Transport, testToken)
	r := httptest.NewRequest("GET", "http://127.0.0.1:8001/api/v1/pods", nil)
	w := httptest.NewRecorder()
	p.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
	reqs := api.take()
	if len(reqs) != 1 || reqs[0].path != "/prefix/api/v1/pods" {
		t.Errorf("the API server was asked %+v, want /prefix/api/v1/pods", reqs)
	}
}

// TestProxyWebSocket: a WebSocket (as a watch or a log stream might be)
// passes through both ways, with the proxy's credentials.
func TestProxyWebSocket(t *testing.T) {
	api := newFakeAPI(t)
	srv := httptest.NewServer(api.proxy(t, testToken)) // on 127.0.0.1
	t.Cleanup(srv.Close)
	wsURL := "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"

	c, resp, err := websocket.DefaultDialer.Dial(wsURL, nil)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial %s through the proxy: %v (status %d)", wsURL, err, status)
	}
	defer c.Close()
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d, want 101", resp.StatusCode)
	}
	_ = c.NetConn().SetDeadline(time.Now().Add(10 * time.Second))
	for _, msg := range []string{"hello", "island"} {
		if err := c.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
			t.Fatalf("write: %v", err)
		}
		typ, got, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if typ != websocket.TextMessage || string(got) != "echo: "+msg {
			t.Errorf("read %d %q, want the echo of %q", typ, got, msg)
		}
	}
	reqs := api.take()
	if len(reqs) != 1 {
		t.Fatalf("the API server was asked %d times, want once: %+v", len(reqs), reqs)
	}
	if reqs[0].auth != "Bearer "+testToken {
		t.Errorf("Authorization %q, want the token", reqs[0].auth)
	}

	// A foreign page's WebSocket (browsers send its Origin) is refused.
	h := http.Header{"Origin": {"http://evil.example"}}
	if c, resp, err := websocket.DefaultDialer.Dial(wsURL, h); err == nil {
		c.Close()
		t.Errorf("a WebSocket from a foreign origin passed")
	} else if resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("a WebSocket from a foreign origin: %v, want 403", err)
	}
	// As is an exec session, even of the proxy's own page.
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	h = http.Header{"Origin": {"http://127.0.0.1:" + port}}
	execURL := "ws" + strings.TrimPrefix(srv.URL, "http") + "/api/v1/namespaces/default/pods/web-1/exec?command=sh"
	if c, resp, err := websocket.DefaultDialer.Dial(execURL, h); err == nil {
		c.Close()
		t.Errorf("an exec WebSocket passed")
	} else if resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("an exec WebSocket: %v, want 403", err)
	}
	if reqs := api.take(); len(reqs) != 0 {
		t.Errorf("refused WebSockets reached the API server: %+v", reqs)
	}
}

func TestProxyURL(t *testing.T) {
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8001}
	if got, want := ProxyURL(addr), "http://127.0.0.1:8001/isle/map/"; got != want {
		t.Errorf("ProxyURL(%v) = %q, want %q", addr, got, want)
	}
	addr6 := &net.TCPAddr{IP: net.IPv6loopback, Port: 8001}
	if got, want := ProxyURL(addr6), "http://[::1]:8001/isle/map/"; got != want {
		t.Errorf("ProxyURL(%v) = %q, want %q", addr6, got, want)
	}
}

// TestProxyRefusesSessionsByLegacyWatchPath: the API server (isle's, as
// Kubernetes' did) still reads the legacy /watch/ prefix, and takes
// GET /api/v1/watch/namespaces/NS/pods/NAME/exec for pods/exec (see
// parseResourcePath and isConnect in control/apiserver/route.go): the
// proxy must refuse it as it does the path without /watch/.
func TestProxyRefusesSessionsByLegacyWatchPath(t *testing.T) {
	api := newFakeAPI(t)
	p := api.proxy(t, testToken)
	for _, tc := range []struct{ name, target string }{
		{"exec", "/api/v1/watch/namespaces/default/pods/web-1/exec?command=sh&stdin=true&tty=true"},
		{"attach", "/api/v1/watch/namespaces/default/pods/web-1/attach?stdin=true"},
		{"portforward", "/api/v1/watch/namespaces/default/pods/web-1/portforward?ports=80"},
	} {
		target := tc.target
		t.Run(tc.name, func(t *testing.T) {
			api.take()
			r := httptest.NewRequest("GET", "http://127.0.0.1:8001"+target, nil)
			w := httptest.NewRecorder()
			p.ServeHTTP(w, r)
			if w.Code != http.StatusForbidden {
				t.Errorf("GET %s: status %d, want 403", target, w.Code)
			}
			if reqs := api.take(); len(reqs) != 0 {
				t.Errorf("a session in a container reached the API server with the proxy's token: %+v", reqs)
			}
		})
	}
}

// TestProxyWebSocketHTTP2: isle map's transport attempts HTTP/2 (as
// cmd/isle's does); a WebSocket upgrade still passes, over HTTP/1.1.
func TestProxyWebSocketHTTP2(t *testing.T) {
	var mu sync.Mutex
	var protos []string
	up := websocket.Upgrader{}
	api := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		protos = append(protos, r.Proto)
		mu.Unlock()
		if r.URL.Path != "/ws" {
			_, _ = w.Write([]byte("{}"))
			return
		}
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		typ, msg, err := c.ReadMessage()
		if err == nil {
			_ = c.WriteMessage(typ, append([]byte("echo: "), msg...))
		}
	}))
	api.EnableHTTP2 = true
	api.StartTLS()
	t.Cleanup(api.Close)
	target, _ := url.Parse(api.URL)
	transport := &http.Transport{
		TLSClientConfig:   api.Client().Transport.(*http.Transport).TLSClientConfig.Clone(),
		ForceAttemptHTTP2: true,
	}
	t.Cleanup(transport.CloseIdleConnections)
	srv := httptest.NewServer(Proxy(target, transport, testToken))
	t.Cleanup(srv.Close)

	resp, err := http.Get(srv.URL + "/api/v1/pods")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET through the proxy: status %d", resp.StatusCode)
	}
	c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", nil)
	if err != nil {
		t.Fatalf("WebSocket through the proxy over an HTTP/2 transport: %v", err)
	}
	defer c.Close()
	_ = c.NetConn().SetDeadline(time.Now().Add(10 * time.Second))
	if err := c.WriteMessage(websocket.TextMessage, []byte("h2")); err != nil {
		t.Fatal(err)
	}
	if _, got, err := c.ReadMessage(); err != nil || string(got) != "echo: h2" {
		t.Errorf("read %q, %v; want the echo", got, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(protos) != 2 || protos[0] != "HTTP/2.0" || protos[1] != "HTTP/1.1" {
		t.Errorf("the API server was asked with %v, want HTTP/2.0 then HTTP/1.1 for the upgrade", protos)
	}
}
