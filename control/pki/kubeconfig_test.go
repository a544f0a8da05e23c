package pki

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

type kubeconfigCase struct {
	name            string
	certPEM, keyPEM []byte
	token           string
}

func kubeconfigCases(t *testing.T, ca *CA) []kubeconfigCase {
	t.Helper()
	certPEM, keyPEM := mustClient(t, ca, "isle-admin", "system:masters")
	_, token, err := NewBearerToken()
	if err != nil {
		t.Fatal(err)
	}
	return []kubeconfigCase{
		{name: "client certificate", certPEM: certPEM, keyPEM: keyPEM},
		{name: "bearer token", token: token},
	}
}

func TestKubeconfig(t *testing.T) {
	ca := mustCA(t, "isle-ca")
	for _, tc := range kubeconfigCases(t, ca) {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Kubeconfig("isle", "https://192.168.1.10:6443", ca.CertPEM(), "isle-admin", tc.certPEM, tc.keyPEM, tc.token)
			if err != nil {
				t.Fatalf("Kubeconfig: %v", err)
			}
			if bytes.HasPrefix(bytes.TrimSpace(out), []byte("{")) {
				t.Errorf("output is JSON, want YAML:\n%s", out)
			}
			var cfg map[string]any
			if err := yaml.Unmarshal(out, &cfg); err != nil {
				t.Fatalf("output is not YAML: %v\n%s", err, out)
			}
			checkKubeconfig(t, cfg, ca.CertPEM(), tc)
		})
	}
}

// checkKubeconfig checks a kubeconfig decoded into generic maps (from YAML
// or from kubectl's JSON).
func checkKubeconfig(t *testing.T, cfg map[string]any, caPEM []byte, tc kubeconfigCase) {
	t.Helper()
	field := func(v any, path ...string) any {
		for _, p := range path {
			switch x := v.(type) {
			case map[string]any:
				v = x[p]
			case []any:
				if len(x) != 1 {
					t.Fatalf("%s: %d entries, want 1", p, len(x))
				}
				v = x[0].(map[string]any)[p]
			default:
				t.Fatalf("no field %s in %v", p, v)
			}
		}
		return v
	}
	str := func(path ...string) string {
		s, _ := field(cfg, path...).(string)
		return s
	}
	data := func(path ...string) string {
		b, err := base64.StdEncoding.DecodeString(str(path...))
		if err != nil {
			t.Errorf("%s: %v", strings.Join(path, "."), err)
		}
		return string(b)
	}
	checks := []struct{ name, got, want string }{
		{"apiVersion", str("apiVersion"), "v1"},
		{"kind", str("kind"), "Config"},
		{"current-context", str("current-context"), "isle-admin@isle"},
		{"clusters[0].name", str("clusters", "name"), "isle"},
		{"clusters[0].cluster.server", str("clusters", "cluster", "server"), "https://192.168.1.10:6443"},
		{"clusters[0].cluster.certificate-authority-data", data("clusters", "cluster", "certificate-authority-data"), string(caPEM)},
		{"users[0].name", str("users", "name"), "isle-admin"},
		{"contexts[0].name", str("contexts", "name"), "isle-admin@isle"},
		{"contexts[0].context.cluster", str("contexts", "context", "cluster"), "isle"},
		{"contexts[0].context.user", str("contexts", "context", "user"), "isle-admin"},
		{"users[0].user.token", str("users", "user", "token"), tc.token},
	}
	if tc.token == "" {
		checks = append(checks,
			struct{ name, got, want string }{"users[0].user.client-certificate-data", data("users", "user", "client-certificate-data"), string(tc.certPEM)},
			struct{ name, got, want string }{"users[0].user.client-key-data", data("users", "user", "client-key-data"), string(tc.keyPEM)},
		)
	} else if u, _ := field(cfg, "users", "user").(map[string]any); u["client-certificate-data"] != nil || u["client-key-data"] != nil {
		t.Errorf("token user also has client certificate fields: %v", u)
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
}

func TestKubeconfigErrors(t *testing.T) {
	ca := mustCA(t, "isle-ca")
	certPEM, keyPEM := mustClient(t, ca, "isle-admin", "system:masters")
	_, otherKey := mustClient(t, ca, "someone-else")
	const server = "https://10.0.0.1:6443"
	tests := []struct {
		name, cluster, server string
		caPEM                 []byte
		user                  string
		certPEM, keyPEM       []byte
		token                 string
		want                  string
	}{
		{"empty cluster", "", server, ca.CertPEM(), "u", nil, nil, "t", "empty cluster name"},
		{"empty user", "c", server, ca.CertPEM(), "", nil, nil, "t", "empty user name"},
		{"http server", "c", "http://10.0.0.1:6443", ca.CertPEM(), "u", nil, nil, "t", "want https://host[:port]"},
		{"server without scheme", "c", "10.0.0.1:6443", ca.CertPEM(), "u", nil, nil, "t", "server URL"},
		{"no CA", "c", server, nil, "u", nil, nil, "t", "CA certificate: no PEM block found"},
		{"key as CA", "c", server, ca.Signer().KeyPEM, "u", nil, nil, "t", `CA certificate: PEM block is "EC PRIVATE KEY"`},
		{"no credentials", "c", server, ca.CertPEM(), "u", nil, nil, "", "neither a client certificate nor a token"},
		{"both credentials", "c", server, ca.CertPEM(), "u", certPEM, keyPEM, "t", "both a client certificate and a token"},
		{"certificate without key", "c", server, ca.CertPEM(), "u", certPEM, nil, "", "must be given together"},
		{"key without certificate", "c", server, ca.CertPEM(), "u", nil, keyPEM, "", "must be given together"},
		{"mismatched key", "c", server, ca.CertPEM(), "u", certPEM, otherKey, "", "client certificate and key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Kubeconfig(tc.cluster, tc.server, tc.caPEM, tc.user, tc.certPEM, tc.keyPEM, tc.token)
			if err == nil || !strings.HasPrefix(err.Error(), "pki: kubeconfig: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Kubeconfig = %q, %v; want an error containing %q", out, err, tc.want)
			}
		})
	}
}

