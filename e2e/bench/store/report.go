package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
)

// Targets isle is held to.
const (
	targetThroughput = 1.2 // isle/etcd writes/s at the target writer count, at least
	targetDiskBytes  = 0.5 // isle/etcd disk bytes per write at the target writer count, at most
	targetWriters    = 64
)

// printReport writes the environment and the markdown tables.
func printReport(w io.Writer, env environment, o options, cells []cellResult, idle []idleResult) {
	fmt.Fprintf(w, "## Store benchmark: isle vs etcd, 3 members each on loopback\n\n")
	fmt.Fprintf(w, "- isle: %s (Raft links in mutual TLS 1.3, member certificates)\n- etcd: %s (default fsync, v3 JSON gateway, peer links in mutual TLS: --peer-client-cert-auth)\n", env.Isle, env.etcdVersion)
	fmt.Fprintf(w, "- kernel %s, %d CPUs (%s)\n", env.Kernel, env.CPUs, env.CPUModel)
	fmt.Fprintf(w, "- data: %s on %s\n", env.Dir, env.Disk)
	fmt.Fprintf(w, "- each cell: %v warm-up, %v measured, %d-byte values, distinct keys, writes round-robin over the members\n\n",
		o.warmup, o.duration, o.valueSize)

	fmt.Fprintln(w, "| system | writers | writes/s | p50 ms | p99 ms | disk bytes/write |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: |")
	for _, c := range cells {
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s |\n", c.system, c.writers,
			benchkit.Group(c.writesPerSec()), ms(c.p50), ms(c.p99), benchkit.Group(c.bytesPerWrite()))
	}
	for _, c := range cells {
		if c.failed > 0 {
			fmt.Fprintf(w, "\n%s, %d writers: %d writes failed (first: %v)\n", c.system, c.writers, c.failed, c.firstErr)
		}
	}

	fmt.Fprintln(w, "\nWAL fsyncs and snapshot files (sum over the three members, from their /metrics; the disk bytes above include the snapshot files):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| system | writers | fsyncs/write | mean fsync ms | snapshot file bytes/write |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: |")
	for _, c := range cells {
		mean := "-"
		if c.fsyncs > 0 {
			mean = fmt.Sprintf("%.2f", 1000*c.fsyncSecs/c.fsyncs)
		}
		snap := "-"
		if c.hasSnap {
			snap = benchkit.Group(c.snapBytes / float64(c.writes))
		}
		fmt.Fprintf(w, "| %s | %d | %.3f | %s | %s |\n", c.system, c.writers, c.fsyncs/float64(c.writes), mean, snap)
	}

	fmt.Fprintf(w, "\nIdle disk writes (%v after the load, over %v, no client traffic):\n\n", idleWait, o.idle)
	fmt.Fprintln(w, "| system | total bytes/s | per member bytes/s |")
	fmt.Fprintln(w, "| --- | ---: | --- |")
	for _, r := range idle {
		var each []string
		for i, n := range r.names {
			each = append(each, fmt.Sprintf("%s %s", n, benchkit.Group(r.perSec[i])))
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", r.system, benchkit.Group(r.total), strings.Join(each, ", "))
	}

	fmt.Fprintln(w, "\nisle / etcd:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| writers | throughput | p99 | disk bytes/write |")
	fmt.Fprintln(w, "| ---: | ---: | ---: | ---: |")
	for _, n := range o.writers {
		is, et, ok := pair(cells, n)
		if !ok {
			continue
		}
		fmt.Fprintf(w, "| %d | %.2f× | %.2f× | %s |\n", n, is.writesPerSec()/et.writesPerSec(),
			float64(is.p99)/float64(et.p99), diskRatio(is, et))
	}

	fmt.Fprintln(w, "\nTargets:")
	fmt.Fprintln(w)
	if is, et, ok := pair(cells, targetWriters); ok {
		tr := is.writesPerSec() / et.writesPerSec()
		fmt.Fprintf(w, "- %d writers, isle ≥ %.1f× etcd's writes/s: %s (%.2f×)\n", targetWriters, targetThroughput,
			benchkit.Verdict(tr >= targetThroughput), tr)
		fmt.Fprintf(w, "- %d writers, isle p99 no worse than etcd's: %s (%s ms vs %s ms)\n", targetWriters,
			benchkit.Verdict(is.p99 <= et.p99), ms(is.p99), ms(et.p99))
		dr := is.bytesPerWrite() / et.bytesPerWrite()
		fmt.Fprintf(w, "- %d writers, isle disk bytes/write ≤ %.1f× etcd's: %s (%.2f×: %s vs %s)\n", targetWriters, targetDiskBytes,
			benchkit.Verdict(et.bytesPerWrite() > 0 && dr <= targetDiskBytes), dr,
			benchkit.Group(is.bytesPerWrite()), benchkit.Group(et.bytesPerWrite()))
	} else {
		fmt.Fprintf(w, "- %d writers: not measured (see -writers)\n", targetWriters)
	}
	for _, r := range idle {
		if r.system == "isle" {
			fmt.Fprintf(w, "- isle idle writes 0 B/s: %s (%s B/s)\n", benchkit.Verdict(r.total == 0), benchkit.Group(r.total))
		}
	}
}

// diskRatio is isle's disk bytes per write over etcd's, or "-" when etcd
// wrote nothing.
func diskRatio(is, et cellResult) string {
	if et.bytesPerWrite() == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", is.bytesPerWrite()/et.bytesPerWrite())
}

// pair finds the isle and etcd cells of one writer count.
func pair(cells []cellResult, writers int) (is, et cellResult, ok bool) {
	var hasI, hasE bool
	for _, c := range cells {
		if c.writers != writers {
			continue
		}
		switch c.system {
		case "isle":
			is, hasI = c, true
		case "etcd":
			et, hasE = c, true
		}
	}
	return is, et, hasI && hasE && et.writes > 0 && et.p99 > 0
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }
