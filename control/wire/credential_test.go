package wire_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/wire"
)

func TestCredentialFile(t *testing.T) {
	dir := t.TempDir()
	if _, ok, err := wire.LoadCredential(dir); ok || err != nil {
		t.Fatalf("empty directory: ok %v, err %v", ok, err)
	}
	c := testCredential(t)
	if err := c.Save(dir); err != nil {
		t.Fatal(err)
	}
	got, ok, err := wire.LoadCredential(dir)
	if err != nil || !ok || got.Name != c.Name || got.NodeToken != c.NodeToken {
		t.Fatalf("load: %+v %v %v", got, ok, err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, wire.CredentialFile)); fi.Mode().Perm() != 0o600 {
		t.Fatalf("credential mode %v", fi.Mode())
	}
	for _, bad := range []struct{ name, content, want string }{
		{"torn", `{"name": "pi`, "remove it to join"},
		{"no token", `{"name":"pi","caCert":"","gossipKey":""}`, "no node token"},
	} {
		if err := os.WriteFile(filepath.Join(dir, wire.CredentialFile), []byte(bad.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := wire.LoadCredential(dir); err == nil || !strings.Contains(err.Error(), bad.want) || !strings.Contains(err.Error(), wire.CredentialFile) {
			t.Errorf("%s: %v, want an error naming the file and %q", bad.name, err, bad.want)
		}
	}
	c.GossipKey = c.GossipKey[:5]
	if err := c.Save(dir); err == nil {
		t.Fatal("a credential with a short gossip key was saved")
	}
}

func TestWithServers(t *testing.T) {
	c := wire.Credential{Servers: []string{"10.0.0.1:7946"}}
	c2, changed := c.WithServers([]string{"10.0.0.2:7946", "10.0.0.1:7946"})
	if !changed || strings.Join(c2.Servers, ",") != "10.0.0.1:7946,10.0.0.2:7946" {
		t.Fatalf("union: %v %v", c2.Servers, changed)
	}
	if _, changed := c2.WithServers([]string{"10.0.0.2:7946"}); changed {
		t.Fatal("a server already known changed the list (an SD-card write)")
	}
	if _, changed := c2.WithServers(nil); changed {
		t.Fatal("no servers seen changed the list")
	}
	var many []string
	for i := range 17 { // one more than a credential keeps
		many = append(many, "10.0.1."+string(rune('a'+i))+":7946")
	}
	if c3, _ := c2.WithServers(many); len(c3.Servers) != len(many) || c3.Servers[0] == "10.0.0.1:7946" {
		t.Fatalf("over the bound: %v", c3.Servers)
	}
}

func testCredential(t *testing.T) wire.Credential {
	t.Helper()
	ca, err := pki.NewCA("test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return wire.Credential{Name: "pi-zero", NodeToken: "id.secret", CACert: ca.CertPEM(), GossipKey: make([]byte, 32)}
}
