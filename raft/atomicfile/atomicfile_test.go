package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sub", "f")
	for _, data := range []string{"first", "second, longer than the first"} {
		if err := Write(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != data {
			t.Fatalf("read back %q, %v; want %q", got, err, data)
		}
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	if _, err := os.Stat(p + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left: %v", err)
	}
	// A stale temporary file of a looser mode does not lend it to the file.
	if err := os.WriteFile(p+".tmp", []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(p, []byte("third"), 0o600); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v after a stale temporary file", fi.Mode())
	}
	// A directory where the file should be: an error naming the path.
	if err := os.Mkdir(filepath.Join(filepath.Dir(p), "d"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Write(filepath.Join(filepath.Dir(p), "d"), []byte("x"), 0o600); err == nil {
		t.Fatal("replacing a directory succeeded")
	}
}
