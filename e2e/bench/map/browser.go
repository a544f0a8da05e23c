package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/heapprofiler"
	"github.com/chromedp/cdproto/memory"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/cdproto/profiler"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
)

// chromium is a headless Chromium; its maps are tabs, each in a window
// of its own (so each is visible and gets animation frames).
type chromium struct {
	ctx     context.Context // its first tab, blank
	cancel  context.CancelFunc
	version string
	pid     int // the browser's process
}

// startChromium starts Chromium with its profile and its temporary files
// (its singleton socket, its shared memory) in dir, which the benchmark
// removes.
func startChromium(ctx context.Context, bin, dir string) (*chromium, error) {
	tmp := filepath.Join(dir, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("start chromium: %w", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.WindowSize(1920, 1080),
		chromedp.UserDataDir(filepath.Join(dir, "profile")), chromedp.Env("TMPDIR="+tmp),
		// performance.memory in bytes, not in coarse buckets.
		chromedp.Flag("enable-precise-memory-info", true))
	actx, acancel := chromedp.NewExecAllocator(context.WithoutCancel(ctx), opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	b := &chromium{ctx: bctx, cancel: func() { bcancel(); acancel() }}
	start, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- chromedp.Do(bctx, chromedp.Navigate("about:blank")) }()
	select {
	case err := <-done:
		if err != nil {
			b.close()
			return nil, fmt.Errorf("start chromium: %w", err)
		}
	case <-start.Done():
		b.close()
		return nil, fmt.Errorf("start chromium: %w", start.Err())
	}
	if v, err := chromedp.CallBrowser(bctx, browser.GetVersion, cdp.Empty{}); err == nil {
		b.version = v.Product
	}
	if c := chromedp.FromContext(bctx); c != nil && c.Browser != nil && c.Browser.Process() != nil {
		b.pid = c.Browser.Process().Pid
	}
	return b, nil
}

// close closes every tab and stops the browser (which removes nothing:
// its profile is in the benchmark's directory).
func (b *chromium) close() { b.cancel() }

// cpuTime is the CPU time Chromium's processes (browser, renderers, GPU,
// utilities) alive now have used so far: the browser and its
// descendants.
func (b *chromium) cpuTime() time.Duration {
	if b.pid == 0 {
		return 0
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	parent, cpu := map[int]int{}, map[int]time.Duration{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// PID (COMM) STATE PPID …; COMM may hold spaces and ")".
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 {
			continue
		}
		if parent[pid], err = strconv.Atoi(f[1]); err != nil {
			continue
		}
		cpu[pid], _ = benchkit.CPUTime(stat)
	}
	var sum time.Duration
	for pid, d := range cpu {
		for p, hops := pid, 0; p > 1 && hops < 64; p, hops = parent[p], hops+1 {
			if p == b.pid {
				sum += d
				break
			}
		}
	}
	return sum
}

// page is one map, open in a tab, with what its console said.
type page struct {
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	errs   []string
}

// open opens url in a new tab, keeping the page's errors.
func (b *chromium) open(ctx context.Context, url string) (*page, error) {
	tctx, cancel := chromedp.NewContext(b.ctx)
	p := &page{ctx: tctx, cancel: cancel}
	msgs := chromedp.Console(tctx)
	nav, ncancel := context.WithTimeout(ctx, 30*time.Second)
	defer ncancel()
	done := make(chan error, 1)
	// The tab's first action runs on its own context: a deadline there
	// would close the tab with it.
	go func() { done <- chromedp.Do(tctx, chromedp.Navigate(url)) }()
	select {
	case err := <-done:
		if err != nil {
			cancel()
			return nil, fmt.Errorf("open %s: %w", url, err)
		}
	case <-nav.Done():
		cancel()
		return nil, fmt.Errorf("open %s: %w", url, nav.Err())
	}
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.IsException() || m.Type == chromedp.ConsoleError {
				p.mu.Lock()
				p.errs = append(p.errs, strings.TrimSpace(fmt.Sprintf("%s %s:%d %s", m.Source, m.URL, m.Line+1, m.Text)))
				p.mu.Unlock()
			}
		}
	}()
	return p, nil
}

