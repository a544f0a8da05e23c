package apiserver_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/isle-cluster/isle/control/apiserver"
	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/node/agent"
	"github.com/isle-cluster/isle/node/stream"
	"github.com/isle-cluster/isle/raft/rafttest"
)

// streamPods knows one container, c of default/web, with a current and a
// previous log.
type streamPods struct{ dir string }

func (p streamPods) Container(namespace, pod, container string) (stream.ContainerRef, error) {
	if namespace != "default" || pod != "web" || container != "c" {
		return stream.ContainerRef{}, fmt.Errorf("container %q in pod %s/%s: %w", container, namespace, pod, stream.ErrNotFound)
	}
	return stream.ContainerRef{ID: "web-c", LogPath: filepath.Join(p.dir, "c.log"), PreviousLogPath: filepath.Join(p.dir, "c.log.previous"),
		Running: func() bool { return true }}, nil
}

// Dialer: default/web's localhost is this machine's.
func (p streamPods) Dialer(namespace, pod string) (stream.DialFunc, error) {
	if namespace != "default" || pod != "web" {
		return nil, fmt.Errorf("pod %s/%s: %w", namespace, pod, stream.ErrNotFound)
	}
	var d net.Dialer
	return d.DialContext, nil
}

// streamRuntime runs "echo ARGS" and "exit CODE"; Attach greets.
type streamRuntime struct{}

func (streamRuntime) Exec(_ context.Context, id string, cmd []string, s stream.Streams) (int, error) {
	switch {
	case cmd[0] == "echo":
		_, err := fmt.Fprintln(s.Stdout, strings.Join(cmd[1:], " "))
		return 0, err
	case cmd[0] == "exit" && len(cmd) == 2:
		return strconv.Atoi(cmd[1])
	}
	return 0, fmt.Errorf("%s: executable file not found in $PATH", cmd[0])
}

func (streamRuntime) Attach(_ context.Context, id string, s stream.Streams) error {
	_, err := io.WriteString(s.Stdout, "attached to "+id+"\n")
	return err
}

// proxyEnv is an API server over TLS, as a server runs it, with the
// client certificate for the agents, and the streaming server of node
// pi2's agent (package stream behind package agent's TLS) on loopback.
type proxyEnv struct {
	*env
	ca        *pki.CA
	agentAddr string
}

