package wire_test

import (
	"strings"
	"testing"

	"github.com/isle-cluster/isle/control/wire"
)

func TestCheckSkew(t *testing.T) {
	cases := []struct {
		server, joiner string
		role           wire.Role
		want           string // part of the refusal; "" to allow
	}{
		{"0.2", "0.2", wire.RoleAgent, ""},
		{"0.2", "0.1", wire.RoleAgent, ""},
		{"0.2", "", wire.RoleAgent, ""}, // an isle from before releases: 0.1
		{"0.3", "0.1", wire.RoleAgent, "more than one minor release behind"},
		{"0.2", "0.3", wire.RoleAgent, "upgrade the servers first"},
		{"0.2", "0.3", wire.RoleServer, ""}, // servers first, one at a time
		{"0.3", "0.2", wire.RoleServer, ""},
		{"0.2", "0.4", wire.RoleServer, "one minor release at a time"},
		{"0.4", "0.2", wire.RoleServer, "one minor release at a time"},
		{"1.0", "0.9", wire.RoleServer, "a major release apart"},
		{"0.2", "banana", wire.RoleAgent, `release "banana": want MAJOR.MINOR`},
		{"0.2", "0.-1", wire.RoleAgent, "want MAJOR.MINOR"},
		{"0.2", "0.2.1", wire.RoleAgent, "want MAJOR.MINOR"},
	}
	for _, tc := range cases {
		err := wire.CheckSkew(tc.server, tc.joiner, tc.role)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s %s joining %s: refused: %v", tc.role, tc.joiner, tc.server, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s %s joining %s: %v, want an error saying %q", tc.role, tc.joiner, tc.server, err, tc.want)
		}
	}
	if _, _, err := wire.ParseRelease(wire.Release); err != nil {
		t.Fatalf("this binary's release: %v", err)
	}
}
