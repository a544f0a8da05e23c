package cluster

import (
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/control/wire"
)

func TestCheckUserRequest(t *testing.T) {
	tests := []struct {
		req      wire.UserRequest
		role     string
		ttl      time.Duration
		errorHas string
	}{
		{wire.UserRequest{Name: "alice"}, "", defaultUserTTL, ""},
		{wire.UserRequest{Name: "alice@school.example", Namespace: "class-a"}, "admin", defaultUserTTL, ""},
		{wire.UserRequest{Name: "bob", Role: "view", TTL: "24h", Groups: []string{"students", "system:masters"}}, "view", 24 * time.Hour, ""},
		{wire.UserRequest{Name: ""}, "", 0, "name"},
		{wire.UserRequest{Name: "system:kube-scheduler"}, "", 0, "name"},
		{wire.UserRequest{Name: "-x"}, "", 0, "name"},
		{wire.UserRequest{Name: "a", Groups: []string{"system:nodes"}}, "", 0, "system: groups"},
		{wire.UserRequest{Name: "a", Groups: []string{"a,b"}}, "", 0, "no commas"},
		{wire.UserRequest{Name: "a", Groups: []string{""}}, "", 0, "group"},
		{wire.UserRequest{Name: "a", Role: "cluster-admin"}, "", 0, "role"},
		{wire.UserRequest{Name: "a", Namespace: "Bad_NS"}, "", 0, "namespace"},
		{wire.UserRequest{Name: "a", TTL: "10s"}, "", 0, "ttl"},
		{wire.UserRequest{Name: "a", TTL: "100000h"}, "", 0, "ttl"},
		{wire.UserRequest{Name: "a", TTL: "soon"}, "", 0, "ttl"},
	}
	for _, tc := range tests {
		req := tc.req
		ttl, err := checkUserRequest(&req)
		switch {
		case tc.errorHas == "" && err != nil:
			t.Errorf("%+v: %v", tc.req, err)
		case tc.errorHas != "" && (err == nil || !strings.Contains(err.Error(), tc.errorHas)):
			t.Errorf("%+v: %v, want an error about %s", tc.req, err, tc.errorHas)
		case err == nil && (req.Role != tc.role || ttl != tc.ttl):
			t.Errorf("%+v: role %q ttl %v, want %q %v", tc.req, req.Role, ttl, tc.role, tc.ttl)
		}
	}
}