func newProxyEnv(t *testing.T) *proxyEnv {
	t.Helper()
	ca, err := pki.NewCA("isle", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	// pi2's agent, with a certificate for its node name.
	dir := t.TempDir()
	for name, line := range map[string]string{"c.log": "current line", "c.log.previous": "previous line"} {
		rec := "2025-05-01T10:00:00.000000000Z stdout F " + line + "\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(rec), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	csr, key, err := wire.NewCSR("pi2")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := ca.IssueNodeServing("pi2", csr, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, key)
	if err != nil {
		t.Fatal(err)
	}
	agentTLS := agent.StreamTLSConfig(ca.Pool, func() *tls.Certificate { return &pair })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	agentSrv := &http.Server{Handler: stream.NewHandler(streamPods{dir}, streamRuntime{}, quiet), ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = agentSrv.Serve(tls.NewListener(lis, agentTLS)) }()
	t.Cleanup(func() { _ = agentSrv.Close() })

	// The API server.
	c := rafttest.NewCluster(t, rafttest.Options{Size: 1})
	store := registry.New(registry.Config{Node: c.Node(c.IDs()[0]), Logger: quiet})
	nodeLeaf, err := ca.ClientLeaf(wire.APIServerUser, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	nodeTLS := pki.ClientConfig(ca, nodeLeaf)
	api := apiserver.New(apiserver.Config{
		Store: store, AdvertiseAddr: "127.0.0.1:6443", Logger: quiet, NodeTLS: nodeTLS,
		Tokens: func(_ context.Context, tok string) (*apiserver.User, bool) {
			u, ok := users[tok]
			return u, ok
		},
	})
	serving, err := ca.ServingLeaf("apiserver", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	apiTLS, err := pki.ServerConfig(ca, serving)
	if err != nil {
		t.Fatal(err)
	}
	served, _ := apiTLS.GetCertificate(nil)
	apiTLS.Certificates = []tls.Certificate{*served} // or StartTLS adds httptest's own
	srv := httptest.NewUnstartedServer(api)
	srv.TLS, srv.EnableHTTP2 = apiTLS, true // as http.Server.ServeTLS serves it
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)

	e := &proxyEnv{env: &env{store: store, srv: srv, ctx: t.Context()}, ca: ca, agentAddr: lis.Addr().String()}
	nsr, _ := store.Resources().Lookup(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"})
	if _, err := store.Create(e.ctx, nsr, "", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return e
}

// node registers a Node as its agent does, reporting addr (host:port) as
// its InternalIP and streaming port; "" reports neither.
func (e *proxyEnv) node(t *testing.T, name, addr string) {
	t.Helper()
	mustCode(t, e.admin(t, "POST", "/api/v1/nodes", `{"metadata":{"name":"`+name+`"}}`), 201)
	if addr == "" {
		return
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	status := `{"status":{"addresses":[{"type":"InternalIP","address":"` + host + `"},{"type":"Hostname","address":"` + name + `"}],` +
		`"daemonEndpoints":{"kubeletEndpoint":{"Port":` + port + `}}}}`
	mustCode(t, e.admin(t, "PATCH", "/api/v1/nodes/"+name+"/status", status, "Content-Type", "application/merge-patch+json"), 200)
}

// pod creates a running pod on node with the containers.
func (e *proxyEnv) pod(t *testing.T, name, node string, containers ...string) {
	t.Helper()
	var cs []corev1.Container
	for _, c := range containers {
		cs = append(cs, corev1.Container{Name: c, Image: "busybox"})
	}
	p := corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{NodeName: node, Containers: cs}}
	mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/pods", toJSON(t, p)), 201)
	mustCode(t, e.admin(t, "PATCH", "/api/v1/namespaces/default/pods/"+name+"/status", `{"status":{"phase":"Running"}}`,
		"Content-Type", "application/merge-patch+json"), 200)
}

// closedAddr is a loopback address nothing listens on: a port bound
// without listening, held until the test ends, so that connects to it are
// refused and no listener is given it (a port closed at once may go to
// kubectl's own port-forward listener or another test process's).
func closedAddr(t *testing.T) string {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*unix.SockaddrInet4).Port))
}

func TestPodLogsAndExecProxy(t *testing.T) {
	e := newProxyEnv(t)
	e.node(t, "pi2", e.agentAddr)
	e.node(t, "pi3", closedAddr(t))
	e.node(t, "pi4", "")          // an agent without a streaming server
	e.node(t, "pi6", e.agentAddr) // pi6 reports the address of pi2's agent
	e.pod(t, "web", "pi2", "c")
	e.pod(t, "two", "pi2", "a", "b")
	e.pod(t, "ghost", "pi2", "c") // the agent does not know it
	e.pod(t, "unbound", "", "c")
	e.pod(t, "far", "pi3", "c")
	e.pod(t, "old", "pi4", "c")
	e.pod(t, "lost", "pi5", "c") // no such Node
	e.pod(t, "spoofed", "pi6", "c")
	const pods = "/api/v1/namespaces/default/pods/"

	tests := []struct {
		name, method, path string
		token              string
		code               int
		want               string // in the body
	}{
		{"logs", "GET", pods + "web/log", adminToken, 200, "current line\n"},
		{"previous logs", "GET", pods + "web/log?container=c&previous=true", adminToken, 200, "previous line\n"},
		{"logs with timestamps", "GET", pods + "web/log?timestamps=true", adminToken, 200, "2025-05-01T10:00:00Z current line\n"},
		{"a node reads logs", "GET", pods + "web/log", nodeAToken, 403, `User \"system:node:a\" cannot get resource \"pods/log\"`},
		{"nobody reads logs", "GET", pods + "web/log", nobodyToken, 403, `User \"nobody\" cannot get resource \"pods/log\"`},
		{"nobody execs", "GET", pods + "web/exec?command=echo", nobodyToken, 403, `User \"nobody\" cannot create resource \"pods/exec\"`},
		{"missing pod", "GET", pods + "absent/log", adminToken, 404, `pods \"absent\" not found`},
		{"container to choose", "GET", pods + "two/log", adminToken, 400, "a container name must be specified for pod two, choose one of: [a b]"},
		{"unknown container", "GET", pods + "web/log?container=zz", adminToken, 400, "container zz is not valid for pod web"},
		{"unscheduled pod", "GET", pods + "unbound/log", adminToken, 400, "pod unbound does not have a host assigned"},
		{"the agent's not found", "GET", pods + "ghost/log", adminToken, 404, `container \"c\" in pod default/ghost: not found`},
		{"the agent's bad request", "GET", pods + "web/log?tailLines=-5", adminToken, 400, "tailLines"},
		{"the agent's refusal of an exec without an upgrade", "POST", pods + "web/exec?command=echo&stdout=true", adminToken, 400,
			"want a WebSocket upgrade with subprotocol v5.channel.k8s.io or v4.channel.k8s.io or channel.k8s.io, or a SPDY/3.1 upgrade"},
		{"node down", "GET", pods + "far/log", adminToken, 502, `node \"pi3\" does not answer at 127.0.0.1:`},
		{"node without a streaming port", "GET", pods + "old/log", adminToken, 502, `node \"pi4\" reports no streaming port`},
		{"node not in the cluster", "GET", pods + "lost/log", adminToken, 502, `node \"pi5\" is not in the cluster`},
		{"another node's agent", "GET", pods + "spoofed/log", adminToken, 502, "certificate is valid for pi2, not pi6"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, req{method: tc.method, path: tc.path, token: tc.token})
			if r.code != tc.code || !strings.Contains(string(r.body), tc.want) {
				t.Fatalf("%d %s, want %d with %q", r.code, r, tc.code, tc.want)
			}
			if tc.code >= 400 {
				if st := r.status(t); st.Code != int32(tc.code) {
					t.Fatalf("Status code %d, want %d", st.Code, tc.code)
				}
			}
			if r.code == 502 && r.header.Get("Retry-After") != "" {
				t.Error("a node that does not answer is retried at once (Retry-After)")
			}
		})
	}

	t.Run("follow", func(t *testing.T) {
		// The log streams as it comes: the first line arrives while the
		// container runs on.
		ctx, cancel := context.WithTimeout(e.ctx, wait)
		defer cancel()
		hr, err := http.NewRequestWithContext(ctx, "GET", e.srv.URL+pods+"web/log?follow=true", nil)
		if err != nil {
			t.Fatal(err)
		}
		hr.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := e.srv.Client().Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil || line != "current line\n" {
			t.Fatalf("first line %q, %v", line, err)
		}
	})
	// kubectl up to 1.29 speaks SPDY, from 1.30 WebSocket.
	versions := map[string]string{"default": ""}
	for _, v := range []string{"1.27", "1.29", "1.30", "1.33"} {
		if p := "/usr/lib/google-cloud-sdk/bin/kubectl." + v; fileExists(p) {
			versions[v] = p
		}
	}
	for v, bin := range versions {
		t.Run("kubectl "+v, func(t *testing.T) { kubectlStreams(t, e, bin) })
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// newKubectl returns a runner of kubectl bin (the one on PATH if "") as
// the administrator of e, with a HOME of its own.
func newKubectl(t *testing.T, e *proxyEnv, bin string) func(args ...string) (stdout, stderr string, code int) {
	t.Helper()
	command := kubectlCommand(t, e, bin)
	return func(args ...string) (stdout, stderr string, code int) {
		ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
		defer cancel()
		cmd := command(ctx, args...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exitErr *exec.ExitError
		switch {
		case errors.As(err, &exitErr):
			code = exitErr.ExitCode()
		case err != nil:
			t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
		}
		return out.String(), errOut.String(), code
	}
}

// kubectlCommand returns a maker of commands of kubectl bin (the one on
// PATH if "") as the administrator of e, with a HOME of its own.
func kubectlCommand(t *testing.T, e *proxyEnv, bin string) func(ctx context.Context, args ...string) *exec.Cmd {
	t.Helper()
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("kubectl"); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatal("kubectl is required: install it (/usr/bin/kubectl)")
			}
			t.Skip("no kubectl on this machine")
		}
	}
	home := t.TempDir()
	kc, err := pki.Kubeconfig("isle", e.srv.URL, e.ca.CertPEM(), "admin", nil, nil, adminToken)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(home, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context, args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), "HOME="+home, "KUBECONFIG="+kubeconfig)
		return cmd
	}
}

