package stream

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/util/exec"
)

// streamSPDY runs a session with kubectl's SPDY client (kubectl up to
// 1.29 speaks nothing else). The API server sends it on as GET.
func (s *testServer) streamSPDY(t *testing.T, path string, opts remotecommand.StreamOptions) error {
	t.Helper()
	u, err := url.Parse(s.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	e, err := remotecommand.NewSPDYExecutor(&rest.Config{Host: s.URL}, http.MethodGet, u)
	if err != nil {
		t.Fatal(err)
	}
	return e.StreamWithContext(t.Context(), opts)
}

func TestSPDYExec(t *testing.T) {
	srv := newTestServer(t, sessionPods)
	var stdout, stderr strings.Builder
	err := srv.streamSPDY(t, "/exec/ns/web/app?command=split&stdout=true&stderr=true",
		remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
	var exitErr exec.CodeExitError
	if !errors.As(err, &exitErr) || exitErr.ExitStatus() != 3 {
		t.Errorf("error %v (%T), want exit code 3", err, err)
	}
	if stdout.String() != "to stdout\n" || stderr.String() != "to stderr\n" {
		t.Errorf("stdout %q, stderr %q: want each its own line", stdout.String(), stderr.String())
	}
	stdout.Reset()
	err = srv.streamSPDY(t, "/exec/ns/web/app?command=cat&stdin=true&stdout=true",
		remotecommand.StreamOptions{Stdin: strings.NewReader("line one\nline two\n"), Stdout: &stdout})
	if err != nil || stdout.String() != "line one\nline two\n" {
		t.Errorf("cat: stdout %q, error %v", stdout.String(), err)
	}
	err = srv.streamSPDY(t, "/exec/ns/web/app?command=nosuch&stdout=true", remotecommand.StreamOptions{Stdout: io.Discard})
	if err == nil || errors.As(err, &exitErr) || !strings.Contains(err.Error(), "exec in container: nosuch: executable file not found") {
		t.Errorf("error %v, want the runtime's error", err)
	}
}

func TestSPDYTerminal(t *testing.T) {
	srv := newTestServer(t, sessionPods)
	q := &sizeQueue{sizes: make(chan remotecommand.TerminalSize), done: make(chan struct{})}
	t.Cleanup(func() { close(q.done) })
	var stdout syncBuffer
	stdinR, stdinW := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		errc <- srv.streamSPDY(t, "/exec/ns/web/shell?command=sizes&stdin=true&stdout=true&stderr=true&tty=true",
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
	var out strings.Builder
	err := srv.streamSPDY(t, "/attach/ns/web/shell?stdin=true&stdout=true&tty=true",
		remotecommand.StreamOptions{Stdin: strings.NewReader("hi\n"), Stdout: &out, Tty: true})
	if err != nil || out.String() != "attached\nhi\n" {
		t.Errorf("attach: stdout %q, error %v", out.String(), err)
	}
	log := srv.rt.sessionLog()
	if want := []string{"exec c-shell sizes tty=true", "attach c-shell tty=true"}; strings.Join(log, ",") != strings.Join(want, ",") {
		t.Errorf("runtime sessions %q, want %q", log, want)
	}
}

// A SPDY client that speaks none of the protocols served is refused,
// saying which are.
func TestSPDYProtocolRefused(t *testing.T) {
	srv := newTestServer(t, sessionPods)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/exec/ns/web/app?command=echo&stdout=1", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "SPDY/3.1")
	req.Header.Set("X-Stream-Protocol-Version", "v2.channel.k8s.io")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "v4.channel.k8s.io") {
		t.Errorf("answer %d %q, want 403 naming v4.channel.k8s.io", resp.StatusCode, body)
	}
	if len(srv.rt.sessionLog()) != 0 {
		t.Errorf("the runtime ran %q", srv.rt.sessionLog())
	}
}
