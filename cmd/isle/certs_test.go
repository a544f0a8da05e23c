package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/control/cluster"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/node/agent"
)

// TestCertsCheck lists a server's data directory, as the server writes
// it, at several times of its CA's and its leaves' lives.
func TestCertsCheck(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	dir := t.TempDir()
	id, err := cluster.NewIdentity(dir, now)
	if err != nil {
		t.Fatal(err)
	}
	serving, _, err := id.CA.IssueServing("pi1", nil, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	client, _, err := id.CA.IssueClient(wire.APIServerUser, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	csr, key, err := wire.NewCSR("pi1")
	if err != nil {
		t.Fatal(err)
	}
	node, err := id.CA.IssueNodeServing("pi1", csr, now)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "pki/apiserver.crt"), serving)
	write(t, filepath.Join(dir, "pki/apiserver-node-client.crt"), client)
	write(t, filepath.Join(dir, agent.ServingCertFile), append(node, key...))
	kc := filepath.Join(t.TempDir(), "admin.conf")
	if err := cluster.WriteAdminKubeconfig(dir, "https://127.0.0.1:6443", kc, now); err != nil {
		t.Fatal(err)
	}

	day := 24 * time.Hour
	tests := []struct {
		name    string
		at      time.Time
		rows    []string // a pattern per row, in order
		wantErr string   // "": none
	}{
		{"fresh", now, []string{
			`^cluster CA +isle-ca +isle-ca +\S+ +10y +OK +` + regexp.QuoteMeta(filepath.Join(dir, "pki/ca.crt")) + `$`,
			`^API serving +pi1 +isle-ca +\S+ +365d +OK +\S+apiserver.crt$`,
			`^API client to boards +isle:apiserver +isle-ca +\S+ +365d +OK `,
			`^kubeconfig +isle-admin +isle-ca +\S+ +365d +OK +` + regexp.QuoteMeta(kc) + `$`,
			`^streaming server +pi1 +isle-ca +\S+ +365d +OK `,
		}, ""},
		{"leaves due", now.Add(220 * day), []string{`OK`, `RENEW-SOON`, `RENEW-SOON`, `RENEW-SOON`, `RENEW-SOON`}, ""},
		{"leaves expired", now.Add(366 * day), []string{`OK`, `-\S+ +EXPIRED`, `EXPIRED`, `EXPIRED`, `EXPIRED`}, "4 problems"},
		{"CA within a year", now.Add(9*365*day + 2*day), []string{`^cluster CA .* RENEW-SOON `, `EXPIRED`, `EXPIRED`, `EXPIRED`, `EXPIRED`},
			"the cluster CA expires in 363d"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := certsCheck(&out, dir, tc.at)
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(lines) != len(tc.rows)+1 || !strings.HasPrefix(lines[0], "WHAT ") {
				t.Fatalf("output:\n%s\nwant a header and %d rows", out.String(), len(tc.rows))
			}
			for i, p := range tc.rows {
				if !regexp.MustCompile(p).MatchString(lines[i+1]) {
					t.Errorf("row %d %q does not match %q", i+1, lines[i+1], p)
				}
			}
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
		})
	}

	// Kubeconfigs changed by their users: warned of, not failed.
	b, _ := os.ReadFile(kc)
	write(t, kc, []byte(strings.Replace(string(b), "    user: isle-admin\n", "    namespace: web\n    user: isle-admin\n", 1)))
	junk := filepath.Join(t.TempDir(), "junk.conf")
	if err := cluster.WriteAdminKubeconfig(dir, "https://127.0.0.1:6443", junk, now); err != nil {
		t.Fatal(err)
	}
	write(t, junk, []byte("users: 3\n"))
	var out bytes.Buffer
	err = certsCheck(&out, dir, now)
	for _, p := range []string{
		`(?m)^kubeconfig +isle-admin .* OK +` + regexp.QuoteMeta(kc) + ` \(edited: not renewed\)$`,
		`(?m)^kubeconfig +- .* ERROR +` + regexp.QuoteMeta(junk) + `: `,
		`(?m)^warning: ` + regexp.QuoteMeta(kc) + ` was edited since isle wrote it: its certificate is not renewed and expires in 365d; write a new one`,
		`(?m)^warning: ` + regexp.QuoteMeta(junk) + ` is no kubeconfig isle can renew`,
	} {
		if !regexp.MustCompile(p).MatchString(out.String()) {
			t.Errorf("no match for %q in\n%s", p, out.String())
		}
	}
	if err != nil {
		t.Fatalf("users' kubeconfigs changed: %v; want warnings only", err)
	}

	// An agent's board: the CA from its credential; a damaged file is an error.
	agentDir := t.TempDir()
	cred := wire.Credential{Name: "pi2", NodeToken: "abcdef.0123456789abcdef0123456789abcdef", CACert: id.CA.CertPEM(), GossipKey: make([]byte, 32)}
	if err := cred.Save(agentDir); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(agentDir, agent.ServingCertFile), []byte("junk"))
	out.Reset()
	err = certsCheck(&out, agentDir, now)
	if !regexp.MustCompile(`(?m)^cluster CA .* OK +\S+node-credential.json\n.*ERROR`).MatchString(out.String()) || err == nil || !strings.Contains(err.Error(), "unreadable") {
		t.Fatalf("agent's board: %v\n%s", err, out.String())
	}
	if err := certsCheck(&out, t.TempDir(), now); err == nil || !strings.Contains(err.Error(), "holds no certificates") {
		t.Fatalf("empty directory: %v", err)
	}
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