// kubectlStreams runs the real kubectl's logs, exec and attach: bin, or
// the one on PATH.
func kubectlStreams(t *testing.T, e *proxyEnv, bin string) {
	kubectl := newKubectl(t, e, bin)
	tests := []struct {
		name      string
		args      []string
		stdout    string
		code      int
		stderrHas string
	}{
		{"logs", []string{"logs", "web"}, "current line\n", 0, ""},
		{"logs --previous", []string{"logs", "web", "--previous"}, "previous line\n", 0, ""},
		{"exec", []string{"exec", "web", "--", "echo", "hello", "world"}, "hello world\n", 0, ""},
		{"exec exit code", []string{"exec", "web", "--", "exit", "3"}, "", 3, "command terminated with exit code 3"},
		{"attach", []string{"attach", "web"}, "attached to web-c\n", 0, ""},
		{"exec in a container the agent does not know", []string{"exec", "ghost", "--", "echo"}, "", 1, `Error from server (NotFound): container "c" in pod default/ghost: not found`},
		{"logs of a node that does not answer", []string{"logs", "far"}, "", 1, `Error from server: node "pi3" does not answer at 127.0.0.1:`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The agent here answers at once: kubectl 1.30 to 1.33 would
			// drop what comes before they made their streams ("Unknown
			// stream id 1, discarding message") but for the agent's wait.
			out, errOut, code := kubectl(tc.args...)
			// kubectl attach says this of its own, unless -q.
			errOut = strings.ReplaceAll(errOut, "If you don't see a command prompt, try pressing enter.\n", "")
			if out != tc.stdout || code != tc.code || !strings.Contains(errOut, tc.stderrHas) || (tc.stderrHas == "" && errOut != "") {
				t.Fatalf("kubectl %s: exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr with %q",
					strings.Join(tc.args, " "), code, out, errOut, tc.code, tc.stdout, tc.stderrHas)
			}
		})
	}
}

