package nstest

import (
	"os"
	"testing"
)

// RequireRoot skips a test that needs root when it runs as another user
// on a developer's machine, and fails it on CI (the environment variable
// CI set), which must run as root. why says what the test does that needs
// root ("creates network namespaces").
func RequireRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "" {
		t.Skip("needs root: " + why)
	}
	t.Fatal("needs root: " + why + " (CI must run as root)")
}
