// Command imagebench is `make bench-image`: what isle's SD-card image
// costs to build and how fast it boots and joins, under QEMU.
//
// It builds the rpi4 agent image with images.Build: once from an empty root
// filesystem cache (-scratch: mmdebstrap downloads the Debian packages from
// the machine's apt mirror), then -trials times with the root filesystem
// cached (-cache), and compresses the last build with zstd as `make image`
// does. Then it starts an island of one server (`isle up`) and, -trials
// times, flashes a copy of that image (4 GiB, isle.yaml written on its FAT
// partition as a user would: the island's token, a static address on the
// island's LAN) and boots it with qemu-system-aarch64 -M virt on a tap on
// the island's LAN bridge, timing the boot from QEMU's start to the Node
// Ready; it then powers the board off, waits for its Node to go NotReady,
// and times a second boot (no first-boot work) to Ready. On the last
// trial's board it runs a pod and reads isle's memory from the agent's
// /metrics, and its split (anonymous, file) from /proc over SSH with a key
// from isle.yaml. The island, the VMs and every file are removed at the end,
// also on errors, SIGINT and SIGTERM.
//
// Targets: a build from scratch within 5 minutes (issue 10), a cached one
// in seconds, isle's RSS on the board as bench-agent's; k3s ships no image
// to compare with, and Raspberry Pi OS Lite's compressed image is ~0.5 GB.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
	"github.com/isle-cluster/isle/e2e/bench/islandbench"
	"github.com/isle-cluster/isle/images/hosttools"
	"github.com/isle-cluster/isle/node/island"
)

// options are imagebench's command line.
type options struct {
	isle    string        // -isle: isle for this machine, which runs the island
	arm64   string        // -arm64: isle's static linux/arm64 binary, the image's
	dir     string        // -dir: the bench's directory, absolute; removed at the end
	trials  int           // -trials: cached builds, and boots of a fresh card
	scratch bool          // -scratch: first build from an empty root filesystem cache
	cache   string        // -cache: the root filesystem cache of the cached builds, absolute
	settle  time.Duration // -settle: how long the pod runs before isle's memory is read
}

// maxTrials bounds -trials: a trial boots a VM twice, minutes each.
const maxTrials = 10

func main() {
	benchkit.Main("imagebench", parse, run)
}

func parse(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("imagebench", flag.ContinueOnError)
	fs.StringVar(&o.isle, "isle", "out/isle", "isle for this machine, which runs the island")
	fs.StringVar(&o.arm64, "arm64", "out/isle-linux-arm64", "isle's static linux/arm64 binary, which the image holds")
	fs.StringVar(&o.dir, "dir", "/tmp/isle-imagebench", "the bench's directory: images, the island, the VMs' files (removed at the end)")
	fs.IntVar(&o.trials, "trials", 3, "cached builds, and boots of a freshly flashed card")
	fs.BoolVar(&o.scratch, "scratch", true, "first build the image from an empty root filesystem cache (downloads ~250 MB)")
	fs.StringVar(&o.cache, "cache", "/var/cache/isle-image", "the root filesystem cache of the cached builds (filled if empty)")
	fs.DurationVar(&o.settle, "settle", 30*time.Second, "how long the pod runs on the VM before isle's memory is read")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("flags: unexpected arguments %q", fs.Args())
	case o.isle == "":
		return o, errors.New("flags: -isle: want the isle binary (make build puts it in out/isle)")
	case o.arm64 == "":
		return o, errors.New("flags: -arm64: want isle's linux/arm64 binary (make cross puts it in out/isle-linux-arm64)")
	case o.trials < 1 || o.trials > maxTrials:
		return o, fmt.Errorf("flags: -trials %d: want 1 to %d", o.trials, maxTrials)
	case o.settle < 0 || o.settle > 10*time.Minute:
		return o, fmt.Errorf("flags: -settle %v: want 0 to 10m", o.settle)
	case o.dir == "":
		return o, errors.New("flags: -dir: want a directory")
	case o.cache == "":
		return o, errors.New("flags: -cache: want a directory")
	}
	var err error
	if o.dir, err = filepath.Abs(o.dir); err != nil {
		return o, fmt.Errorf("flags: -dir %q: %w", o.dir, err)
	}
	if o.cache, err = filepath.Abs(o.cache); err != nil {
		return o, fmt.Errorf("flags: -cache %q: %w", o.cache, err)
	}
	if o.dir == "/" || o.dir == o.cache || within(o.cache, o.dir) {
		return o, fmt.Errorf("flags: -dir %s: the bench removes it at the end: want a directory of its own, not holding -cache %s", o.dir, o.cache)
	}
	return o, nil
}