// The real kubectl's port-forward through the API server to the pod's
// agent: kubectl tries WebSocket, is refused, and speaks SPDY. Each
// connection to its local port reaches the pod's port on the pod's
// localhost (this machine's, for the test's agent).
func TestPortForward(t *testing.T) {
	e := newProxyEnv(t)
	e.node(t, "pi2", e.agentAddr)
	e.pod(t, "web", "pi2", "c")
	kubectl := kubectlCommand(t, e, "")
	lis, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				fmt.Fprintf(c, "the pod heard %s", line)
			}()
		}
	}()
	podPort := lis.Addr().(*net.TCPAddr).Port

	_, closedPort, _ := net.SplitHostPort(closedAddr(t))
	cmd := kubectl(e.ctx, "port-forward", "pod/web", fmt.Sprintf(":%d", podPort), ":"+closedPort)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() string { // kubectl's stderr, once it has ended
		once.Do(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return stderr.String()
	}
	defer stop()
	// "Forwarding from 127.0.0.1:LOCAL -> PORT", one line per port.
	local := map[string]string{}
	sc := bufio.NewScanner(stdout)
	for len(local) < 2 && sc.Scan() {
		var l, p string
		if _, err := fmt.Sscanf(sc.Text(), "Forwarding from %s -> %s", &l, &p); err == nil && strings.HasPrefix(l, "127.0.0.1:") {
			local[p] = l
		}
	}
	if len(local) < 2 {
		t.Fatalf("kubectl port-forward did not listen: %v; stderr:\n%s", local, stop())
	}
	for i := range 3 {
		c, err := net.DialTimeout("tcp", local[strconv.Itoa(podPort)], 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		fmt.Fprintf(c, "hello %d\n", i)
		got, err := io.ReadAll(c)
		c.Close()
		if want := fmt.Sprintf("the pod heard hello %d\n", i); string(got) != want {
			t.Fatalf("connection %d through kubectl port-forward: %q, %v; want %q; kubectl's stderr:\n%s", i, got, err, want, stop())
		}
	}
	// A port nothing listens on: the connection ends with nothing, and
	// kubectl says why.
	c, err := net.DialTimeout("tcp", local[closedPort], 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	got, _ := io.ReadAll(c)
	c.Close()
	if len(got) != 0 {
		t.Errorf("a port nothing listens on answered %q", got)
	}
	if errOut := stop(); !strings.Contains(errOut, "connecting to port "+closedPort+" of the pod") {
		t.Errorf("kubectl's stderr does not name the refused port %s:\n%s", closedPort, errOut)
	}
}
