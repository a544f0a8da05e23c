package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
	"github.com/isle-cluster/isle/e2e/bench/islandbench"
)

// results are what the bench measured.
type results struct {
	settle     time.Duration
	cache      string          // the cached builds' root filesystem cache
	scratch    *build          // the build from an empty cache; nil: not run
	cached     []time.Duration // the builds with the root filesystem cached
	compressed compressed      // the last cached build's image, compressed
	boots      []boot          // one per trial
	memory     memory          // isle on the last trial's board, with a pod
}

// Targets.
const (
	scratchTarget = 5 * time.Minute  // issue 10's
	cachedTarget  = 30 * time.Second // seconds
	rssTarget     = 24 << 20         // bench-agent's
)

// header says what ran.
func (r results) header(w io.Writer) {
	fmt.Fprintf(w, "- image: %s %s, uncompressed, built by images.Build; cached builds: %d, the root filesystem cached in %s\n",
		board, role, len(r.cached), r.cache)
	fmt.Fprintf(w, "- boots: %d trials, each a fresh card (the image grown to 4 GiB, isle.yaml with a static address) booted, powered off and booted again, under qemu-system-aarch64 %s (TCG) on the LAN of an island of one server\n",
		len(r.boots), strings.Join(qemuArgs[:8], " "))
	fmt.Fprintf(w, "- isle's memory: from the last card's /metrics, %v after its pod (hello, arm64) was Running\n", r.settle)
}

// report makes the table.
func report(r results) benchkit.Table {
	var t benchkit.Table
	if r.scratch != nil {
		t.Row("build from scratch (empty cache, packages downloaded)", seconds(r.scratch.total),
			fmt.Sprintf("≤ %v min", scratchTarget.Minutes()), r.scratch.total <= scratchTarget)
		t.Row("  of which the root filesystem (mmdebstrap)", seconds(r.scratch.rootfs), "", true)
	} else {
		t.Missing("build from scratch (not run: -scratch=false)", fmt.Sprintf("≤ %v min", scratchTarget.Minutes()))
	}
	med := median(r.cached)
	t.Row(fmt.Sprintf("build, root filesystem cached, median of %d", len(r.cached)), seconds(med),
		fmt.Sprintf("≤ %v s", cachedTarget.Seconds()), med <= cachedTarget)
	t.Row("build, root filesystem cached, max", seconds(slices.Max(r.cached)), "", true)
	c := r.compressed
	t.Row("zstd compression of the raw image", seconds(c.took), "", true)
	note(&t, "compressed image (.img.zst)", mib(c.zst), "— (RPi OS Lite ~0.5 GB xz)")
	t.Row("raw image, size / allocated on disk", mib(c.raw)+" / "+mib(c.rawAlloc), "", true)
	first, again, off := make([]time.Duration, len(r.boots)), make([]time.Duration, len(r.boots)), make([]time.Duration, len(r.boots))
	for i, b := range r.boots {
		first[i], again[i], off[i] = b.first, b.again, b.notReady
	}
	note(&t, fmt.Sprintf("first boot → Node Ready (-M virt, TCG), median of %d", len(first)), seconds(median(first)), "—")
	note(&t, fmt.Sprintf("reboot → Node Ready, median of %d", len(again)), seconds(median(again)), "—")
	t.Row("  power-off → Node NotReady, median", seconds(median(off)), "", true)
	t.Row("isle's RSS in the VM with one pod", mib(r.memory.rss), fmt.Sprintf("≤ %d MiB (k3s agent ~270 MB)", rssTarget>>20),
		r.memory.rss <= rssTarget)
	t.Row("  of which anonymous / the binary's pages (RssAnon / RssFile)", mib(r.memory.anon)+" / "+mib(r.memory.file), "", true)
	t.Row("  Go heap in use", mib(r.memory.heap), "", true)
	return t
}

// note adds a measure with a target column that is context, not a target
// (it gets no verdict).
func note(t *benchkit.Table, measure, value, context string) {
	*t = append(*t, [4]string{measure, value, context, ""})
}

// median is the median of ds (the mean of the two middle ones for an
// even count); it panics on an empty ds.
func median(ds []time.Duration) time.Duration {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = float64(d)
	}
	return time.Duration(islandbench.Median(xs))
}

// seconds formats d to the tenth of a second.
func seconds(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }

// mib formats a size in MiB.
func mib[T int64 | uint64](n T) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
