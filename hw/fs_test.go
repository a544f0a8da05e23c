package hw

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A tmpfs of a known size reads as that size, and a file written to it
// takes from what is available.
func TestReadFilesystem(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=4m"); err != nil {
		msg := "this test mounts a tmpfs: run it as root (with CAP_SYS_ADMIN): " + err.Error()
		if os.Getenv("CI") == "" {
			t.Skip(msg)
		}
		t.Fatal(msg)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	empty, err := ReadFilesystem(dir)
	if err != nil {
		t.Fatal(err)
	}
	if empty.Size != 4<<20 || empty.Available != empty.Size {
		t.Fatalf("empty 4 MiB tmpfs: %+v", empty)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	used, err := ReadFilesystem(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if used.Size != empty.Size || used.Available > empty.Available-1<<20 {
		t.Fatalf("after writing 1 MiB: %+v (empty: %+v)", used, empty)
	}
	if _, err := ReadFilesystem(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing path read without error")
	}
}
