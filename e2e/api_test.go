package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// apiClient makes raw HTTPS requests to one server.
type apiClient struct {
	base  string
	http  *http.Client
	token string // bearer token, if any
}

type kubeconfigFile struct {
	Clusters []struct {
		Cluster struct {
			Server string `json:"server"`
			CA     string `json:"certificate-authority-data"`
		} `json:"cluster"`
	} `json:"clusters"`
	Users []struct {
		User struct {
			Cert string `json:"client-certificate-data"`
			Key  string `json:"client-key-data"`
		} `json:"user"`
	} `json:"users"`
}

// adminClient is a client with the administrator's certificate.
func adminClient(t *testing.T, isle string, m *member) *apiClient {
	t.Helper()
	out, err := exec.Command(isle, "kubeconfig", "--data-dir", m.dir, "--server", "https://"+m.apiAddr()).Output()
	if err != nil {
		t.Fatalf("isle kubeconfig: %v", err)
	}
	var kc kubeconfigFile
	if err := yaml.Unmarshal(out, &kc); err != nil || len(kc.Clusters) != 1 || len(kc.Users) != 1 {
		t.Fatalf("parse kubeconfig: %v", err)
	}
	dec := func(s string) []byte { b, _ := base64.StdEncoding.DecodeString(s); return b }
	cert, err := tls.X509KeyPair(dec(kc.Users[0].User.Cert), dec(kc.Users[0].User.Key))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(dec(kc.Clusters[0].Cluster.CA))
	return &apiClient{base: kc.Clusters[0].Cluster.Server, http: &http.Client{Timeout: 15 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool}}}}
}

// withToken is a client that authenticates with a bearer token instead.
func (c *apiClient) withToken(token string) *apiClient {
	tr := c.http.Transport.(*http.Transport).Clone()
	tr.TLSClientConfig.Certificates = nil
	return &apiClient{base: c.base, http: &http.Client{Timeout: c.http.Timeout, Transport: tr}, token: token}
}

