package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

func TestServerFlagsValidate(t *testing.T) {
	cases := []struct {
		name string
		f    serverFlags
		want string // substring of the error; "" for none
	}{
		{"init", serverFlags{init: true, name: "pi1", raftAddr: "10.0.0.1:6445", storeAddr: "127.0.0.1:6444"}, ""},
		{"both init and join", serverFlags{init: true, join: "x:1", name: "pi1", raftAddr: "10.0.0.1:6445", storeAddr: "127.0.0.1:6444"}, "not both"},
		{"wildcard raft address", serverFlags{init: true, name: "pi1", raftAddr: "0.0.0.0:6445", storeAddr: "127.0.0.1:6444"}, "--raft-addr"},
		{"no port", serverFlags{init: true, name: "pi1", raftAddr: "10.0.0.1", storeAddr: "127.0.0.1:6444"}, "--raft-addr"},
		{"port zero", serverFlags{init: true, name: "pi1", raftAddr: "10.0.0.1:6445", storeAddr: "127.0.0.1:0"}, "--store-addr"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.f.validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"version"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	want := runtime.GOOS + "/" + runtime.GOARCH
	if !strings.HasPrefix(out.String(), "isle ") || !strings.Contains(out.String(), want) {
		t.Fatalf("version printed %q, want isle ... %s", out.String(), want)
	}
}
