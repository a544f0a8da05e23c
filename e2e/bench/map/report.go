package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
)

// Targets the map is held to: the issue's, the e2e test's, and this
// benchmark's own where neither gives one.
const (
	targetLatency   = 2 * time.Second       // TestMap: a pod on the map within 2 s of the API showing it
	targetFrame     = 50 * time.Millisecond // p99 frame interval while 100 pods change at once
	targetPageHeap  = 64 << 20              // the page's JavaScript heap: this benchmark's target, none was given
	targetPerMapMem = 1 << 20               // the API server's added heap in use per open map
	targetPerMapCPU = 0.01                  // the API server's added CPU per open map, idle, of one core
	targetWebBytes  = 1536 << 10            // the embedded page's files
)

// printReport writes the environment, the measurements and the targets as
// markdown.
func printReport(w io.Writer, env benchkit.Env, o options, r results) {
	fmt.Fprintf(w, "## Map benchmark: the island's map in headless Chromium, one isle server on loopback\n\n")
	env.WriteMarkdown(w)
	fmt.Fprintf(w, "- browser: %s, headless, 1920×1080 windows; the map served by `isle map` (the administrator's kubeconfig)\n", r.chromium)
	fmt.Fprintf(w, "- %d boards simulated as Node objects (arm64, 4 CPUs, 8 GiB, no agents) and the server's own, %d Pods bound to them "+
		"(Running and Ready through the status subresource), %d Services (one behind an Ingress); set up in %.1f s\n",
		o.boards, o.pods, services, r.setup.Seconds())
	if r.marked {
		fmt.Fprintf(w, "- the node lifecycle controller marked the %d boards NotReady (Unknown: no board answers in gossip) %.0f s after they were created, "+
			"before the pods were made Ready; the map draws them dark, which changes none of the measures\n", o.boards, r.markWait.Seconds())
	} else {
		fmt.Fprintf(w, "- the boards were not marked NotReady within %.0f s: the node lifecycle controller may mark them, and their pods, during a measure\n", r.markWait.Seconds())
	}
	fmt.Fprintf(w, "- the first map drew %d boards (%d dark), %d pods and %d Services, %s\n\n", r.loaded.Boards, r.loaded.Dark, r.loaded.PodEls, r.loaded.Services, r.loaded.Visible)

	var t benchkit.Table
	if n := len(r.latencies); n > 0 {
		p50, p99 := benchkit.Quantile(r.latencies, 0.5), benchkit.Quantile(r.latencies, 0.99)
		t.Row(fmt.Sprintf("update latency, API change → page updated, p50 (%d trials)", o.trials), ms(p50), "", false)
		miss := ""
		if r.missed > 0 {
			miss = fmt.Sprintf(", %d never shown", r.missed)
		}
		t.Row(fmt.Sprintf("update latency, p99 (max %s%s)", ms(maxDuration(r.latencies)), miss), ms(p99), "≤ "+ms(targetLatency), p99 <= targetLatency && r.missed == 0)
	} else {
		t.Missing("update latency, API change → page updated", "≤ "+ms(targetLatency))
	}
	iv := millis(r.burst.Intervals)
	if len(iv) > 0 {
		p99 := benchkit.Quantile(iv, 0.99)
		t.Row(fmt.Sprintf("frame interval while %d pods change at once, p50 (%d frames in 3 s)", o.burst, len(iv)), ms1(benchkit.Quantile(iv, 0.5)), "", false)
		t.Row("frame interval while they change, p99", ms1(p99), "≤ "+ms(targetFrame), p99 <= targetFrame)
		t.Row("frame interval while they change, max", ms1(maxDuration(iv)), "", false)
	} else {
		t.Missing(fmt.Sprintf("frame interval while %d pods change at once, p99", o.burst), "≤ "+ms(targetFrame))
	}
	t.Row(fmt.Sprintf("longest task while they change (%d long tasks over 50 ms)", len(r.burst.Long)), ms1(maxDuration(millis(r.burst.Long))), "", false)
	burstMiss := ""
	if r.burstMiss > 0 {
		burstMiss = fmt.Sprintf(", %d never shown", r.burstMiss)
	}
	t.Row(fmt.Sprintf("the %d changes: first request → the last shown on the map%s", o.burst, burstMiss), ms(r.burstAll), "", false)
	t.Row("first map: opened → every board and pod drawn", ms(r.load), "", false)
	t.Row("page's JavaScript heap once loaded (after a collection)", mib(r.memLoad.HeapUsed), "≤ "+mib(targetPageHeap)+" (bench's)", r.memLoad.HeapUsed <= targetPageHeap)
	t.Row("page's JavaScript heap after the trials and the burst", mib(r.memAfter.HeapUsed), "≤ "+mib(targetPageHeap)+" (bench's)", r.memAfter.HeapUsed <= targetPageHeap)
	t.Row("page's DOM: elements in the document (nodes alive)", fmt.Sprintf("%s (%s)", benchkit.Group(float64(r.memLoad.Elements)), benchkit.Group(float64(r.memLoad.DOMNodes))), "", false)

	maps := float64(max(1, r.mapsOpen))
	perHeap := (float64(r.with.mem.HeapInuse) - float64(r.without.mem.HeapInuse)) / maps
	perRSS := (float64(r.with.mem.RSS) - float64(r.without.mem.RSS)) / maps
	perCPU := (share(r.with.cpu, r.with.elapsed) - share(r.without.cpu, r.without.elapsed)) / maps
	t.Row(fmt.Sprintf("API server: added Go heap in use per open map (%d maps)", r.mapsOpen), mib(perHeap), "≤ "+mib(targetPerMapMem), perHeap <= targetPerMapMem)
	t.Row("API server: added RSS per open map (shown; judged on the heap)", mib(perRSS), "", false)
	if r.with.mem.Live > 0 && r.without.mem.Live > 0 {
		t.Row("API server: added live heap per open map (pprof, shown)", mib((float64(r.with.mem.Live)-float64(r.without.mem.Live))/maps), "", false)
	}
	t.Row(fmt.Sprintf("API server: added CPU per open map, idle %.0f s", r.with.elapsed.Seconds()), pct(perCPU), "≤ "+pct(targetPerMapCPU)+" of a core", perCPU <= targetPerMapCPU)
	t.Row(fmt.Sprintf("the map's files (%d, control/islemap/web)", r.web.files), kib(float64(r.web.stored)), "≤ "+mib(targetWebBytes), r.web.stored <= targetWebBytes)
	t.Row("the map's files as served (gzip where smaller)", kib(float64(r.web.wired)), "", false)
	t.Write(w)

	fmt.Fprintln(w, "\nThe server idle, without and with the maps open:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| | idle s | server CPU, % of a core | API requests/s | RSS MiB | Go heap in use MiB | live heap MiB | isle map CPU % | isle map RSS MiB |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, row := range []struct {
		name string
		w    window
	}{{"no map", r.without}, {fmt.Sprintf("%d maps", r.mapsOpen), r.with}} {
		x := row.w
		fmt.Fprintf(w, "| %s | %.1f | %.2f | %.1f | %.1f | %.1f | %.1f | %.2f | %.1f |\n", row.name, x.elapsed.Seconds(),
			100*share(x.cpu, x.elapsed), x.requested/x.elapsed.Seconds(), float64(x.mem.RSS)/(1<<20), float64(x.mem.HeapInuse)/(1<<20),
			float64(x.mem.Live)/(1<<20), 100*share(x.proxyCPU, x.elapsed), float64(x.proxyRSS)/(1<<20))
	}

	fmt.Fprintln(w, "\nNotes:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "- update latency: from the status write's request (a JSON merge patch of one pod's status, Ready True↔False) "+
		"to the first class change of its bubble that shows it (a MutationObserver, Date.now(): the same wall clock); "+
		"the page redraws on the next animation frame after a watch event. The write itself took "+
		ms(benchkit.Quantile(orZero(r.writes), 0.5))+" at p50.")
	fmt.Fprintf(w, "- frames: requestAnimationFrame intervals in the first map's window (60 Hz: 16.7 ms) for 3 s from %d concurrent status writes "+
		"(all answered in %s); idle before them: p50 %s, p99 %s, max %s. Long tasks are PerformanceObserver's (over 50 ms).\n",
		o.burst, ms(r.burstWrite), ms1(q(r.idle.Intervals, 0.5)), ms1(q(r.idle.Intervals, 0.99)), ms1(maxDuration(millis(r.idle.Intervals))))
	fmt.Fprintf(w, "- the longest frames while they changed, and when each ended after the first request: %s; the last write was answered at +%s, "+
		"the last pod shown at +%s.\n", longest(r.burst, r.burstStart, 3), ms(r.burstWrite), ms(r.burstAll))
	fmt.Fprintf(w, "- the page's main thread (Performance.getMetrics): idle, busy %s of %s; while they changed, busy %s of %s.\n",
		r.idleMain.String(), ms(r.idleWall), r.burstMain.String(), ms(r.burstWall))
	fmt.Fprintf(w, "- CPU time used while they changed (%s, %d CPUs: %s of CPU time): Chromium's processes %s, the isle server %s, isle map %s.\n",
		ms(r.burstWall), env.CPUs, ms(r.burstWall*time.Duration(env.CPUs)), ms(r.burstChromiumCPU), ms(r.burstServerCPU), ms(r.burstMapCPU))
	fmt.Fprintf(w, "- page memory: Runtime.getHeapUsage after HeapProfiler.collectGarbage (performance.memory.usedJSHeapSize: %s once loaded); "+
		"%s JavaScript event listeners.\n", mib(r.memLoad.PerfUsed), benchkit.Group(float64(r.memLoad.Listeners)))
	fmt.Fprintf(w, "- per map: (with %d maps − without) / %d, each read after %s idle; memory after a garbage collection of the server "+
		"(pprof's heap with gc=1; the least of five such reads, as the server allocates all the time), "+
		"CPU from process_cpu_seconds_total over the idle time. Each map polls /isle/map/status every 2 s and "+
		"metrics.k8s.io every 5 s and holds a WebSocket watch of each of its 9 kinds, through isle map.\n", r.mapsOpen, r.mapsOpen, o.idle)
	if len(r.errs) > 0 {
		fmt.Fprintf(w, "- the pages' JavaScript errors (%d):\n", len(r.errs))
		for _, e := range r.errs[:min(len(r.errs), 10)] {
			fmt.Fprintf(w, "  - %s\n", e)
		}
	} else {
		fmt.Fprintln(w, "- no JavaScript error in any map's console.")
	}
	if o.cpuProfile != "" {
		fmt.Fprintf(w, "- the page's CPU profile over the burst: %s (open in Chrome DevTools' Performance panel).\n", o.cpuProfile)
	}
	fmt.Fprintln(w, "\nThe machines here are shared and have few CPUs: the browser, isle map and the server share them; compare within one run.")
}

