package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/util/exec"
)

type testServer struct {
	*httptest.Server
	rt *fakeRuntime
}

func newTestServer(t *testing.T, pods fakePods) *testServer {
	t.Helper()
	return newTestServerGrace(t, pods, clientSetupGrace)
}

// newTestServerGrace is newTestServer whose sessions' first messages wait
// grace for the client's.
func newTestServerGrace(t *testing.T, pods fakePods, grace time.Duration) *testServer {
	t.Helper()
	rt := &fakeRuntime{waited: make(chan error, 1)}
	h := NewHandler(pods, rt, slog.New(slog.NewTextHandler(t.Output(), nil)))
	h.(*handler).setupGrace = grace
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &testServer{srv, rt}
}

var sessionPods = fakePods{
	"ns/web/app":     {ID: "c-app", Running: running(true)},
	"ns/web/shell":   {ID: "c-shell", TTY: true, Stdin: true, Running: running(true)},
	"ns/web/stopped": {ID: "c-stopped", Running: running(false)},
}

// stream runs a session with kubectl's WebSocket client, speaking protocols
// (v5 if none).
func (s *testServer) stream(t *testing.T, ctx context.Context, path string, opts remotecommand.StreamOptions, protocols ...string) error {
	t.Helper()
	cfg := &rest.Config{Host: s.URL}
	var e remotecommand.Executor
	var err error
	if len(protocols) == 0 {
		e, err = remotecommand.NewWebSocketExecutor(cfg, "GET", s.URL+path)
	} else {
		e, err = remotecommand.NewWebSocketExecutorForProtocols(cfg, "GET", s.URL+path, protocols...)
	}
	if err != nil {
		t.Fatal(err)
	}
	return e.StreamWithContext(ctx, opts)
}

// syncBuffer is a client's stdout that the test reads while it is written.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestExec(t *testing.T) {
	srv := newTestServer(t, sessionPods)
	for _, protocol := range []string{"v5.channel.k8s.io", "v4.channel.k8s.io"} {
		t.Run(protocol, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := srv.stream(t, t.Context(), "/exec/ns/web/app?command=split&stdout=true&stderr=true",
				remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}, protocol)
			var exitErr exec.CodeExitError
			if !errors.As(err, &exitErr) || exitErr.ExitStatus() != 3 {
				t.Errorf("error %v (%T), want exit code 3", err, err)
			}
			if stdout.String() != "to stdout\n" || stderr.String() != "to stderr\n" {
				t.Errorf("stdout %q, stderr %q: want each its own line", stdout.String(), stderr.String())
			}

			stdout.Reset()
			err = srv.stream(t, t.Context(), "/exec/ns/web/app?command=echo&command=hello&command=world&stdout=true",
				remotecommand.StreamOptions{Stdout: &stdout}, protocol)
			if err != nil || stdout.String() != "hello world\n" {
				t.Errorf("echo: stdout %q, error %v", stdout.String(), err)
			}
		})
	}
	if got, want := srv.rt.sessionLog()[0], "exec c-app split tty=false"; got != want {
		t.Errorf("runtime ran %q, want %q", got, want)
	}
}

func TestExecStdinClose(t *testing.T) {
	srv := newTestServer(t, sessionPods)
	var stdout bytes.Buffer
	// v5 closes the command's stdin when the client's ends; cat then exits.
	err := srv.stream(t, t.Context(), "/exec/ns/web/app?command=cat&stdin=true&stdout=true",
		remotecommand.StreamOptions{Stdin: strings.NewReader("line one\nline two\n"), Stdout: &stdout})
	if err != nil {
		t.Fatal(err)
	}
	if want := "line one\nline two\n"; stdout.String() != want {
		t.Errorf("stdout %q, want %q", stdout.String(), want)
	}
}

func TestExecRuntimeError(t *testing.T) {
	srv := newTestServer(t, sessionPods)
	err := srv.stream(t, t.Context(), "/exec/ns/web/app?command=nosuch&stdout=true",
		remotecommand.StreamOptions{Stdout: io.Discard})
	var exitErr exec.CodeExitError
	if err == nil || errors.As(err, &exitErr) || !strings.Contains(err.Error(), "exec in container: nosuch: executable file not found") {
		t.Errorf("error %v, want the runtime's error", err)
	}
}

// sizeQueue gives sizes one at a time, each once the test allows it.
type sizeQueue struct {
	sizes chan remotecommand.TerminalSize
	done  chan struct{}
}