// TestKubeconfigWithKubectl has the real kubectl read our kubeconfig and
// then use it against a server configured by ServerConfig.
func TestKubeconfigWithKubectl(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	ca := mustCA(t, "isle-ca")
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) > 0 {
			c := r.TLS.PeerCertificates[0]
			fmt.Fprintf(w, "CN=%s;O=%s", c.Subject.CommonName, strings.Join(c.Subject.Organization, ","))
			return
		}
		fmt.Fprint(w, r.Header.Get("Authorization"))
	}))
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	serveTLS(t, s, mustServerConfig(t, ca))

	for _, tc := range kubeconfigCases(t, ca) {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Kubeconfig("isle", "https://192.168.1.10:6443", ca.CertPEM(), "isle-admin", tc.certPEM, tc.keyPEM, tc.token)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "admin.conf")
			if err := os.WriteFile(path, out, 0o600); err != nil {
				t.Fatal(err)
			}
			run := func(args ...string) string {
				t.Helper()
				cmd := exec.Command(kubectl, append([]string{"--kubeconfig", path}, args...)...)
				cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "KUBECONFIG=")
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				stdout, err := cmd.Output()
				if err != nil {
					t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
				}
				return string(stdout)
			}

			var viewed map[string]any
			if err := json.Unmarshal([]byte(run("config", "view", "--raw", "-o", "json")), &viewed); err != nil {
				t.Fatalf("kubectl config view output: %v", err)
			}
			checkKubeconfig(t, viewed, ca.CertPEM(), tc)

			// Point the cluster at the test server and make a request.
			run("config", "set-cluster", "isle", "--server", s.URL)
			got := run("get", "--raw", "/whoami")
			want := "CN=isle-admin;O=system:masters"
			if tc.token != "" {
				want = "Bearer " + tc.token
			}
			if got != want {
				t.Errorf("server saw %q, want %q", got, want)
			}
		})
	}
}