// longest lists the n longest frames of f and when each ended, after
// start (Unix milliseconds).
func longest(f frames, start float64, n int) string {
	idx := make([]int, len(f.Intervals))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(f.Intervals[b], f.Intervals[a]) })
	var parts []string
	for _, i := range idx[:min(n, len(idx))] {
		at := "?"
		if i < len(f.At) {
			at = fmt.Sprintf("+%.0f ms", f.At[i]-start)
		}
		parts = append(parts, fmt.Sprintf("%.0f ms at %s", f.Intervals[i], at))
	}
	if len(parts) == 0 {
		return "(no frames)"
	}
	return strings.Join(parts, ", ")
}

func (m mainThread) String() string {
	return fmt.Sprintf("%.0f ms (script %.0f, style %.0f in %.0f recalculations, layout %.0f in %.0f layouts)",
		m.Task*1000, m.Script*1000, m.Style*1000, m.Styles, m.Layout*1000, m.Layouts)
}

func q(ms []float64, p float64) time.Duration {
	if len(ms) == 0 {
		return 0
	}
	return benchkit.Quantile(millis(ms), p)
}

func orZero(ds []time.Duration) []time.Duration {
	if len(ds) == 0 {
		return []time.Duration{0}
	}
	return ds
}

// share is cpu as a fraction of one core over elapsed.
func share(cpu, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return 0
	}
	return cpu.Seconds() / elapsed.Seconds()
}

func ms(d time.Duration) string  { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }
func ms1(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
func mib(b float64) string       { return trimZero(fmt.Sprintf("%.2f", b/(1<<20))) + " MiB" }
func kib(b float64) string       { return fmt.Sprintf("%.1f KiB", b/(1<<10)) }
func pct(f float64) string       { return trimZero(fmt.Sprintf("%.2f", 100*f)) + "%" }

// trimZero drops the trailing zeros of a decimal: 1.50 → 1.5, 2.00 → 2.
func trimZero(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}