func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	select {
	case s := <-q.sizes:
		return &s
	case <-q.done:
		return nil
	}
}

func TestExecTTYResize(t *testing.T) {
	srv := newTestServer(t, sessionPods)
	q := &sizeQueue{sizes: make(chan remotecommand.TerminalSize), done: make(chan struct{})}
	t.Cleanup(func() { close(q.done) })
	var stdout syncBuffer
	stdinR, stdinW := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		errc <- srv.stream(t, t.Context(), "/exec/ns/web/shell?command=sizes&stdin=true&stdout=true&stderr=true&tty=true",
			remotecommand.StreamOptions{Stdin: stdinR, Stdout: &stdout, Tty: true, TerminalSizeQueue: q})
	}()
	q.sizes <- remotecommand.TerminalSize{Width: 80, Height: 24}
	waitFor(t, "the first size", func() bool { return stdout.String() == "size 80x24\n" })
	q.sizes <- remotecommand.TerminalSize{Width: lastWidth, Height: 43}
	waitFor(t, "the second size", func() bool { return strings.HasSuffix(stdout.String(), "size 132x43\n") })
	io.WriteString(stdinW, "typed\n")
	stdinW.Close()
	if err := wait(t, errc); err != nil {
		t.Fatal(err)
	}
	if want := "size 80x24\nsize 132x43\ntyped\n"; stdout.String() != want {
		t.Errorf("stdout %q, want %q", stdout.String(), want)
	}
	if got, want := srv.rt.sessionLog()[0], "exec c-shell sizes tty=true"; got != want {
		t.Errorf("runtime ran %q, want %q", got, want)
	}
}

func TestExecClientGoneCancels(t *testing.T) {
	srv := newTestServer(t, sessionPods)
	ctx, cancel := context.WithCancel(t.Context())
	var stdout syncBuffer
	errc := make(chan error, 1)
	go func() {
		errc <- srv.stream(t, ctx, "/exec/ns/web/app?command=wait&stdout=true", remotecommand.StreamOptions{Stdout: &stdout})
	}()
	waitFor(t, "the session", func() bool { return len(srv.rt.sessionLog()) == 1 })
	cancel()
	if err := wait(t, errc); !errors.Is(err, context.Canceled) {
		t.Errorf("client error %v, want context.Canceled", err)
	}
	select {
	case err := <-srv.rt.waited:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("runtime's context ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the runtime's context did not end when the client went")
	}
}

