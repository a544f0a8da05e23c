package proxy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBridgeNetfilter(t *testing.T) {
	noModprobe := errors.New("no modprobe")
	for _, tc := range []struct {
		name     string
		before   string // the file's content; "" for no file
		modprobe string // what modprobe makes the file hold; "" makes it fail
		on       bool
		after    string
	}{
		{name: "on", before: "1\n", on: true, after: "1\n"},
		{name: "off: turned on", before: "0\n", on: true, after: "1\n"},
		{name: "no module: loaded, then turned on", modprobe: "0\n", on: true, after: "1\n"},
		{name: "no module, and none to load"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bridge-nf-call-iptables")
			if tc.before != "" {
				if err := os.WriteFile(path, []byte(tc.before), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			loads := 0
			modprobe := func() error {
				loads++
				if tc.modprobe == "" {
					return noModprobe
				}
				return os.WriteFile(path, []byte(tc.modprobe), 0o644)
			}
			on, err := bridgeNetfilter(path, modprobe)
			if on != tc.on || (err == nil) != tc.on {
				t.Errorf("bridgeNetfilter = %v, %v; want %v", on, err, tc.on)
			}
			if wantLoads := map[bool]int{true: 1, false: 0}[tc.before == ""]; loads != wantLoads {
				t.Errorf("modprobe ran %d times; want %d", loads, wantLoads)
			}
			b, _ := os.ReadFile(path)
			if string(b) != tc.after {
				t.Errorf("the file holds %q; want %q", b, tc.after)
			}
			if !tc.on && !errors.Is(err, noModprobe) {
				t.Errorf("the error %v does not say modprobe failed", err)
			}
		})
	}
	// A file that cannot be read.
	on, err := bridgeNetfilter(t.TempDir(), nil)
	if on || err == nil || !strings.Contains(err.Error(), "br_netfilter") {
		t.Errorf("a directory: %v, %v; want false and an error about br_netfilter", on, err)
	}
}