func (p *page) close() { p.cancel() }

// errors are the page's uncaught exceptions, console.error calls and the
// browser's log of failed requests.
func (p *page) errors() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.errs...)
}

// evalTimeout bounds one evaluation in the page (a wait in the page has
// its own bound, below it).
const evalTimeout = 30 * time.Second

// eval evaluates a JavaScript expression in the page; a promise is
// awaited.
func eval[T any](ctx context.Context, p *page, expr string) (T, error) {
	tctx, cancel := onTab(ctx, p)
	defer cancel()
	v, err := chromedp.Run(tctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		var zero T
		return zero, fmt.Errorf("evaluate in the page: %w", err)
	}
	return v, nil
}

// onTab is a context of the page's tab that ends after evalTimeout or
// when ctx ends (the tab stays open).
func onTab(ctx context.Context, p *page) (context.Context, context.CancelFunc) {
	tctx, cancel := context.WithTimeout(p.ctx, evalTimeout)
	stop := context.AfterFunc(ctx, cancel)
	return tctx, func() { stop(); cancel() }
}

// call sends a DevTools protocol command to the page's tab.
func call[P, R any](ctx context.Context, p *page, cmd cdp.Command[P, R], params P) (R, error) {
	tctx, cancel := onTab(ctx, p)
	defer cancel()
	return chromedp.Call(tctx, cmd, params)
}

// mapState is what the map holds and shows.
type mapState struct {
	Kinds    int    `json:"kinds"`    // kinds the page follows
	Synced   int    `json:"synced"`   // kinds listed once
	Nodes    int    `json:"nodes"`    // Nodes it holds
	Pods     int    `json:"pods"`     // Pods it holds
	Boards   int    `json:"boards"`   // boards drawn
	PodEls   int    `json:"podEls"`   // pods drawn
	NotReady int    `json:"notReady"` // pods drawn not ready
	Dark     int    `json:"dark"`     // boards drawn dark
	Services int    `json:"services"` // Services drawn
	Visible  string `json:"visible"`  // document.visibilityState
}

const stateJS = `(() => {
  const S = window.isleMap;
  if (!S || !S.objs) return null;
  const n = (sel) => document.querySelectorAll(sel).length;
  return { kinds: Object.keys(S.objs).length, synced: S.synced.size, nodes: S.objs.nodes.size, pods: S.objs.pods.size,
    boards: n(".board"), podEls: n(".pod"), notReady: n(".pod.notready"), dark: n(".board.dark"),
    services: n('.item[data-kind="services"]'), visible: document.visibilityState };
})()`

func (p *page) state(ctx context.Context) (mapState, error) {
	raw, err := eval[json.RawMessage](ctx, p, stateJS)
	if err != nil {
		return mapState{}, err
	}
	var s mapState
	if string(raw) == "null" {
		return s, nil
	}
	return s, json.Unmarshal(raw, &s)
}

