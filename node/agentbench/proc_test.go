package main

import (
	"os"
	"testing"

	"github.com/isle-cluster/isle/raft/benchkit"
)

// The test binary's own mappings: after clear_refs, the code it runs from
// then on counts, and never more than its resident file-backed pages.
func TestReferenced(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("/proc/self/clear_refs", []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	file, err := benchkit.ProcFields(status, "RssFile")
	if err != nil {
		t.Fatal(err)
	}
	n, err := referenced(smaps, exe)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 || n > file[0] {
		t.Errorf("%d bytes of %s referenced since clear_refs, want more than none and at most RssFile, %d", n, exe, file[0])
	}
	if _, err := referenced(smaps, "/no/such/file"); err == nil {
		t.Error("a file with no mapping: no error")
	}
}
