package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/isle-cluster/isle/images"
	"github.com/isle-cluster/isle/images/disk"
	"github.com/isle-cluster/isle/images/firstboot"
)

// The image the bench builds and boots.
const (
	board = "rpi4"
	role  = firstboot.RoleAgent
)

// rootfsStep starts the message images.Build logs when it has the root
// filesystem, "(cached: true)" or "(cached: false)" after it.
const rootfsStep = "image: root filesystem"

// step is one record images.Build logged: its message, and its "took"
// attribute if it had one.
type step struct {
	msg   string
	took  time.Duration
	timed bool
}

// recorder is a slog.Handler that keeps every record's message and "took"
// duration and passes the record on to next (the bench's log).
type recorder struct {
	next  slog.Handler
	mu    *sync.Mutex
	steps *[]step
}

func newRecorder(next slog.Handler) recorder {
	return recorder{next: next, mu: new(sync.Mutex), steps: new([]step)}
}

func (r recorder) Enabled(ctx context.Context, l slog.Level) bool { return r.next.Enabled(ctx, l) }

func (r recorder) Handle(ctx context.Context, rec slog.Record) error {
	s := step{msg: rec.Message}
	rec.Attrs(func(a slog.Attr) bool {
		if v := a.Value.Resolve(); a.Key == "took" && v.Kind() == slog.KindDuration {
			s.took, s.timed = v.Duration(), true
			return false
		}
		return true
	})
	r.mu.Lock()
	*r.steps = append(*r.steps, s)
	r.mu.Unlock()
	return r.next.Handle(ctx, rec)
}

func (r recorder) WithAttrs(as []slog.Attr) slog.Handler {
	return recorder{next: r.next.WithAttrs(as), mu: r.mu, steps: r.steps}
}

func (r recorder) WithGroup(name string) slog.Handler {
	return recorder{next: r.next.WithGroup(name), mu: r.mu, steps: r.steps}
}

// recorded is a copy of the steps recorded so far.
func (r recorder) recorded() []step {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]step(nil), *r.steps...)
}

// rootfsTime finds the root filesystem's step in steps: its duration and
// whether the root filesystem came from the cache.
func rootfsTime(steps []step) (took time.Duration, cached bool, err error) {
	for _, s := range steps {
		if !strings.HasPrefix(s.msg, rootfsStep) {
			continue
		}
		if !s.timed {
			return 0, false, fmt.Errorf("build log: %q has no took duration", s.msg)
		}
		switch rest := strings.TrimPrefix(s.msg, rootfsStep); rest {
		case " (cached: true)", " (cached: false)":
			return s.took, rest == " (cached: true)", nil
		default:
			return 0, false, fmt.Errorf("build log: %q: want %q and (cached: true) or (cached: false)", s.msg, rootfsStep)
		}
	}
	return 0, false, fmt.Errorf("build log: no step %q", rootfsStep)
}

// build is one measured images.Build.
type build struct {
	total, rootfs time.Duration
	cached        bool // the root filesystem came from the cache
}

// buildImage builds the bench's image, uncompressed, into out with the
// root filesystem cache cacheDir.
func buildImage(ctx context.Context, o options, out, cacheDir string) (build, error) {
	rec := newRecorder(slog.Default().Handler())
	start := time.Now()
	_, err := images.Build(ctx, images.Options{
		Board: board, Role: role, Isle: o.arm64, Out: out, NoCompress: true, CacheDir: cacheDir, Log: slog.New(rec),
	})
	b := build{total: time.Since(start)}
	if err != nil {
		return b, fmt.Errorf("build %s: %w", out, err)
	}
	if b.rootfs, b.cached, err = rootfsTime(rec.recorded()); err != nil {
		return b, fmt.Errorf("build %s: %w", out, err)
	}
	return b, nil
}

// buildScratch builds the image with an empty root filesystem cache of its
// own, and removes the image and that cache.
func buildScratch(ctx context.Context, o options) (build, error) {
	cache := filepath.Join(o.dir, "scratch-cache")
	out := filepath.Join(o.dir, "scratch.img")
	defer os.RemoveAll(cache)
	defer os.Remove(out)
	slog.Info("build from scratch: an empty root filesystem cache; mmdebstrap downloads the packages (minutes)", "cache", cache)
	b, err := buildImage(ctx, o, out, cache)
	if err != nil {
		return b, fmt.Errorf("from scratch: %w", err)
	}
	if b.cached {
		return b, fmt.Errorf("from scratch: the root filesystem came from the cache %s, which the bench had just made empty", cache)
	}
	slog.Info("built from scratch", "took", b.total.Round(time.Second), "rootfs", b.rootfs.Round(time.Second))
	return b, nil
}

// buildCached builds the image o.trials times with the root filesystem
// cache -cache, into raw, and returns their times. A build that filled an
// empty cache comes first and is not measured.
func buildCached(ctx context.Context, o options, raw string) ([]time.Duration, error) {
	var times []time.Duration
	filled := false
	for len(times) < o.trials {
		b, err := buildImage(ctx, o, raw, o.cache)
		if err != nil {
			return nil, fmt.Errorf("cached: %w", err)
		}
		if !b.cached {
			if filled {
				return nil, fmt.Errorf("cached: the root filesystem was built again although the previous build put it in %s", o.cache)
			}
			filled = true
			slog.Info("the cache had no root filesystem: that build filled it and is not measured", "cache", o.cache, "took", b.total.Round(time.Second))
			continue
		}
		times = append(times, b.total)
		slog.Info("cached build", "trial", len(times), "took", b.total.Round(time.Millisecond), "rootfs", b.rootfs.Round(time.Millisecond))
	}
	return times, nil
}

// compressed is the compression of the raw image.
type compressed struct {
	took               time.Duration
	zst, raw, rawAlloc int64 // sizes in bytes; rawAlloc: the raw file's allocated blocks
}

// compress compresses raw as `isle image build` does, measures it, and
// removes the compressed files.
func compress(ctx context.Context, raw string) (compressed, error) {
	var c compressed
	zst := raw + ".zst"
	defer os.Remove(zst)
	defer os.Remove(zst + ".sha256")
	start := time.Now()
	if err := disk.Compress(ctx, raw, zst, nil); err != nil {
		return c, err
	}
	c.took = time.Since(start)
	var err error
	if c.raw, c.rawAlloc, err = sizes(raw); err != nil {
		return c, err
	}
	if c.zst, _, err = sizes(zst); err != nil {
		return c, err
	}
	slog.Info("compressed", "took", c.took.Round(time.Millisecond), "zst_MiB", c.zst>>20, "raw_MiB", c.raw>>20, "raw_allocated_MiB", c.rawAlloc>>20)
	return c, nil
}

// sizes are a file's size and the bytes its blocks take on disk.
func sizes(path string) (size, alloc int64, err error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, 0, fmt.Errorf("stat %s: %w", path, err)
	}
	return st.Size, st.Blocks * 512, nil
}
