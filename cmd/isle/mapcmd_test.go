package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestMapCommandRefuses: isle map serves a user's credentials, so only on
// loopback, and only with a kubeconfig it can read.
func TestMapCommandRefuses(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--address", "0.0.0.0:8001", "--kubeconfig", missing}, "on a loopback address only"},
		{[]string{"--address", "192.168.1.2:8001", "--kubeconfig", missing}, "on a loopback address only"},
		{[]string{"--address", "8001", "--kubeconfig", missing}, `--address "8001"`},
		{[]string{"--address", "127.0.0.1:0", "--kubeconfig", missing}, "pki: kubeconfig"},
	} {
		root := newRootCommand()
		root.SetArgs(append([]string{"map"}, tc.args...))
		root.SilenceErrors = true
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("isle map %v: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}
