package agent

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/isle-cluster/isle/node/gossip"
	"github.com/isle-cluster/isle/node/podnet"
)

// A board whose isle restarts rejoins gossip before it announces its pod
// CIDR again: its pods keep their route meanwhile. A board that left loses
// it, and so does one that comes back at another address without a CIDR.
func TestPeersOf(t *testing.T) {
	member := func(name, addr, cidr string, st gossip.State) gossip.Member {
		return gossip.Member{Meta: gossip.Meta{Name: name, PodCIDR: cidr}, Addr: netip.MustParseAddrPort(addr + ":7946"), State: st}
	}
	names := func(ps []podnet.Peer) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name+" "+p.PodCIDR.String()+" via "+p.Addr.String())
		}
		slices.Sort(out)
		return out
	}
	known := map[string]podnet.Peer{}
	check := func(what string, members []gossip.Member, want ...string) {
		t.Helper()
		if got := names(peersOf(members, "pi1", known)); !slices.Equal(got, want) {
			t.Errorf("%s: peers %q, want %q", what, got, want)
		}
	}
	self := member("pi1", "10.77.0.11", "10.42.0.0/24", gossip.Alive)
	check("all announced", []gossip.Member{self, member("pi2", "10.77.0.12", "10.42.1.0/24", gossip.Alive),
		member("pi3", "10.77.0.13", "10.42.2.0/24", gossip.Dead)},
		"pi2 10.42.1.0/24 via 10.77.0.12", "pi3 10.42.2.0/24 via 10.77.0.13")
	check("pi2's isle restarted, no CIDR yet", []gossip.Member{self, member("pi2", "10.77.0.12", "", gossip.Alive),
		member("pi3", "10.77.0.13", "10.42.2.0/24", gossip.Dead)},
		"pi2 10.42.1.0/24 via 10.77.0.12", "pi3 10.42.2.0/24 via 10.77.0.13")
	check("pi3's isle stopped and said goodbye: its pods keep running", []gossip.Member{self, member("pi2", "10.77.0.12", "", gossip.Alive),
		member("pi3", "10.77.0.13", "10.42.2.0/24", gossip.Left)},
		"pi2 10.42.1.0/24 via 10.77.0.12", "pi3 10.42.2.0/24 via 10.77.0.13")
	check("pi3 back without a CIDR yet", []gossip.Member{self, member("pi2", "10.77.0.12", "10.42.1.0/24", gossip.Alive),
		member("pi3", "10.77.0.13", "", gossip.Alive)},
		"pi2 10.42.1.0/24 via 10.77.0.12", "pi3 10.42.2.0/24 via 10.77.0.13")
	check("pi3 left and its CIDR given to pi4", []gossip.Member{self, member("pi2", "10.77.0.12", "10.42.1.0/24", gossip.Alive),
		member("pi3", "10.77.0.13", "10.42.2.0/24", gossip.Left), member("pi4", "10.77.0.14", "10.42.2.0/24", gossip.Alive)},
		"pi2 10.42.1.0/24 via 10.77.0.12", "pi4 10.42.2.0/24 via 10.77.0.14")
	check("pi3 dead, pi4 suspected, the same CIDR", []gossip.Member{self, member("pi3", "10.77.0.13", "10.42.2.0/24", gossip.Dead),
		member("pi4", "10.77.0.14", "10.42.2.0/24", gossip.Suspect)},
		"pi4 10.42.2.0/24 via 10.77.0.14")
	check("pi2 at another address without a CIDR", []gossip.Member{self, member("pi2", "10.77.0.22", "", gossip.Alive)})
	check("a CIDR that is not one", []gossip.Member{self, member("pi4", "10.77.0.14", "10.42.x", gossip.Alive)})
}