// waitLoaded waits until the page has listed every kind and draws want's
// boards, pods (none not ready) and Services.
func (p *page) waitLoaded(ctx context.Context, want mapState, d time.Duration) (mapState, error) {
	deadline := time.Now().Add(d)
	for {
		s, err := p.state(ctx)
		if err == nil && s.Kinds > 0 && s.Synced == s.Kinds && s.Boards == want.Boards && s.PodEls == want.PodEls &&
			s.NotReady == 0 && s.Services == want.Services {
			return s, nil
		}
		if ctx.Err() != nil {
			return s, ctx.Err()
		}
		if time.Now().After(deadline) {
			return s, fmt.Errorf("the map did not show everything within %v: it shows %+v, want %d boards, %d pods (all ready), %d Services (err %v)",
				d, s, want.Boards, want.PodEls, want.Services, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// watchJS installs, once, a MutationObserver on the boards that notes
// when each expected pod's bubble first shows the expected readiness
// (Date.now(), the wall clock the benchmark's own clock reads too).
const watchJS = `(() => {
  if (window.__bench) return true;
  const B = window.__bench = { want: new Map(), seen: new Map(), waiters: [] };
  const check = (e, now) => {
    const key = e.dataset && e.dataset.key;
    if (!key || !B.want.has(key) || B.seen.has(key) || !e.classList.contains("pod")) return;
    if (e.classList.contains("notready") === B.want.get(key)) B.seen.set(key, now);
  };
  new MutationObserver((recs) => {
    const now = Date.now();
    for (const r of recs) {
      if (r.type === "attributes") check(r.target, now);
      else for (const n of r.addedNodes) if (n.nodeType === 1) { check(n, now); n.querySelectorAll?.(".pod").forEach((e) => check(e, now)); }
    }
    B.waiters = B.waiters.filter((w) => !w());
  }).observe(document.getElementById("boards"), { subtree: true, childList: true, attributes: true, attributeFilter: ["class"] });
  // expect: the pods of keys are to turn notReady (or ready).
  B.expect = (keys, notReady) => { for (const k of keys) { B.want.set(k, notReady); B.seen.delete(k); } };
  // wait resolves with the times the pods of keys were seen as expected
  // (-1 for those not seen within ms).
  B.wait = (keys, ms) => new Promise((resolve) => {
    const done = () => keys.every((k) => B.seen.has(k));
    const answer = () => resolve(keys.map((k) => B.seen.has(k) ? B.seen.get(k) : -1));
    if (done()) return answer();
    const t = setTimeout(() => { B.waiters = B.waiters.filter((w) => w !== w1); answer(); }, ms);
    const w1 = () => { if (!done()) return false; clearTimeout(t); answer(); return true; };
    B.waiters.push(w1);
  });
  return true;
})()`

func (p *page) installWatch(ctx context.Context) error {
	_, err := eval[bool](ctx, p, watchJS)
	return err
}

func (p *page) expect(ctx context.Context, keys []string, notReady bool) error {
	b, _ := json.Marshal(keys)
	_, err := eval[chromedp.Void](ctx, p, fmt.Sprintf("window.__bench.expect(%s, %t)", b, notReady))
	return err
}

// waitSeen returns when each pod of keys was seen as expected, in Unix
// milliseconds, or -1 for those not seen within d.
func (p *page) waitSeen(ctx context.Context, keys []string, d time.Duration) ([]float64, error) {
	b, _ := json.Marshal(keys)
	return eval[[]float64](ctx, p, fmt.Sprintf("window.__bench.wait(%s, %d)", b, d.Milliseconds()))
}

// frames are the intervals between animation frames and the long tasks
// seen while they were recorded, in milliseconds.
type frames struct {
	Intervals []float64 `json:"iv"`
	At        []float64 `json:"at"` // when each interval ended: Date.now()
	Long      []float64 `json:"long"`
}

const framesStartJS = `(() => {
  const F = window.__frames = { iv: [], at: [], long: [], on: true, last: 0 };
  const tick = (ts) => {
    if (!F.on) return;
    if (F.last) { F.iv.push(ts - F.last); F.at.push(Date.now()); }
    F.last = ts;
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
  try {
    F.po = new PerformanceObserver((l) => { for (const e of l.getEntries()) F.long.push(e.duration); });
    F.po.observe({ type: "longtask" });
  } catch (e) { F.long = null; }
  return true;
})()`

const framesStopJS = `(() => {
  const F = window.__frames;
  F.on = false;
  if (F.po) { for (const e of F.po.takeRecords()) F.long.push(e.duration); F.po.disconnect(); }
  return { iv: F.iv, at: F.at, long: F.long || [] };
})()`

func (p *page) startFrames(ctx context.Context) error {
	_, err := eval[bool](ctx, p, framesStartJS)
	return err
}

func (p *page) stopFrames(ctx context.Context) (frames, error) {
	return eval[frames](ctx, p, framesStopJS)
}

// pageMemory is the page's memory.
type pageMemory struct {
	HeapUsed, HeapTotal float64 // the isolate's JavaScript heap after a collection (Runtime.getHeapUsage)
	PerfUsed            float64 // performance.memory.usedJSHeapSize after it
	DOMNodes            int64   // Memory.getDOMCounters: nodes alive, in the document or not
	Elements            int     // elements in the document
	Listeners           int64   // JavaScript event listeners
}

func (p *page) memory(ctx context.Context) (pageMemory, error) {
	var m pageMemory
	if _, err := call(ctx, p, heapprofiler.CollectGarbage, cdp.Empty{}); err != nil {
		return m, fmt.Errorf("collect the page's garbage: %w", err)
	}
	hu, err := call(ctx, p, runtime.GetHeapUsage, cdp.Empty{})
	if err != nil {
		return m, fmt.Errorf("the page's heap: %w", err)
	}
	m.HeapUsed, m.HeapTotal = hu.UsedSize, hu.TotalSize
	dc, err := call(ctx, p, memory.GetDOMCounters, cdp.Empty{})
	if err != nil {
		return m, fmt.Errorf("the page's DOM counters: %w", err)
	}
	m.DOMNodes, m.Listeners = dc.Nodes, dc.JsEventListeners
	if m.Elements, err = eval[int](ctx, p, `document.getElementsByTagName("*").length`); err != nil {
		return m, err
	}
	m.PerfUsed, err = eval[float64](ctx, p, `performance.memory ? performance.memory.usedJSHeapSize : 0`)
	return m, err
}

// mainThread is the page's main-thread time so far, in seconds, by what
// it did (Performance.getMetrics).
type mainThread struct {
	Task, Script, Style, Layout float64
	Layouts, Styles             float64 // how many
}

func (p *page) enableMetrics(ctx context.Context) error {
	_, err := call(ctx, p, performance.Enable, performance.EnableParams{})
	return err
}

func (p *page) mainThread(ctx context.Context) (mainThread, error) {
	var m mainThread
	res, err := call(ctx, p, performance.GetMetrics, cdp.Empty{})
	if err != nil {
		return m, fmt.Errorf("the page's metrics: %w", err)
	}
	for _, x := range res.Metrics {
		switch x.Name {
		case "TaskDuration":
			m.Task = x.Value
		case "ScriptDuration":
			m.Script = x.Value
		case "RecalcStyleDuration":
			m.Style = x.Value
		case "LayoutDuration":
			m.Layout = x.Value
		case "LayoutCount":
			m.Layouts = x.Value
		case "RecalcStyleCount":
			m.Styles = x.Value
		}
	}
	return m, nil
}

func (a mainThread) sub(b mainThread) mainThread {
	return mainThread{Task: a.Task - b.Task, Script: a.Script - b.Script, Style: a.Style - b.Style, Layout: a.Layout - b.Layout,
		Layouts: a.Layouts - b.Layouts, Styles: a.Styles - b.Styles}
}

// startProfile starts the page's CPU profiler, sampling every 200 µs.
func (p *page) startProfile(ctx context.Context) error {
	if _, err := call(ctx, p, profiler.Enable, cdp.Empty{}); err != nil {
		return err
	}
	if _, err := call(ctx, p, profiler.SetSamplingInterval, profiler.SetSamplingIntervalParams{Interval: 200}); err != nil {
		return err
	}
	_, err := call(ctx, p, profiler.Start, cdp.Empty{})
	return err
}

// stopProfile stops the profiler and writes the profile to path, which
// Chrome DevTools' Performance panel opens.
func (p *page) stopProfile(ctx context.Context, path string) error {
	res, err := call(ctx, p, profiler.Stop, cdp.Empty{})
	if err != nil {
		return err
	}
	b, err := json.Marshal(res.Profile)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return err
	}
	slog.Info("wrote the page's CPU profile", "path", path)
	return nil
}
