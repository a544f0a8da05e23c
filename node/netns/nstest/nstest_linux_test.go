package nstest

import (
	"errors"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/isle-cluster/isle/node/netns"
)

// TestTwoNamespaces links two namespaces with a veth pair, serves in one
// and asks from the other, then checks the namespaces are gone after the
// test that made them.
func TestTwoNamespaces(t *testing.T) {
	RequireRoot(t, "creates network namespaces and links")
	dir := t.TempDir()
	var made []string
	t.Run("traffic", func(t *testing.T) {
		client, server := NS(t, dir, "client"), NS(t, dir, "server")
		made = append(made, client, server)
		h := Handle(t, client)
		if l := Veth(t, h, "link0", server); l.Attrs().Name != "link0" || l.Attrs().Index == 0 {
			t.Fatalf("Veth returned %+v; want link0 with its index", l.Attrs())
		}
		AddrUp(t, h, "link0", netip.MustParsePrefix("10.99.0.1/24"))
		AddrUp(t, Handle(t, server), "eth0", netip.MustParsePrefix("10.99.0.2/24"))
		ServeTCP(t, server, ":8080", "srv")
		ServeUDP(t, server, ":8080", "srv")
		for _, network := range []string{"tcp", "udp"} {
			if got, err := Ask(client, network, "10.99.0.2:8080", 5*time.Second); err != nil || got != "srv saw 10.99.0.1" {
				t.Errorf("Ask %s = %q, %v; want \"srv saw 10.99.0.1\"", network, got, err)
			}
			// Refused at once, not asked again until the timeout.
			start := time.Now()
			if _, err := Ask(client, network, "10.99.0.2:8081", 5*time.Second); !errors.Is(err, syscall.ECONNREFUSED) || time.Since(start) > time.Second {
				t.Errorf("Ask %s of a closed port: %v after %v; want ECONNREFUSED at once", network, err, time.Since(start))
			}
		}
		// The server's namespace is not the client's: its loopback does
		// not answer there.
		l := Listen(t, server, "tcp", "127.0.0.1:0")
		if _, err := Ask(client, "tcp", l.Addr().String(), time.Second); err == nil {
			t.Errorf("Ask of the server's loopback from the client's namespace: no error")
		}
	})
	if len(made) != 2 {
		t.Fatalf("%d namespaces made; want 2", len(made))
	}
	for _, path := range made {
		if ok, err := netns.Exists(path); ok || err != nil {
			t.Errorf("namespace %s after its test: exists %v, %v; want gone", path, ok, err)
		}
	}
}

// TestNFTables reaches the nftables of a new namespace, which has none.
func TestNFTables(t *testing.T) {
	RequireRoot(t, "creates a network namespace")
	RequireNetfilter(t)
	tables, err := NFTables(t, NS(t, t.TempDir(), "ns")).ListTables()
	if err != nil || len(tables) != 0 {
		t.Errorf("ListTables in a new namespace = %d tables, %v; want none", len(tables), err)
	}
}
