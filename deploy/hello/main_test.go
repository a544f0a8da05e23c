package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCounter: visits are counted in the data directory and survive a new
// counter (a new pod on the same volume); a damaged file is an error.
func TestCounter(t *testing.T) {
	dir := t.TempDir()
	c := &counter{dir: dir}
	for want := 1; want <= 3; want++ {
		if n, err := c.add(); err != nil || n != want {
			t.Fatalf("visit %d: %d, %v", want, n, err)
		}
	}
	if n, err := (&counter{dir: dir}).add(); err != nil || n != 4 {
		t.Fatalf("after a restart: %d, %v, want 4", n, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "visits"), []byte("many\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.add(); err == nil || !strings.Contains(err.Error(), "not a count") {
		t.Fatalf("a damaged count: %v", err)
	}
}

func TestGetCommand(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/hello" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("hello from test\n"))
	}))
	defer srv.Close()
	if code := command([]string{"get", srv.URL + "/hello"}); code != 0 {
		t.Errorf("get of a page: exit %d", code)
	}
	if code := command([]string{"get", srv.URL + "/missing"}); code != 1 {
		t.Errorf("get of a missing page: exit %d, want 1", code)
	}
	if code := command([]string{"fetch"}); code != 2 {
		t.Errorf("bad usage: exit %d, want 2", code)
	}
}
