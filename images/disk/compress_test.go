package disk

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/klauspost/compress/zstd"
)

func TestCompress(t *testing.T) {
	needTools(t, "sha256sum")
	// An image's mix: random blocks, text, and long runs of zeros.
	var data []byte
	for i := range 8 {
		block := make([]byte, 256<<10)
		rand.Read(block)
		data = append(data, block...)
		data = append(data, bytes.Repeat([]byte("isle "), 20000*i)...)
		data = append(data, make([]byte, 512<<10)...)
	}
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "disk.img"), filepath.Join(dir, "disk.img.zst")
	writeFile(t, src, data, 0o644)

	var calls [][2]int64
	if err := Compress(context.Background(), src, dst, func(done, total int64) { calls = append(calls, [2]int64{done, total}) }); err != nil {
		t.Fatal(err)
	}
	n := int64(len(data))
	if len(calls) == 0 || calls[len(calls)-1] != [2]int64{n, n} {
		t.Errorf("progress calls %v, want the last (%d, %d)", calls, n, n)
	}
	for i := 1; i < len(calls); i++ {
		if calls[i][0] < calls[i-1][0] || calls[i][1] != n {
			t.Errorf("progress calls %v: done went back or total changed", calls)
		}
	}

	f, err := os.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec, err := zstd.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	got, err := io.ReadAll(dec)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Errorf("decompressed %d bytes differ from the %d compressed", len(got), len(data))
	}
	if fi, err := f.Stat(); err != nil || fi.Size() >= n/2 {
		t.Errorf("compressed to %v bytes of %d (%v)", fi.Size(), n, err)
	}

	sum, err := os.ReadFile(dst + ".sha256")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}  disk\.img\.zst\n$`).Match(sum) {
		t.Errorf("disk.img.zst.sha256 holds %q, want sha256sum's format", sum)
	}
	cmd := exec.Command("sha256sum", "-c", "disk.img.zst.sha256")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("sha256sum -c: %v\n%s", err, out)
	}
}

func TestCompressCanceled(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "disk.img"), filepath.Join(dir, "disk.img.zst")
	writeFile(t, src, make([]byte, 1<<20), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := Compress(ctx, src, dst, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Compress: %v, want context.Canceled", err)
	}
	onlyEntry(t, dir, "disk.img")
}