func TestRenewKubeconfig(t *testing.T) {
	ca := mustCA(t, "isle-ca")
	ca.LeafValidity = 10 * time.Hour
	certPEM, keyPEM, err := ca.IssueClient("isle-admin", []string{"system:masters"}, testNow)
	if err != nil {
		t.Fatal(err)
	}
	written, err := Kubeconfig("isle", "https://10.0.0.1:6443", ca.CertPEM(), "isle-admin", certPEM, keyPEM, "")
	if err != nil {
		t.Fatal(err)
	}
	if c, renewable, err := KubeconfigClientCert(written, "isle-admin"); err != nil || !renewable || !c.Equal(mustParseCert(t, certPEM)) {
		t.Fatalf("KubeconfigClientCert: %v, %v, %v; want the certificate written, renewable", c, renewable, err)
	}
	// Issued with an hour's backdating: due 0.6 × 11h = 6.6h after it.
	if out, renewed, err := ca.RenewKubeconfig(written, testNow.Add(5*time.Hour)); out != nil || renewed || err != nil {
		t.Fatalf("not due: %q, %v, %v; want nothing done", out, renewed, err)
	}
	out, renewed, err := ca.RenewKubeconfig(written, testNow.Add(6*time.Hour))
	if err != nil || !renewed {
		t.Fatalf("due: %v, %v; want renewed", renewed, err)
	}
	c, _, err := KubeconfigClientCert(out, "isle-admin")
	if err != nil {
		t.Fatal(err)
	}
	if c.Subject.CommonName != "isle-admin" || strings.Join(c.Subject.Organization, ",") != "system:masters" ||
		c.NotAfter.Before(testNow.Add(15*time.Hour)) {
		t.Fatalf("renewed certificate %v %v until %v; want isle-admin, system:masters, 10h from the renewal", c.Subject.CommonName, c.Subject.Organization, c.NotAfter)
	}
	// Everything else is as written: only the user's two fields differ.
	var before, after map[string]any
	if err := yaml.Unmarshal(written, &before); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(out, &after); err != nil {
		t.Fatal(err)
	}
	for _, m := range []map[string]any{before, after} {
		m["users"] = nil
	}
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("renewal changed more than the user:\n%s\n%s", written, out)
	}

	other := mustCA(t, "other")
	tests := []struct {
		name string
		data []byte
		ca   *CA
		want string
	}{
		{"edited by kubectl", []byte(strings.Replace(string(written), "    user: isle-admin\n", "    namespace: web\n    user: isle-admin\n", 1)), ca, `unknown field "namespace"`},
		{"a token", mustKubeconfig(t, ca, nil, nil, "abc.def"), ca, "want one with a client certificate"},
		{"another CA's", written, other, `not signed by CA "other"`},
		{"not YAML", []byte("\x00"), ca, "not a kubeconfig"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, renewed, err := tc.ca.RenewKubeconfig(tc.data, testNow.Add(8*time.Hour))
			if err == nil || !strings.Contains(err.Error(), tc.want) || renewed || out != nil {
				t.Fatalf("%q, %v, %v; want an error with %q", out, renewed, err, tc.want)
			}
		})
	}
}

func mustKubeconfig(t *testing.T, ca *CA, certPEM, keyPEM []byte, token string) []byte {
	t.Helper()
	out, err := Kubeconfig("isle", "https://10.0.0.1:6443", ca.CertPEM(), "isle-admin", certPEM, keyPEM, token)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestKubeconfigClientCertEdited(t *testing.T) {
	ca := mustCA(t, "isle-ca")
	adminCert, adminKey := mustClient(t, ca, "isle-admin", "system:masters")
	otherCert, otherKey := mustClient(t, ca, "bob")
	written := string(mustKubeconfig(t, ca, adminCert, adminKey, ""))
	other := string(mustKubeconfig(t, ca, otherCert, otherKey, ""))
	otherUser := other[strings.Index(other, "users:\n")+len("users:\n"):]
	// A second user, as kubectl config set-credentials writes it.
	merged := func(name string) string {
		return strings.Replace(written, "users:\n", "users:\n"+strings.Replace(otherUser, "name: isle-admin", "name: "+name, 1), 1)
	}
	tests := []struct {
		name, data string
		wantCN     string // "": an error
		renewable  bool
	}{
		{"as written", written, "isle-admin", true},
		{"a namespace set", strings.Replace(written, "    user: isle-admin\n", "    namespace: web\n    user: isle-admin\n", 1), "isle-admin", false},
		{"another user beside", merged("bob"), "isle-admin", false},
		{"renamed, its form kept", strings.ReplaceAll(written, "name: isle-admin", "name: me"), "isle-admin", true},
		{"two users, neither ours", strings.Replace(merged("bob"), "name: isle-admin\n", "name: me\n", 1), "", false},
		{"a token", string(mustKubeconfig(t, ca, nil, nil, "abc.def")), "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, renewable, err := KubeconfigClientCert([]byte(tc.data), "isle-admin")
			switch {
			case tc.wantCN == "" && err == nil:
				t.Fatalf("got %v; want an error", c.Subject)
			case tc.wantCN == "":
			case err != nil || c.Subject.CommonName != tc.wantCN || renewable != tc.renewable:
				t.Fatalf("%v, renewable %v, %v; want %s, %v\n%s", c, renewable, err, tc.wantCN, tc.renewable, tc.data)
			}
		})
	}
}