func TestAttach(t *testing.T) {
	srv := newTestServer(t, sessionPods)
	var stdout bytes.Buffer
	err := srv.stream(t, t.Context(), "/attach/ns/web/shell?stdin=true&stdout=true&tty=true",
		remotecommand.StreamOptions{Stdin: strings.NewReader("hi\n"), Stdout: &stdout, Tty: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := "attached\nhi\n"; stdout.String() != want {
		t.Errorf("stdout %q, want %q", stdout.String(), want)
	}
	// No terminal for a container without one.
	stdout.Reset()
	err = srv.stream(t, t.Context(), "/attach/ns/web/app?stdout=true&stderr=true&tty=true",
		remotecommand.StreamOptions{Stdout: &stdout, Stderr: io.Discard})
	if err != nil || stdout.String() != "attached\n" {
		t.Errorf("attach without stdin: stdout %q, error %v", stdout.String(), err)
	}
	log := srv.rt.sessionLog()
	if want := []string{"attach c-shell tty=true", "attach c-app tty=false"}; strings.Join(log, ",") != strings.Join(want, ",") {
		t.Errorf("runtime sessions %q, want %q", log, want)
	}
}

func TestSessionRejected(t *testing.T) {
	srv := newTestServer(t, fakePods{
		"ns/web/app":     sessionPods["ns/web/app"],
		"ns/web/stopped": sessionPods["ns/web/stopped"],
	})
	upgrade := http.Header{
		"Connection":             {"Upgrade"},
		"Upgrade":                {"websocket"},
		"Sec-Websocket-Version":  {"13"},
		"Sec-Websocket-Key":      {"dGhlIHNhbXBsZSBub25jZQ=="},
		"Sec-Websocket-Protocol": {"v5.channel.k8s.io"},
	}
	tests := []struct {
		name   string
		method string
		path   string
		header http.Header
		status int
		want   string
	}{
		{"no such pod", "GET", "/exec/ns/nope/app?command=ls&stdout=true", upgrade, 404, `container "app" in pod ns/nope: not found`},
		{"pod manager fails", "GET", "/exec/ns/broken/app?command=ls&stdout=true", upgrade, 500, "store unavailable"},
		{"no command", "GET", "/exec/ns/web/app?stdout=true", upgrade, 400, "command: missing"},
		{"empty command", "GET", "/exec/ns/web/app?command=&stdout=true", upgrade, 400, "command: missing or empty"},
		{"no stream", "GET", "/exec/ns/web/app?command=ls", upgrade, 400, "at least one of stdin, stdout and stderr"},
		{"bad bool", "GET", "/exec/ns/web/app?command=ls&stdout=maybe", upgrade, 400, `stdout="maybe"`},
		{"stopped", "GET", "/exec/ns/web/stopped?command=ls&stdout=true", upgrade, 400, "is not running"},
		{"attach stdin without one", "GET", "/attach/ns/web/app?stdin=true", upgrade, 400, "has no stdin"},
		{"no upgrade", "GET", "/exec/ns/web/app?command=ls&stdout=true", nil, 400, "want a WebSocket upgrade"},
		{"old protocol", "GET", "/exec/ns/web/app?command=ls&stdout=true",
			http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Protocol": {"v3.channel.k8s.io"}},
			400, "v5.channel.k8s.io or v4.channel.k8s.io or channel.k8s.io"},
		{"bad handshake", "GET", "/exec/ns/web/app?command=ls&stdout=true",
			http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Protocol": {"v5.channel.k8s.io"}},
			400, "WebSocket upgrade: websocket: "},
		{"POST (SPDY)", "POST", "/exec/ns/web/app?command=ls&stdout=true", nil, 405, ""},
		{"unknown path", "GET", "/runningpods/", nil, 404, ""},
		{"port-forward over WebSocket", "GET", "/portForward/ns/web", upgrade, 400, "served over SPDY, not WebSocket"},
		{"port-forward without its protocol", "GET", "/portForward/ns/web",
			http.Header{"Connection": {"Upgrade"}, "Upgrade": {"SPDY/3.1"}}, 400, "X-Stream-Protocol-Version"},
		{"port-forward of another protocol", "GET", "/portForward/ns/web",
			http.Header{"Connection": {"Upgrade"}, "Upgrade": {"SPDY/3.1"}, "X-Stream-Protocol-Version": {"portforward.k8s.io/v9"}}, 403, "unable to negotiate"},
		{"port-forward to no such pod", "GET", "/portForward/ns/nope", nil, 404, "pod ns/nope: not found"},
		{"port-forward, pod manager fails", "GET", "/portForward/ns/broken", nil, 500, "store unavailable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tc.method, srv.URL+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header = tc.header
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.want) {
				t.Errorf("%d %q, want %d with %q", resp.StatusCode, body, tc.status, tc.want)
			}
		})
	}
	if log := srv.rt.sessionLog(); len(log) != 0 {
		t.Errorf("runtime ran %q for rejected requests", log)
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func wait(t *testing.T, errc <-chan error) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("session did not end")
		return nil
	}
}

func TestReadSizesKeepsTheLatest(t *testing.T) {
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	tests := []struct {
		name string
		in   string
		want []TerminalSize
	}{
		{"latest wins", `{"Width":80,"Height":24}{"Width":100,"Height":30}` + "\n" + `{"Width":120,"Height":40}`,
			[]TerminalSize{{120, 40}}},
		{"bad JSON drains the rest", `{"Width":80,"Height":24}{"Width":"wide"}{"Width":100,"Height":30}`,
			[]TerminalSize{{80, 24}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Nobody reads sizes while they come: readSizes must not block.
			sizes := make(chan TerminalSize, 1)
			readSizes(strings.NewReader(tc.in), sizes, log)
			var got []TerminalSize
			for s := range sizes {
				got = append(got, s)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("sizes %v, want %v", got, tc.want)
			}
		})
	}
}

// wsMessages dials path with a WebSocket speaking protocol and returns the
// messages the server sends until it closes, as type and payload.
func wsMessages(t *testing.T, srv *testServer, path, protocol string) (got []wsMessage, selected string) {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{protocol}}
	if protocol == "" {
		d.Subprotocols = nil
	}
	ws, resp, err := d.DialContext(t.Context(), "ws"+strings.TrimPrefix(srv.URL, "http")+path, nil)
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", path, err, resp)
	}
	defer ws.Close()
	for {
		typ, b, err := ws.ReadMessage()
		if err != nil {
			if !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
				t.Fatalf("read %s: %v", path, err)
			}
			return got, ws.Subprotocol()
		}
		got = append(got, wsMessage{typ, string(b)})
	}
}

