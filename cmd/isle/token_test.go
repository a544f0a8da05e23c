package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTokenFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return p
	}
	good := write("token", "ISLE1::abc::secret\n", 0o600)
	for _, tc := range []struct {
		name, token, file, want, err string
	}{
		{"a private file", "", good, "ISLE1::abc::secret", ""},
		{"readable by others", "", write("open", "ISLE1::abc::secret\n", 0o644), "", "chmod 600"},
		{"readable by the group", "", write("group", "ISLE1::abc::secret\n", 0o640), "", "mode 0640"},
		{"empty", "", write("empty", "\n", 0o600), "", "the token alone"},
		{"two words", "", write("two", "a b\n", 0o600), "", "the token alone"},
		{"missing", "", filepath.Join(dir, "absent"), "", "no such file"},
		{"both ways", "ISLE1::x::y", good, "", "not both"},
		{"none", "", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := tc.token
			err := takeTokenFile(&tok, tc.file)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("got %v, want an error with %q", err, tc.err)
			case tc.err == "" && tok != tc.want:
				t.Errorf("token %q, want %q", tok, tc.want)
			}
		})
	}
}

// TestConfigFileMode refuses a config file other users may read: it holds
// the cluster token.
func TestConfigFileMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte("max-pods: 9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := configure(t, newAgentCommand, "--config", path); err != nil {
		t.Fatalf("a private config file: %v", err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := configure(t, newAgentCommand, "--config", path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a config file others may read: %v, want a refusal saying chmod 600", err)
	}
}