// within says whether path is dir or below it; both are clean and
// absolute.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// tools are the host programs the bench runs besides those of
// images.Build, with their Debian packages.
var tools = []hosttools.Tool{
	{Name: "qemu-system-aarch64", Package: "qemu-system-arm"},
	{Name: "mmdebstrap", Package: "mmdebstrap"},
	{Name: "mcopy", Package: "mtools"},
	{Name: "mdir", Package: "mtools"},
	{Name: "mkfs.vfat", Package: "dosfstools"},
	{Name: "sfdisk", Package: "fdisk"},
	{Name: "mke2fs", Package: "e2fsprogs"},
	{Name: "ip", Package: "iproute2"},
	{Name: "cp", Package: "coreutils"},
}

// marker marks -dir as the bench's, so that a later run may remove what
// an interrupted one left there.
const marker = ".isle-imagebench"

func run(ctx context.Context, o options) (err error) {
	if err := islandbench.Preflight(ctx, o.isle, o.dir, "bench-image"); err != nil {
		return err
	}
	if err := hosttools.Missing(tools, hosttools.Look); err != nil {
		return fmt.Errorf("host tools: %w (or run make setup)", err)
	}
	env, err := probe(ctx, o)
	if err != nil {
		return err
	}
	isl := &islandbench.Island{Bin: o.isle, Dir: filepath.Join(o.dir, "island"), Servers: 1, Agents: 0}
	if err := claimDir(o.dir, isl); err != nil {
		return err
	}
	defer func() {
		err = errors.Join(err, isl.Down())
		if rmErr := os.RemoveAll(o.dir); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("remove -dir: %w", rmErr))
		}
	}()

	r := results{settle: o.settle, cache: o.cache}
	if o.scratch {
		b, err := buildScratch(ctx, o)
		if err != nil {
			return err
		}
		r.scratch = &b
	}
	raw := filepath.Join(o.dir, "card.img")
	if r.cached, err = buildCached(ctx, o, raw); err != nil {
		return err
	}
	if r.compressed, err = compress(ctx, raw); err != nil {
		return err
	}

	if _, err := isl.Up(ctx); err != nil {
		return err
	}
	st, err := island.Load(isl.Dir)
	if err != nil {
		return err
	}
	if err := islandbench.PushHello(ctx, st, "linux/arm64"); err != nil {
		return err
	}
	if r.boots, r.memory, err = bootTrials(ctx, o, st, raw); err != nil {
		return err
	}

	fmt.Println()
	env.WriteMarkdown(os.Stdout)
	r.header(os.Stdout)
	fmt.Println()
	report(r).Write(os.Stdout)
	return nil
}

// probe reads the environment for the report's header: benchkit.Probe's,
// its data directory made -dir.
func probe(ctx context.Context, o options) (benchkit.Env, error) {
	env, err := benchkit.Probe(ctx, o.isle, "isle-imagebench-probe-")
	if err != nil {
		return env, err
	}
	// Probe's directory tells which disk temporary files go to; the bench
	// works in -dir, on that disk if it is on the same file system.
	defer os.Remove(env.Dir)
	same, err := sameFS(env.Dir, filepath.Dir(o.dir))
	if err != nil {
		return env, fmt.Errorf("-dir %s: %w", o.dir, err)
	}
	if !same {
		env.Disk = "not described (another file system than " + filepath.Dir(env.Dir) + "'s)"
	}
	env.Dir = o.dir
	return env, nil
}

// sameFS says whether a and b are on one file system.
func sameFS(a, b string) (bool, error) {
	var sa, sb syscall.Stat_t
	if err := syscall.Stat(a, &sa); err != nil {
		return false, fmt.Errorf("stat %s: %w", a, err)
	}
	if err := syscall.Stat(b, &sb); err != nil {
		return false, fmt.Errorf("stat %s: %w", b, err)
	}
	return sa.Dev == sb.Dev, nil
}

// claimDir makes dir the bench's: new, or left by an earlier run (whose
// island it removes first); it refuses a directory that holds anything
// else, as the bench removes dir at the end.
func claimDir(dir string, isl *islandbench.Island) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("-dir: %w", err)
	case len(entries) == 0:
	default:
		if _, err := os.Stat(filepath.Join(dir, marker)); err != nil {
			return fmt.Errorf("-dir %s holds files that are not the bench's (no %s): choose another directory", dir, marker)
		}
		slog.Info("removing what an earlier run left", "dir", dir)
		if err := isl.Down(); err != nil {
			return err
		}
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("-dir: %w", err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("-dir: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, marker), nil, 0o644); err != nil {
		return fmt.Errorf("-dir: %w", err)
	}
	return nil
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
