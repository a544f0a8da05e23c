package volumes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestConfigMapUpdateSwapsData(t *testing.T) {
	src := newFakeSources()
	src.addConfigMap("cfg", map[string]string{"a": "1", "b": "1", "old": "x"})
	m, _ := newManager(t, src)
	pod := testPod(vol("cfg", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}))
	paths, err := m.Setup(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	dir := paths["cfg"]
	first, err := os.Readlink(filepath.Join(dir, "..data"))
	if err != nil || !strings.HasPrefix(first, "..20") {
		t.Fatalf("..data -> %q %v, want a timestamped directory", first, err)
	}
	if _, err := m.Setup(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.Readlink(filepath.Join(dir, "..data")); again != first {
		t.Errorf("unchanged contents were rewritten: ..data -> %q, was %q", again, first)
	}

	src.addConfigMap("cfg", map[string]string{"a": "2", "b": "2", "new": "y"})
	if _, err := m.Setup(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	second, err := os.Readlink(filepath.Join(dir, "..data"))
	if err != nil || second == first {
		t.Fatalf("..data -> %q %v after an update, was %q", second, err, first)
	}
	if got, want := readVolume(t, dir), map[string]string{"a": "2", "b": "2", "new": "y"}; !maps.Equal(got, want) {
		t.Errorf("after the update: %q, want %q", got, want)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{second, "..data", "a", "b", "new"}; strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("volume holds %q, want %q (old contents, old key and ..data_tmp gone)", names, want)
	}
}

func TestWriteAtomicCleansLeftovers(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"..2020_01_01_00_00_00.1", "stray-dir"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("..2020_01_01_00_00_00.1", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "..data"), 0o755); err != nil { // not a symlink
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "k"), 0o755); err != nil { // a directory where the key's link goes
		t.Fatal(err)
	}
	changed, err := writeAtomic(dir, payload{"k": {data: []byte("v"), mode: 0o644}})
	if err != nil || !changed {
		t.Fatalf("writeAtomic: %v %v", changed, err)
	}
	if got := readVolume(t, dir); !maps.Equal(got, map[string]string{"k": "v"}) {
		t.Errorf("files %q", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("%d entries left, want contents, ..data, k", len(entries))
	}
	changed, err = writeAtomic(dir, payload{"k": {data: []byte("v"), mode: 0o600}})
	if err != nil || !changed {
		t.Errorf("a mode change is not written: %v %v", changed, err)
	}
}

// TestWriteAtomicReaders updates a volume many times while readers read
// it: one that resolves ..data once must see every file of one version;
// one that opens the top-level names must see only whole files.
func TestWriteAtomicReaders(t *testing.T) {
	dir := t.TempDir()
	version := func(n int) payload {
		v := []byte(strings.Repeat(fmt.Sprintf("v%d.", n), n%7+1))
		p := payload{"a": {data: v, mode: 0o644}, "b": {data: v, mode: 0o644}, "sub/c": {data: v, mode: 0o644}}
		if n%2 == 0 {
			p["even"] = file{data: v, mode: 0o644}
		}
		return p
	}
	whole := func(s string) bool {
		var n int
		if _, err := fmt.Sscanf(s, "v%d.", &n); err != nil {
			return false
		}
		return s == string(version(n)["a"].data)
	}
	if _, err := writeAtomic(dir, version(0)); err != nil {
		t.Fatal(err)
	}
	var (
		done       atomic.Bool
		consistent atomic.Int64
		wg         sync.WaitGroup
	)
	errs := make(chan error, 2)
	wg.Go(func() {
		for !done.Load() {
			root, err := os.OpenRoot(filepath.Join(dir, "..data"))
			if err != nil {
				continue // between the removal of old contents and a retry
			}
			var got []string
			for _, name := range []string{"a", "b", "sub/c"} {
				b, err := root.ReadFile(name)
				if err != nil {
					break // these contents were removed meanwhile
				}
				got = append(got, string(b))
			}
			root.Close()
			if len(got) == 3 {
				if got[0] != got[1] || got[1] != got[2] || !whole(got[0]) {
					errs <- fmt.Errorf("one ..data shows a mix: %q", got)
					return
				}
				consistent.Add(1)
			}
		}
	})
	wg.Go(func() {
		for !done.Load() {
			b, err := os.ReadFile(filepath.Join(dir, "a"))
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs <- err
				return
			}
			if err == nil && !whole(string(b)) {
				errs <- fmt.Errorf("a reader saw part of a file: %q", b)
				return
			}
		}
	})
	for n := 1; n <= 150; n++ {
		if _, err := writeAtomic(dir, version(n)); err != nil {
			t.Fatal(err)
		}
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if consistent.Load() == 0 {
		t.Error("the reader never read a whole version")
	}
	if got := readVolume(t, dir); !maps.Equal(got, map[string]string{"a": string(version(150)["a"].data), "b": string(version(150)["a"].data),
		"sub/c": string(version(150)["a"].data), "even": string(version(150)["a"].data)}) {
		t.Errorf("final files %q", got)
	}
}
