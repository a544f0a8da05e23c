package main

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/isle-cluster/isle/images/firstboot"
	"github.com/isle-cluster/isle/node/island"
	"golang.org/x/crypto/ssh"
)

// testToken is a well-formed cluster token.
const testToken = "ISLE1::" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" + "::" + "abcdefghijklmnopqrstuvwxyz234567"

func testIsland() *island.State {
	return &island.State{
		Dir: "/tmp/x/island", LAN: netip.MustParsePrefix("10.77.0.0/24"), Host: netip.MustParseAddr("10.77.0.1"),
		Boards: []island.Board{{Name: "pi1", Role: island.RoleServer, Addr: netip.MustParseAddr("10.77.0.11")}},
	}
}

func TestCardConfig(t *testing.T) {
	st := testIsland()
	v, err := newVM(st, "/tmp/x", 2)
	if err != nil {
		t.Fatal(err)
	}
	if v.name != "vm2" || v.tap != "benchtap2" || v.addr != netip.MustParseAddr("10.77.0.42") || v.img != "/tmp/x/vm2/card.img" {
		t.Errorf("vm %+v", v)
	}
	yaml, err := cardConfig(st, v, testToken)
	if err != nil {
		t.Fatal(err)
	}
	// The board's own parser reads what the bench writes.
	c, err := firstboot.Parse("isle.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("%v:\n%s", err, yaml)
	}
	if c.Role != firstboot.RoleAgent || c.Token != testToken || !slices.Equal(c.Join, []string{"10.77.0.11"}) || c.Hostname != "vm2" ||
		c.Address != netip.MustParsePrefix("10.77.0.42/24") || c.Gateway != st.Host || !slices.Equal(c.DNS, []netip.Addr{st.Host}) {
		t.Errorf("parsed %+v from:\n%s", c, yaml)
	}
	settings := map[string][]string{}
	for _, s := range c.Isle {
		settings[s.Flag] = s.Values
	}
	if got := settings["registry-mirror"]; !slices.Equal(got, []string{"registry.island=http://10.77.0.1:5000"}) {
		t.Errorf("registry-mirror %q", got)
	}
	if got := settings["metrics-addr"]; !slices.Equal(got, []string{"10.77.0.42:9100"}) {
		t.Errorf("metrics-addr %q", got)
	}
	if want := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(v.key.PublicKey()))); !slices.Equal(c.SSHKeys, []string{want}) {
		t.Errorf("ssh-authorized-keys %q, want the VM's key %q", c.SSHKeys, want)
	}

	if _, err := cardConfig(st, v, "ISLE1::nothex::x"); err == nil || !strings.Contains(err.Error(), "cluster token") {
		t.Errorf("a bad token: %v", err)
	}
	st.Boards[0].Role = island.RoleAgent
	if _, err := cardConfig(st, v, testToken); err == nil || !strings.Contains(err.Error(), "want a server") {
		t.Errorf("no server first: %v", err)
	}
	if _, err := newVM(&island.State{LAN: netip.MustParsePrefix("10.77.0.0/28")}, "/tmp/x", 1); err == nil {
		t.Error("a /28 LAN: no error")
	}
}

func TestBootFiles(t *testing.T) {
	kernel, initrd, err := bootFiles("::/config.txt\n::/vmlinuz-6.1.0-31-arm64\n::/initrd.img-6.1.0-31-arm64\n::/bcm2711-rpi-4-b.dtb\n")
	if err != nil || kernel != "vmlinuz-6.1.0-31-arm64" || initrd != "initrd.img-6.1.0-31-arm64" {
		t.Errorf("bootFiles: %q %q %v", kernel, initrd, err)
	}
	for _, c := range []struct{ list, want string }{
		{"::/vmlinuz-6.1\n::/config.txt\n", "want a vmlinuz-* and an initrd.img-*"},
		{"::/initrd.img-6.1\n", "want a vmlinuz-*"},
		{"::/vmlinuz-6.1\n::/vmlinuz-6.2\n::/initrd.img-6.1\n", "two vmlinuz-* files"},
		{"", "holds: "},
	} {
		if _, _, err := bootFiles(c.list); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("bootFiles(%q): %v, want an error with %q", c.list, err, c.want)
		}
	}
}

func TestLastLines(t *testing.T) {
	if got := lastLines("a\nb\nc\n", 2); got != "b\nc" {
		t.Errorf("lastLines: %q", got)
	}
	if got := lastLines("a\n", 5); got != "a" {
		t.Errorf("lastLines of fewer: %q", got)
	}
}

func TestReadyStatus(t *testing.T) {
	for _, c := range []struct {
		status          string
		ready, notReady bool
	}{
		{"True", true, false},
		{"False", false, true},
		{"Unknown", false, true},
		{"", false, false}, // no Node yet
	} {
		if isReady(c.status) != c.ready || isNotReady(c.status) != c.notReady {
			t.Errorf("status %q: ready %v, not ready %v; want %v, %v", c.status, isReady(c.status), isNotReady(c.status), c.ready, c.notReady)
		}
	}
}
