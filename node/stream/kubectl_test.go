package stream

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// kubectlMinor is the path of the kubectl of that minor version bundled on
// these machines; without it the test fails in CI and skips elsewhere.
func kubectlMinor(t *testing.T, minor string) string {
	t.Helper()
	p := "/usr/lib/google-cloud-sdk/bin/kubectl." + minor
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("kubectl %s is required (%s): %v", minor, p, err)
		}
		t.Skipf("no kubectl %s on this machine", minor)
	}
	return p
}

// fakeAPIServer is just enough of an API server for kubectl exec and
// attach to pod default/web: discovery, the pod, and its exec and attach
// handed to the streaming handler h, as the API server proxies them.
func fakeAPIServer(t *testing.T, h http.Handler) (kubeconfig string) {
	t.Helper()
	mux := http.NewServeMux()
	js := func(s string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, s)
		}
	}
	mux.HandleFunc("GET /api", js(`{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[{"clientCIDR":"0.0.0.0/0","serverAddress":"127.0.0.1"}]}`))
	mux.HandleFunc("GET /apis", js(`{"kind":"APIGroupList","apiVersion":"v1","groups":[]}`))
	mux.HandleFunc("GET /version", js(`{"major":"1","minor":"33","gitVersion":"v1.33.0"}`))
	mux.HandleFunc("GET /api/v1", js(`{"kind":"APIResourceList","groupVersion":"v1","resources":[`+
		`{"name":"pods","singularName":"pod","namespaced":true,"kind":"Pod","verbs":["get","list"],"shortNames":["po"]},`+
		`{"name":"pods/exec","namespaced":true,"kind":"PodExecOptions","verbs":["create","get"]},`+
		`{"name":"pods/attach","namespaced":true,"kind":"PodAttachOptions","verbs":["create","get"]}]}`))
	mux.HandleFunc("GET /api/v1/namespaces/default/pods/web", js(`{"kind":"Pod","apiVersion":"v1",`+
		`"metadata":{"name":"web","namespace":"default","uid":"u1"},`+
		`"spec":{"nodeName":"n1","containers":[{"name":"app","image":"x","stdin":true}]},`+
		`"status":{"phase":"Running","containerStatuses":[{"name":"app","ready":true,"state":{"running":{}}}]}}`))
	for _, sub := range []string{"exec", "attach"} {
		mux.HandleFunc("/api/v1/namespaces/default/pods/web/"+sub, func(w http.ResponseWriter, r *http.Request) {
			r.URL.Path, r.Method = "/"+sub+"/default/web/app", http.MethodGet // SPDY POSTs
			h.ServeHTTP(w, r)
		})
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
contexts: [{name: c, context: {cluster: c, user: u, namespace: default}}]
current-context: c
users: [{name: u, user: {token: t}}]
`, srv.URL)
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

// The real kubectl, the oldest bundled (SPDY), the oldest speaking
// WebSocket and the newest, print nothing of their own on stderr for exec
// and attach, and lose nothing, even where the container writes at once:
// kubectl 1.30 to 1.33 dropped a message that came before they had made
// their streams, with "Unknown stream id 1, discarding message" (about one
// session in 300 here, without channelConn.ready).
func TestRealKubectlQuiet(t *testing.T) {
	rt := &fakeRuntime{waited: make(chan error, 1)}
	h := NewHandler(fakePods{"default/web/app": {ID: "c-app", Running: running(true), Stdin: true}}, rt, nil)
	kubeconfig := fakeAPIServer(t, h)
	for _, minor := range []string{"1.27", "1.30", "1.33"} {
		t.Run("kubectl "+minor, func(t *testing.T) {
			bin := kubectlMinor(t, minor)
			home := t.TempDir()
			run := func(stdin, want string, args ...string) {
				t.Helper()
				cmd := exec.Command(bin, args...)
				cmd.Env = append(os.Environ(), "HOME="+home, "KUBECONFIG="+kubeconfig)
				cmd.Stdin = strings.NewReader(stdin)
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err := cmd.Run()
				// kubectl attach says this of its own, unless -q.
				errOut := strings.ReplaceAll(stderr.String(), "If you don't see a command prompt, try pressing enter.\n", "")
				if err != nil || stdout.String() != want || errOut != "" {
					t.Errorf("kubectl %s: %v, stdout %q, want %q; stderr:\n%s", strings.Join(args, " "), err, stdout.String(), want, stderr.String())
				}
			}
			// The fake runtime writes at once: the output is there
			// when kubectl has just been answered its upgrade.
			for range 10 {
				run("", "hi\n", "exec", "web", "--", "echo", "hi")
				run("", "attached\n", "attach", "web")
			}
			run("typed\n", "typed\n", "exec", "-i", "web", "--", "cat")
			run("typed\n", "attached\ntyped\n", "attach", "-i", "web")
		})
	}
}
