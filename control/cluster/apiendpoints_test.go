package cluster

import (
	"slices"
	"testing"

	"github.com/isle-cluster/isle/raft"
)

func TestAPIAddresses(t *testing.T) {
	members := []raft.Member{
		{ID: 1, Name: "pi1", ClientAddr: "10.77.0.11:6443"},
		{ID: 2, Name: "pi2", ClientAddr: "10.77.0.12:6443"},
		{ID: 3, Name: "pi3", ClientAddr: "10.77.0.13:6443"},
		{ID: 4, Name: "pi4", ClientAddr: "10.77.0.14:7443"}, // another port
		{ID: 5, Name: "pi5", ClientAddr: "pi5.lan:6443"},    // no address
		{ID: 6, Name: "pi6", ClientAddr: "127.0.0.1:6443"},  // loopback
		{ID: 7, Name: "pi7", ClientAddr: "[fd00::7]:6443"},  // IPv6
		{ID: 8, Name: "pi8", ClientAddr: "10.77.0.18:6443", Learner: true},
	}
	alive := map[string]bool{"pi2": true, "pi3": false, "pi4": true, "pi5": true, "pi6": true, "pi7": true, "pi8": true}
	addrs, port, err := apiAddresses(members, 1, alive)
	// The leader (pi1) is one even if gossip has not told of it; pi3's
	// board is dead.
	if err != nil || port != 6443 || !slices.Equal(addrs, []string{"10.77.0.11", "10.77.0.12", "10.77.0.18"}) {
		t.Errorf("endpoints: %v %d %v", addrs, port, err)
	}
	if _, _, err := apiAddresses(members, 99, alive); err == nil {
		t.Errorf("no leader known: want an error")
	}
	s := apiSlice(addrs, port)
	if !sameAPISlice(s, apiSlice(addrs, port)) || sameAPISlice(s, apiSlice(addrs[:2], port)) || sameAPISlice(s, apiSlice(addrs, 7443)) {
		t.Errorf("sameAPISlice")
	}
}
