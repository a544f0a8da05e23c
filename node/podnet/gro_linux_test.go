package podnet

import (
	"testing"

	"github.com/isle-cluster/isle/node/netns"
	"github.com/isle-cluster/isle/node/netns/nstest"
)

// groOn reads whether GRO is on for the link name in the calling thread's
// namespace.
func groOn(t *testing.T, name string) bool {
	t.Helper()
	on, err := ethtool(name, ethtoolGetGRO, 0)
	if err != nil {
		t.Fatalf("ETHTOOL_GGRO %s: %v", name, err)
	}
	return on != 0
}

// TestAttachTurnsGROOn: both ends of a pod's veth receive with GRO.
func TestAttachTurnsGROOn(t *testing.T) {
	nstest.RequireRoot(t, needsRoot)
	b := newLAN(t).board(1)
	p := b.attach("gro")
	for _, c := range []struct{ ns, link string }{{b.ns, vethName(p.uid)}, {p.ns, podIf}} {
		var on bool
		if err := netns.Do(c.ns, func() error { on = groOn(t, c.link); return nil }); err != nil {
			t.Fatal(err)
		}
		if !on {
			t.Errorf("GRO is off on %s in %s", c.link, c.ns)
		}
	}
	if err := SetGRO("no-such-link0"); err == nil {
		t.Error("SetGRO of a link that does not exist: no error")
	}
}