type wsMessage struct {
	typ  int
	data string
}

// The first channel protocol, as the conformance suite's exec over
// WebSocket speaks it: channel-numbered messages, and a status channel
// that carries nothing on success and the failure's text otherwise.
func TestExecChannelV1(t *testing.T) {
	srv := newTestServer(t, sessionPods)
	got, selected := wsMessages(t, srv, "/exec/ns/web/app?command=echo&command=remote+execution&stdout=1&stderr=1", "channel.k8s.io")
	want := []wsMessage{{websocket.BinaryMessage, "\x01"}, {websocket.BinaryMessage, "\x01remote execution\n"}}
	if selected != "channel.k8s.io" || !slices.Equal(got, want) {
		t.Errorf("protocol %q, messages %+v; want channel.k8s.io, %+v", selected, got, want)
	}
	got, _ = wsMessages(t, srv, "/exec/ns/web/app?command=split&stdout=1&stderr=1", "channel.k8s.io")
	want = []wsMessage{{websocket.BinaryMessage, "\x01"}, {websocket.BinaryMessage, "\x01to stdout\n"},
		{websocket.BinaryMessage, "\x02to stderr\n"}, {websocket.BinaryMessage, "\x03command terminated with non-zero exit code: 3"}}
	if !slices.Equal(got, want) {
		t.Errorf("messages %+v, want %+v", got, want)
	}
}

// v5 sends no empty first message: kubectl up to 1.33 would log it as
// from an unknown stream.
func TestExecV5NoEmptyMessage(t *testing.T) {
	srv := newTestServer(t, sessionPods)
	got, _ := wsMessages(t, srv, "/exec/ns/web/app?command=echo&command=hi&stdout=1", "v5.channel.k8s.io")
	if len(got) != 2 || got[0].data != "\x01hi\n" || !strings.HasPrefix(got[1].data, "\x03{") {
		t.Errorf("messages %+v, want stdout's line, then the status", got)
	}
}

// dialV5 opens a v5 session on path with a plain WebSocket client.
func dialV5(t *testing.T, srv *testServer, path string) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{"v5.channel.k8s.io"}}
	ws, resp, err := d.DialContext(t.Context(), "ws"+strings.TrimPrefix(srv.URL, "http")+path, nil)
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", path, err, resp)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

// A session writes nothing before the client has sent a message: kubectl
// up to 1.33 drops what comes before it has made its streams ("Unknown
// stream id 1"). Its first message (stdin here) lets the output go.
func TestSessionWaitsForTheClient(t *testing.T) {
	srv := newTestServerGrace(t, sessionPods, time.Hour)
	ws := dialV5(t, srv, "/attach/ns/web/shell?stdin=1&stdout=1")
	// The attached process wrote at once; nothing may come yet.
	ws.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if typ, b, err := ws.ReadMessage(); err == nil {
		t.Fatalf("message %d %q before the client sent one", typ, b)
	}
	// A read that timed out leaves the connection unusable: another one.
	ws = dialV5(t, srv, "/attach/ns/web/shell?stdin=1&stdout=1")
	if err := ws.WriteMessage(websocket.BinaryMessage, []byte("\x00typed\n")); err != nil {
		t.Fatal(err)
	}
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	var got []string
	for len(got) < 2 {
		_, b, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("after the client's message: %v (got %q)", err, got)
		}
		got = append(got, string(b))
	}
	if want := []string{"\x01attached\n", "\x01typed\n"}; !slices.Equal(got, want) {
		t.Errorf("messages %q, want %q", got, want)
	}
}

// A client that sends nothing (no stdin, no terminal) gets the first
// message after the grace.
func TestSessionGrace(t *testing.T) {
	const grace = 150 * time.Millisecond
	srv := newTestServerGrace(t, sessionPods, grace)
	start := time.Now()
	ws := dialV5(t, srv, "/exec/ns/web/app?command=echo&command=hi&stdout=1")
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, b, err := ws.ReadMessage()
	if err != nil || string(b) != "\x01hi\n" {
		t.Fatalf("first message %q, %v; want stdout's line", b, err)
	}
	if d := time.Since(start); d < grace {
		t.Errorf("first message after %v, before the grace of %v", d, grace)
	}
}
