package main

import (
	"net/netip"
	"slices"
	"testing"
)

func TestParseSteps(t *testing.T) {
	got, err := parseSteps("10:300, 50:1000,250:5000")
	if err != nil {
		t.Fatal(err)
	}
	if want := []step{{10, 300}, {50, 1000}, {250, 5000}}; !slices.Equal(got, want) {
		t.Fatalf("parseSteps = %v, want %v", got, want)
	}
	for _, bad := range []string{"", "10", "10:x", "0:10", "10:-1", "50:100,10:300", "10:300,10:200", "251:100", "10:1001"} {
		if _, err := parseSteps(bad); err == nil {
			t.Errorf("parseSteps(%q) accepted", bad)
		}
	}
}

func TestHollowAddrs(t *testing.T) {
	seen := map[netip.Addr]bool{}
	for i := range 250 {
		a := hollowAddr(i)
		if !a.IsLoopback() || seen[a] || a.As4()[3] == 0 || a.As4()[3] == 255 {
			t.Fatalf("hollowAddr(%d) = %v: want a new loopback host address", i, a)
		}
		for s := range 3 {
			if a.String() == serverAddr(s) {
				t.Fatalf("hollowAddr(%d) = %v is a server's", i, a)
			}
		}
		seen[a] = true
	}
}
