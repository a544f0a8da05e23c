package disk

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/klauspost/compress/zstd"
)

// progressEvery is how often at most Compress reports progress.
const progressEvery = 250 * time.Millisecond

// Compress writes src compressed with zstd (the default level, encoding on
// all CPUs) to dst, and dst+".sha256" in sha256sum's format ("HEX  NAME\n",
// NAME the base name of dst). It calls progress(done, total) with the bytes of
// src read so far and src's size at most every 250 ms, and once at the end
// with done == total; progress may be nil. On failure it leaves neither file.
func Compress(ctx context.Context, src, dst string, progress func(done, total int64)) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("images: disk: compress: %w", err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return fmt.Errorf("images: disk: compress: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("images: disk: compress: %s is not a regular file", src)
	}
	out, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-")
	if err != nil {
		return fmt.Errorf("images: disk: compress: %w", err)
	}
	defer func() {
		out.Close()
		if err != nil {
			os.Remove(out.Name())
			os.Remove(dst)
			os.Remove(dst + ".sha256")
		}
	}()

	sum := sha256.New()
	enc, err := zstd.NewWriter(io.MultiWriter(out, sum), zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)))
	if err != nil {
		return fmt.Errorf("images: disk: compress: %w", err)
	}
	r := &progressReader{ctx: ctx, r: in, total: fi.Size(), progress: progress}
	if _, err := io.Copy(enc, r); err != nil {
		enc.Close()
		return fmt.Errorf("images: disk: compress %s: %w", src, err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("images: disk: compress %s: %w", src, err)
	}
	if r.done != r.total {
		return fmt.Errorf("images: disk: compress: %s changed while being read: %d bytes, not %d", src, r.done, r.total)
	}
	if err := out.Chmod(0o644); err != nil {
		return fmt.Errorf("images: disk: compress: %w", err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("images: disk: compress: %w", err)
	}
	if err := os.Rename(out.Name(), dst); err != nil {
		return fmt.Errorf("images: disk: compress: %w", err)
	}
	line := hex.EncodeToString(sum.Sum(nil)) + "  " + filepath.Base(dst) + "\n"
	if err := os.WriteFile(dst+".sha256", []byte(line), 0o644); err != nil {
		return fmt.Errorf("images: disk: compress: %w", err)
	}
	if progress != nil {
		progress(r.total, r.total)
	}
	return nil
}

// progressReader counts what is read through it, reports it at most every
// progressEvery, and fails once ctx is done.
type progressReader struct {
	ctx         context.Context
	r           io.Reader
	done, total int64
	progress    func(done, total int64)
	last        time.Time
}

func (p *progressReader) Read(b []byte) (int, error) {
	if err := p.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := p.r.Read(b)
	p.done += int64(n)
	if p.progress != nil && time.Since(p.last) >= progressEvery {
		p.last = time.Now()
		p.progress(p.done, p.total)
	}
	return n, err
}
