package pki

import (
	"bytes"
	"crypto/x509"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// clientKubeconfig is a kubeconfig of one cluster, user and context, as
// LoadClient's tests write them; edit edits its document before it is
// written.
type clientKubeconfig struct {
	cluster map[string]any
	user    map[string]any
	edit    func(doc map[string]any)
}

func (k clientKubeconfig) yaml(t *testing.T) []byte {
	t.Helper()
	user := k.user
	if user == nil {
		user = map[string]any{}
	}
	doc := map[string]any{
		"apiVersion":      "v1",
		"kind":            "Config",
		"clusters":        []any{map[string]any{"name": "isle", "cluster": k.cluster}},
		"users":           []any{map[string]any{"name": "isle-admin", "user": user}},
		"contexts":        []any{map[string]any{"name": "isle-admin@isle", "context": map[string]any{"cluster": "isle", "user": "isle-admin"}}},
		"current-context": "isle-admin@isle",
	}
	if k.edit != nil {
		k.edit(doc)
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// writeFile writes data to dir/name, making its directory.
func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadClient(t *testing.T) {
	ca := mustCA(t, "isle-ca")
	certPEM, keyPEM := mustClient(t, ca, "isle-admin", "system:masters")
	certDER := mustParseCert(t, certPEM).Raw
	otherCert, _ := mustClient(t, mustCA(t, "other-ca"), "eve")
	const server = "https://192.168.1.10:6443"

	tests := []struct {
		name string
		// files are written beside the kubeconfig (in its directory),
		// before it is; abs are written in another directory, and
		// $ABS in the kubeconfig is that directory.
		files, abs map[string][]byte
		cfg        clientKubeconfig
		wantCert   bool
		wantToken  string
	}{
		{
			name: "data fields",
			cfg: clientKubeconfig{
				cluster: map[string]any{"server": server, "certificate-authority-data": ca.CertPEM()},
				user:    map[string]any{"client-certificate-data": certPEM, "client-key-data": keyPEM},
			},
			wantCert: true,
		},
		{
			name:  "relative file fields",
			files: map[string][]byte{"pki/ca.crt": ca.CertPEM(), "pki/admin.crt": certPEM, "admin.key": keyPEM},
			cfg: clientKubeconfig{
				cluster: map[string]any{"server": server, "certificate-authority": "pki/ca.crt"},
				user:    map[string]any{"client-certificate": "pki/admin.crt", "client-key": "admin.key"},
			},
			wantCert: true,
		},
		{
			name: "absolute file fields",
			abs:  map[string][]byte{"ca.crt": ca.CertPEM(), "admin.crt": certPEM, "admin.key": keyPEM},
			cfg: clientKubeconfig{
				cluster: map[string]any{"server": server, "certificate-authority": "$ABS/ca.crt"},
				user:    map[string]any{"client-certificate": "$ABS/admin.crt", "client-key": "$ABS/admin.key"},
			},
			wantCert: true,
		},
		{
			name:  "data fields over file fields",
			files: map[string][]byte{"ca.crt": []byte("not a certificate")},
			cfg: clientKubeconfig{
				cluster: map[string]any{"server": server, "certificate-authority-data": ca.CertPEM(), "certificate-authority": "ca.crt"},
				user:    map[string]any{"client-certificate-data": certPEM, "client-key-data": keyPEM, "client-certificate": "missing.crt", "client-key": "missing.key"},
			},
			wantCert: true,
		},
		{
			name: "token",
			cfg: clientKubeconfig{
				cluster: map[string]any{"server": server, "certificate-authority-data": ca.CertPEM()},
				user:    map[string]any{"token": "abcdef.0123456789abcdef"},
			},
			wantToken: "abcdef.0123456789abcdef",
		},
		{
			name:  "tokenFile, trimmed",
			files: map[string][]byte{"secrets/token": []byte("abcdef.0123456789abcdef\n")},
			cfg: clientKubeconfig{
				cluster: map[string]any{"server": server, "certificate-authority-data": ca.CertPEM()},
				user:    map[string]any{"tokenFile": "secrets/token"},
			},
			wantToken: "abcdef.0123456789abcdef",
		},
		{
			name:  "token over tokenFile",
			files: map[string][]byte{"token": []byte("from-file\n")},
			cfg: clientKubeconfig{
				cluster: map[string]any{"server": server, "certificate-authority-data": ca.CertPEM()},
				user:    map[string]any{"token": "inline", "tokenFile": "token"},
			},
			wantToken: "inline",
		},
		{
			name: "certificate and token",
			cfg: clientKubeconfig{
				cluster: map[string]any{"server": server, "certificate-authority-data": ca.CertPEM()},
				user:    map[string]any{"client-certificate-data": certPEM, "client-key-data": keyPEM, "token": "abcdef.0123456789abcdef"},
			},
			wantCert:  true,
			wantToken: "abcdef.0123456789abcdef",
		},
		{
			// The CA is checked whatever the flag says: no client of
			// LoadClient skips verification.
			name: "insecure-skip-tls-verify with a CA",
			cfg: clientKubeconfig{
				cluster: map[string]any{"server": server, "certificate-authority-data": ca.CertPEM(), "insecure-skip-tls-verify": true},
				user:    map[string]any{"token": "t"},
			},
			wantToken: "t",
		},
		{
			name: "the current context among several",
			cfg: clientKubeconfig{
				cluster: map[string]any{"server": server, "certificate-authority-data": ca.CertPEM()},
				user:    map[string]any{"token": "right"},
				edit: func(doc map[string]any) {
					doc["clusters"] = append([]any{map[string]any{"name": "other", "cluster": map[string]any{"server": "http://other.example"}}}, doc["clusters"].([]any)...)
					doc["users"] = append([]any{map[string]any{"name": "other", "user": map[string]any{"exec": map[string]any{"command": "x"}}}}, doc["users"].([]any)...)
					doc["contexts"] = append([]any{map[string]any{"name": "other", "context": map[string]any{"cluster": "other", "user": "other"}}}, doc["contexts"].([]any)...)
				},
			},
			wantToken: "right",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "kube")
			absDir := t.TempDir()
			for name, data := range tc.files {
				writeFile(t, dir, name, data)
			}
			for name, data := range tc.abs {
				writeFile(t, absDir, name, data)
			}
			cfg := bytes.ReplaceAll(tc.cfg.yaml(t), []byte("$ABS"), []byte(absDir))
			path := writeFile(t, dir, "config", cfg)

			// Relative file names are of the kubeconfig's directory,
			// not the working directory.
			t.Chdir(t.TempDir())
			c, err := LoadClient(path)
			if err != nil {
				t.Fatalf("LoadClient: %v\n%s", err, cfg)
			}
			if c.Server == nil || c.Server.String() != server {
				t.Errorf("Server %v, want %s", c.Server, server)
			}
			if c.TLS == nil {
				t.Fatal("no TLS config")
			}
			if c.TLS.InsecureSkipVerify {
				t.Error("InsecureSkipVerify set")
			}
			if c.TLS.RootCAs == nil {
				t.Fatal("RootCAs not set")
			}
			opts := x509.VerifyOptions{Roots: c.TLS.RootCAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}
			if _, err := mustParseCert(t, certPEM).Verify(opts); err != nil {
				t.Errorf("the client's RootCAs do not verify a certificate of the CA: %v", err)
			}
			if _, err := mustParseCert(t, otherCert).Verify(opts); err == nil {
				t.Error("the client's RootCAs verify a certificate of another CA")
			}
			if tc.wantCert {
				if len(c.TLS.Certificates) != 1 {
					t.Fatalf("%d certificates, want 1", len(c.TLS.Certificates))
				}
				got := c.TLS.Certificates[0]
				if len(got.Certificate) == 0 || !bytes.Equal(got.Certificate[0], certDER) {
					t.Error("the certificate is not the kubeconfig's")
				}
				if got.PrivateKey == nil {
					t.Error("the certificate has no private key")
				}
			} else if len(c.TLS.Certificates) != 0 {
				t.Errorf("%d certificates, want none", len(c.TLS.Certificates))
			}
			if c.Token != tc.wantToken {
				t.Errorf("Token %q, want %q", c.Token, tc.wantToken)
			}
		})
	}
}

func TestLoadClientErrors(t *testing.T) {
	ca := mustCA(t, "isle-ca")
	other := mustCA(t, "other-ca")
	certPEM, keyPEM := mustClient(t, ca, "isle-admin", "system:masters")
	_, otherKey := mustClient(t, ca, "bob")
	_, foreignKey := mustClient(t, other, "eve")
	const server = "https://192.168.1.10:6443"
	goodCluster := map[string]any{"server": server, "certificate-authority-data": ca.CertPEM()}
	goodUser := map[string]any{"client-certificate-data": certPEM, "client-key-data": keyPEM}

	tests := []struct {
		name string
		cfg  clientKubeconfig
		raw  []byte // the kubeconfig, if not cfg's
		want string // in the error
	}{
		{
			name: "not YAML",
			raw:  []byte("clusters: [\n"),
			want: "yaml",
		},
		{
			name: "no current-context",
			cfg:  clientKubeconfig{cluster: goodCluster, user: goodUser, edit: func(doc map[string]any) { delete(doc, "current-context") }},
			want: "no current-context",
		},
		{
			name: "empty",
			raw:  []byte{},
			want: "no current-context",
		},
		{
			name: "unknown context",
			cfg:  clientKubeconfig{cluster: goodCluster, user: goodUser, edit: func(doc map[string]any) { doc["current-context"] = "elsewhere" }},
			want: `current context "elsewhere" is not among its contexts`,
		},
		{
			name: "unknown cluster",
			cfg: clientKubeconfig{cluster: goodCluster, user: goodUser, edit: func(doc map[string]any) {
				doc["contexts"].([]any)[0].(map[string]any)["context"].(map[string]any)["cluster"] = "gone"
			}},
			want: `cluster "gone" is not among its clusters`,
		},
		{
			name: "unknown user",
			cfg: clientKubeconfig{cluster: goodCluster, user: goodUser, edit: func(doc map[string]any) {
				doc["contexts"].([]any)[0].(map[string]any)["context"].(map[string]any)["user"] = "nobody"
			}},
			want: `user "nobody" is not among its users`,
		},
		{
			name: "http server",
			cfg:  clientKubeconfig{cluster: map[string]any{"server": "http://192.168.1.10:6443", "certificate-authority-data": ca.CertPEM()}, user: goodUser},
			want: `server "http://192.168.1.10:6443": want an https URL`,
		},
		{
			name: "no server",
			cfg:  clientKubeconfig{cluster: map[string]any{"certificate-authority-data": ca.CertPEM()}, user: goodUser},
			want: "want an https URL",
		},
		{
			name: "server without host",
			cfg:  clientKubeconfig{cluster: map[string]any{"server": "https:///api", "certificate-authority-data": ca.CertPEM()}, user: goodUser},
			want: "want an https URL",
		},
		{
			name: "insecure-skip-tls-verify without CA",
			cfg:  clientKubeconfig{cluster: map[string]any{"server": server, "insecure-skip-tls-verify": true}, user: goodUser},
			want: "insecure-skip-tls-verify",
		},
		{
			name: "exec user",
			cfg:  clientKubeconfig{cluster: goodCluster, user: map[string]any{"exec": map[string]any{"apiVersion": "client.authentication.k8s.io/v1", "command": "aws"}}},
			want: "exec and auth-provider credentials are not supported",
		},
		{
			name: "auth-provider user",
			cfg:  clientKubeconfig{cluster: goodCluster, user: map[string]any{"auth-provider": map[string]any{"name": "oidc"}}},
			want: "exec and auth-provider credentials are not supported",
		},
		{
			name: "bad CA PEM",
			cfg:  clientKubeconfig{cluster: map[string]any{"server": server, "certificate-authority-data": []byte("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")}, user: goodUser},
			want: "no certificate in its certificate authority",
		},
		{
			name: "CA key instead of certificate",
			cfg:  clientKubeconfig{cluster: map[string]any{"server": server, "certificate-authority-data": keyPEM}, user: goodUser},
			want: "no certificate in its certificate authority",
		},
		{
			name: "missing CA file",
			cfg:  clientKubeconfig{cluster: map[string]any{"server": server, "certificate-authority": "missing-ca.crt"}, user: goodUser},
			want: "missing-ca.crt",
		},
		{
			name: "mismatched cert and key",
			cfg:  clientKubeconfig{cluster: goodCluster, user: map[string]any{"client-certificate-data": certPEM, "client-key-data": otherKey}},
			want: `user "isle-admin": client certificate`,
		},
		{
			name: "key of another CA's certificate",
			cfg:  clientKubeconfig{cluster: goodCluster, user: map[string]any{"client-certificate-data": certPEM, "client-key-data": foreignKey}},
			want: "client certificate",
		},
		{
			name: "certificate without key",
			cfg:  clientKubeconfig{cluster: goodCluster, user: map[string]any{"client-certificate-data": certPEM}},
			want: "client certificate",
		},
		{
			name: "key without certificate",
			cfg:  clientKubeconfig{cluster: goodCluster, user: map[string]any{"client-key-data": keyPEM}},
			want: "client certificate",
		},
		{
			name: "missing client certificate file",
			cfg:  clientKubeconfig{cluster: goodCluster, user: map[string]any{"client-certificate": "missing.crt", "client-key-data": keyPEM}},
			want: "missing.crt",
		},
		{
			name: "missing client key file",
			cfg:  clientKubeconfig{cluster: goodCluster, user: map[string]any{"client-certificate-data": certPEM, "client-key": "missing.key"}},
			want: "missing.key",
		},
		{
			name: "missing tokenFile",
			cfg:  clientKubeconfig{cluster: goodCluster, user: map[string]any{"tokenFile": "missing-token"}},
			want: "missing-token",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.raw
			if cfg == nil {
				cfg = tc.cfg.yaml(t)
			}
			path := writeFile(t, t.TempDir(), "kubeconfig", cfg)
			c, err := LoadClient(path)
			if err == nil {
				t.Fatalf("LoadClient succeeded (%+v), want an error with %q\n%s", c, tc.want, cfg)
			}
			if c != nil {
				t.Errorf("LoadClient returned a client with its error")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) {
				t.Errorf("error %q lacks %q", msg, tc.want)
			}
			if !strings.Contains(msg, path) {
				t.Errorf("error %q does not name the kubeconfig %s", msg, path)
			}
		})
	}
}

func TestLoadClientMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no-such-kubeconfig")
	_, err := LoadClient(path)
	if err == nil {
		t.Fatal("LoadClient of a missing file succeeded")
	}
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), path) {
		t.Errorf("error %q: want a not-exist error naming %s", err, path)
	}
}

// TestLoadClientKubeconfig: what Kubeconfig writes, LoadClient reads.
func TestLoadClientKubeconfig(t *testing.T) {
	ca := mustCA(t, "isle-ca")
	for _, tc := range kubeconfigCases(t, ca) {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Kubeconfig("isle", "https://192.168.1.10:6443", ca.CertPEM(), "isle-admin", tc.certPEM, tc.keyPEM, tc.token)
			if err != nil {
				t.Fatal(err)
			}
			c, err := LoadClient(writeFile(t, t.TempDir(), "config", out))
			if err != nil {
				t.Fatalf("LoadClient: %v\n%s", err, out)
			}
			if c.Server.String() != "https://192.168.1.10:6443" {
				t.Errorf("Server %v", c.Server)
			}
			if c.Token != tc.token {
				t.Errorf("Token %q, want %q", c.Token, tc.token)
			}
			if want := len(tc.certPEM) > 0; (len(c.TLS.Certificates) == 1) != want {
				t.Errorf("%d certificates, want a certificate: %v", len(c.TLS.Certificates), want)
			}
		})
	}
}