// do sends a request and returns the status code and body.
func (c *apiClient) do(t *testing.T, method, path, contentType string, body []byte) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, c.base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// nodeToken joins a board named node as an agent, with the cluster's
// token, and returns its node credential (a bearer token).
func nodeToken(t *testing.T, c *apiClient, m *member, node string) string {
	t.Helper()
	tok, err := os.ReadFile(filepath.Join(m.dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	secret := strings.TrimSpace(string(tok))
	secret = secret[strings.LastIndex(secret, "::")+2:]
	tc := c.withToken(secret)
	code, body, _ := tc.do(t, "POST", "/isle/v1/join", "application/json", []byte(`{"name":"`+node+`","role":"agent"}`))
	if code != 200 {
		t.Fatalf("node token for %s: %d %s", node, code, body)
	}
	var resp struct {
		Token string `json:"nodeToken"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil || resp.Token == "" {
		t.Fatalf("node token answer %s: %v", body, err)
	}
	return resp.Token
}

// TestBadInput sends what a careless or hostile client might, and checks
// each gets the right Status code and a message naming the field or reason,
// and that nothing stored changes.
func TestBadInput(t *testing.T) {
	bin := isleBinary(t)
	c := startStore(t, bin, 1)
	admin := adminClient(t, bin, c.members[0])
	waitAPIReady(t, admin)
	cms := "/api/v1/namespaces/default/configmaps"
	code, body, _ := admin.do(t, "POST", cms, "application/json", []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"keep"},"data":{"a":"1"}}`))
	if code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	_, before, _ := admin.do(t, "GET", cms+"/keep", "", nil)

	huge := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"huge"},"data":{"a":"` + strings.Repeat("x", 4<<20) + `"}}`
	cases := []struct {
		name, method, path, ctype, body string
		code                            int
		want                            string
	}{
		{"malformed JSON", "POST", cms, "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{`, 400, "could not be decoded"},
		{"malformed YAML", "POST", cms, "application/yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: [name: x\n", 400, "could not be decoded"},
		{"unknown field under Strict", "POST", cms + "?fieldValidation=Strict", "application/json",
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"dataa":{"a":"b"}}`, 400, `unknown field \"dataa\"`},
		{"invalid name", "POST", cms, "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Bad_Name"}}`, 422, "metadata.name"},
		{"wrong apiVersion", "POST", cms, "application/json", `{"apiVersion":"apps/v1","kind":"ConfigMap","metadata":{"name":"x"}}`, 400, "apps/v1"},
		{"wrong kind", "POST", cms, "application/json", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}`, 400, "Kind=Secret"},
		{"oversized body", "POST", cms, "application/json", huge, 413, "limit is"},
		{"stale resourceVersion", "PUT", cms + "/keep", "application/json",
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"keep","resourceVersion":"1"},"data":{"a":"2"}}`, 409, "has been modified"},
		{"name differs from the URL", "PUT", cms + "/keep", "application/json",
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"other"},"data":{"a":"2"}}`, 400, "does not match"},
		{"unsupported patch type", "PATCH", cms + "/keep", "text/plain", `a=2`, 415, "unknown format"},
		{"invalid JSON patch", "PATCH", cms + "/keep", "application/json-patch+json", `{"op":"replace"}`, 400, "invalid JSON patch"},
		{"namespace that does not exist", "POST", "/api/v1/namespaces/nope/configmaps", "application/json",
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`, 404, `namespaces \"nope\" not found`},
		{"resource that does not exist", "GET", "/api/v1/namespaces/default/widgets", "", "", 404, "could not find"},
		{"bad label selector", "GET", cms + "?labelSelector=a%20in%20(", "", "", 400, "labelSelector"},
		{"unsupported field selector", "GET", cms + "?fieldSelector=spec.foo%3Dbar", "", "", 400, "field label not supported"},
		{"object that does not exist", "GET", cms + "/nope", "", "", 404, `configmaps \"nope\" not found`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body, _ := admin.do(t, tc.method, tc.path, tc.ctype, []byte(tc.body))
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Fatalf("got %d %s\nwant %d containing %q", code, truncate(body), tc.code, tc.want)
			}
			if !strings.Contains(body, `"kind":"Status"`) {
				t.Fatalf("the answer is not a Status: %s", truncate(body))
			}
		})
	}
	t.Run("unknown field under Warn is stored with a warning", func(t *testing.T) {
		code, body, hdr := admin.do(t, "POST", cms+"?fieldValidation=Warn", "application/json",
			[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"warned"},"dataa":{"a":"b"}}`))
		if code != 201 || !strings.Contains(hdr.Get("Warning"), "dataa") {
			t.Fatalf("got %d %s, Warning %q", code, truncate(body), hdr.Get("Warning"))
		}
	})
	t.Run("no credentials", func(t *testing.T) {
		code, body, _ := admin.withToken("").do(t, "GET", cms, "", nil)
		if code != 401 || !strings.Contains(body, "Unauthorized") {
			t.Fatalf("got %d %s", code, body)
		}
		code, _, _ = admin.withToken("abcdef.0123456789abcdef0123456789abcdef").do(t, "GET", cms, "", nil)
		if code != 401 {
			t.Fatalf("an unknown bearer token got %d, want 401", code)
		}
	})
	t.Run("nothing stored changed", func(t *testing.T) {
		_, after, _ := admin.do(t, "GET", cms+"/keep", "", nil)
		if after != before {
			t.Fatalf("the stored object changed:\nbefore %s\nafter  %s", before, after)
		}
		for _, name := range []string{"x", "huge", "Bad_Name", "other"} {
			if code, _, _ := admin.do(t, "GET", cms+"/"+name, "", nil); code != 404 {
				t.Errorf("configmap %s exists after a refused request", name)
			}
		}
	})

	t.Run("a node writes only its own node and the status of its own pods", func(t *testing.T) {
		pods := "/api/v1/namespaces/default/pods"
		for _, p := range []struct{ name, node string }{{"on-a", "node-a"}, {"on-b", "node-b"}} {
			code, body, _ := admin.do(t, "POST", pods, "application/json", []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"`+
				p.name+`"},"spec":{"nodeName":"`+p.node+`","containers":[{"name":"c","image":"busybox:1"}]}}`))
			if code != 201 {
				t.Fatalf("create pod %s: %d %s", p.name, code, body)
			}
		}
		nodeA := admin.withToken(nodeToken(t, admin, c.members[0], "node-a"))
		status := []byte(`{"status":{"phase":"Running"}}`)
		if code, body, _ := nodeA.do(t, "PATCH", pods+"/on-a/status", "application/merge-patch+json", status); code != 200 {
			t.Fatalf("node-a patching its own pod's status: %d %s", code, body)
		}
		code, body, _ := nodeA.do(t, "PATCH", pods+"/on-b/status", "application/merge-patch+json", status)
		if code != 403 || !strings.Contains(body, `system:node:node-a`) {
			t.Fatalf("node-a patching node-b's pod: %d %s", code, body)
		}
		if code, body, _ := nodeA.do(t, "PATCH", pods+"/on-a", "application/merge-patch+json", []byte(`{"metadata":{"labels":{"x":"y"}}}`)); code != 403 {
			t.Fatalf("node-a patching a pod's spec: %d %s", code, body)
		}
		node := func(name string) []byte {
			return []byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"` + name + `"}}`)
		}
		if code, body, _ := nodeA.do(t, "POST", "/api/v1/nodes", "application/json", node("node-a")); code != 201 {
			t.Fatalf("node-a registering itself: %d %s", code, body)
		}
		if code, body, _ := nodeA.do(t, "POST", "/api/v1/nodes", "application/json", node("node-b")); code != 403 {
			t.Fatalf("node-a registering node-b: %d %s", code, body)
		}
		if code, _, _ := nodeA.do(t, "GET", pods, "", nil); code != 200 {
			t.Fatalf("node-a listing pods: %d", code)
		}
		_, body, _ = admin.do(t, "GET", pods+"/on-b", "", nil)
		if !strings.Contains(body, `"phase":"Pending"`) {
			t.Fatalf("node-b's pod changed: %s", truncate(body))
		}
	})
}

// waitAPIReady waits until the server answers and the cluster's initial
// objects exist.
func waitAPIReady(t *testing.T, c *apiClient) {
	t.Helper()
	waitFor(t, 20*time.Second, "the default namespace", func() bool {
		code, _, _ := c.do(t, "GET", "/api/v1/namespaces/default", "", nil)
		return code == 200
	})
}

func truncate(s string) string {
	if len(s) > 400 {
		return s[:400] + "…"
	}
	return s
}
