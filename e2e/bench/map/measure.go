package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
	"github.com/isle-cluster/isle/e2e/bench/benchkit/isleserver"
)

// results is everything measured.
type results struct {
	chromium string
	// boardsTotal, podsTotal and servicesTotal are what the map is to
	// show: the benchmark's and the server's own.
	boardsTotal, podsTotal, servicesTotal int
	// marked: the node lifecycle controller marked the boards NotReady
	// (Unknown) before the pods were made Ready, after markWait.
	marked   bool
	markWait time.Duration
	setup    time.Duration // objects created and Ready

	web webBytes

	load     time.Duration // the first map opened → every board and pod drawn
	loaded   mapState
	memLoad  pageMemory // the first map's memory once loaded
	memAfter pageMemory // and after the trials and the burst

	latencies []time.Duration // API request → the pod's bubble changed, one per trial
	missed    int             // trials whose change never showed
	writes    []time.Duration // the trials' status writes (request → answer)

	idle       frames        // 2 s idle before the burst
	burst      frames        // 3 s from the burst
	burstStart float64       // Date.now() of its first request
	idleMain   mainThread    // the page's main thread over the idle frames
	burstMain  mainThread    // and over the burst's
	idleWall   time.Duration // the wall time of idleMain
	burstWall  time.Duration // and of burstMain
	// The CPU time each process used over burstWall.
	burstServerCPU, burstMapCPU, burstChromiumCPU time.Duration
	burstAll                                      time.Duration // the burst's first request → the last of its pods changed on the map
	burstMiss                                     int           // its pods never seen changed
	burstWrite                                    time.Duration // the burst's first request → its last answer

	without, with window // the server idle without a map and with o.maps
	mapsOpen      int
	errs          []string // the pages' JavaScript errors
}

// window is the server (and isle map) over an idle time.
type window struct {
	elapsed   time.Duration
	cpu       time.Duration // the server's CPU time over it
	mem       isleserver.Memory
	proxyCPU  time.Duration // isle map's
	proxyRSS  uint64
	requested float64 // the server's API requests over it (apiserver_request_total)
}

// measure sets the island up and takes every measure.
func measure(ctx context.Context, srv *isleserver.Server, env benchkit.Env, o options) (results, error) {
	var res results
	cfg, c, err := connect(ctx, srv)
	if err != nil {
		return res, err
	}
	start := time.Now()
	if err := setup(ctx, c, o, &res); err != nil {
		return res, err
	}
	res.setup = time.Since(start)
	if err := totals(ctx, c, &res); err != nil {
		return res, err
	}

	kc := filepath.Join(env.Dir, "admin.kubeconfig")
	if err := writeKubeconfig(cfg, kc); err != nil {
		return res, err
	}
	proxy, url, err := startMap(ctx, o.Isle, kc, env.Dir)
	if err != nil {
		return res, err
	}
	defer proxy.stop()
	slog.Info("isle map serves the map", "url", url)
	if res.web, err = readWeb(ctx, o.web, url); err != nil {
		return res, err
	}

	b, err := startChromium(ctx, o.chromium, filepath.Join(env.Dir, "chromium"))
	if err != nil {
		return res, err
	}
	defer b.close()
	res.chromium = b.version

	// The server without a map.
	if err := quiet(ctx, srv, time.Second); err != nil {
		return res, err
	}
	slog.Info("idle without a map", "for", o.idle)
	if res.without, err = idle(ctx, srv, proxy, o.idle); err != nil {
		return res, err
	}

	// The maps: the first one's load and memory, then the server with
	// all of them open.
	want := mapState{Boards: res.boardsTotal, PodEls: res.podsTotal, Services: res.servicesTotal}
	var pages []*page
	defer func() {
		for _, p := range pages {
			p.close()
		}
	}()
	for i := range o.maps {
		opened := time.Now()
		p, err := b.open(ctx, url)
		if err != nil {
			if dead := proxy.Dead(); dead != nil {
				return res, fmt.Errorf("%w (%w)", err, dead)
			}
			return res, err
		}
		pages = append(pages, p)
		st, err := p.waitLoaded(ctx, want, 2*time.Minute)
		if err != nil {
			return res, fmt.Errorf("map %d: %w", i+1, err)
		}
		slog.Info("map loaded", "map", i+1, "in", time.Since(opened).Round(time.Millisecond), "visibility", st.Visible)
		if i == 0 {
			res.load, res.loaded = time.Since(opened), st
			if res.memLoad, err = p.memory(ctx); err != nil {
				return res, err
			}
		}
	}
	res.mapsOpen = len(pages)
	sleep(ctx, 2*time.Second) // the last lists' garbage and replies settle
	slog.Info("idle with the maps open", "maps", len(pages), "for", o.idle)
	if res.with, err = idle(ctx, srv, proxy, o.idle); err != nil {
		return res, err
	}
	for _, p := range pages[1:] {
		if st, err := p.state(ctx); err != nil || st.Synced != st.Kinds || st.PodEls != want.PodEls {
			slog.Warn("a map no longer shows everything after the idle time", "state", st, "err", err)
		}
		res.errs = append(res.errs, p.errors()...)
		p.close()
	}
	pages = pages[:1]
	p := pages[0]

	// Update latency, then frames while many pods change at once.
	if err := p.installWatch(ctx); err != nil {
		return res, err
	}
	order := rand.New(rand.NewPCG(1, 2)).Perm(o.pods)
	ready := make([]bool, o.pods)
	for i := range ready {
		ready[i] = true
	}
	started := time.Now().Add(-time.Hour)
	if err := trials(ctx, c, p, o, order[:o.trials], ready, started, &res); err != nil {
		return res, err
	}
	if err := burst(ctx, c, b, srv, proxy, p, o, order[o.trials:o.trials+o.burst], ready, started, &res); err != nil {
		return res, err
	}
	if res.memAfter, err = p.memory(ctx); err != nil {
		return res, err
	}
	res.errs = append(res.errs, p.errors()...)
	return res, nil
}

// connect builds a client-go clientset for the server with the
// administrator's configuration, unthrottled, and waits until the server
// is ready.
func connect(ctx context.Context, srv *isleserver.Server) (*rest.Config, *kubernetes.Clientset, error) {
	cfg, err := srv.RESTConfig(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("client: %w", err)
	}
	cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit
	cfg.Proxy = nil            // all traffic stays on 127.0.0.1
	cfg.Timeout = time.Minute
	cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("client: %w", err)
	}
	if err := srv.WaitReady(ctx, hc); err != nil {
		return nil, nil, err
	}
	c, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, nil, fmt.Errorf("client: %w", err)
	}
	return cfg, c, nil
}

// setup creates the boards, Services, Ingress and pods, waits for the node
// lifecycle controller to mark the boards (no agent answers for them),
// and then makes every pod Running and Ready.
func setup(ctx context.Context, c *kubernetes.Clientset, o options, res *results) error {
	slog.Info("creating boards (Nodes)", "boards", o.boards)
	created := time.Now()
	if err := createAll(ctx, "Nodes", o.boards, o.writers, func(ctx context.Context, i int) error {
		_, err := c.CoreV1().Nodes().Create(ctx, benchNode(i), metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	for i := range services {
		if _, err := c.CoreV1().Services(namespace).Create(ctx, benchService(i), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create Service: %w", err)
		}
	}
	if _, err := c.NetworkingV1().Ingresses(namespace).Create(ctx, benchIngress(), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create Ingress: %w", err)
	}
	slog.Info("creating pods, bound", "pods", o.pods)
	if err := createAll(ctx, "Pods", o.pods, o.writers, func(ctx context.Context, i int) error {
		_, err := c.CoreV1().Pods(namespace).Create(ctx, benchPod(i, o.boards), metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	// The node lifecycle controller marks Nodes that no board answers for
	// in gossip, and their Ready pods, once its grace (40 s from the
	// server's start) has passed; the pods are made Ready after that.
	slog.Info("waiting for the node lifecycle controller to mark the boards (no agents)")
	deadline := created.Add(90 * time.Second)
	for {
		n, err := markedNodes(ctx, c)
		if err != nil {
			return err
		}
		if n >= o.boards {
			res.marked = true
			break
		}
		if time.Now().After(deadline) {
			slog.Warn("the boards were not marked NotReady within 90 s; going on", "marked", n)
			break
		}
		sleep(ctx, 500*time.Millisecond)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	res.markWait = time.Since(created)
	slog.Info("making the pods Running and Ready", "pods", o.pods)
	started := time.Now().Add(-time.Hour)
	return createAll(ctx, "pod statuses", o.pods, o.writers, func(ctx context.Context, i int) error {
		return setReady(ctx, c, i, o.boards, true, started)
	})
}

// setReady writes pod i's status, Running and Ready or not.
func setReady(ctx context.Context, c *kubernetes.Clientset, i, boards int, ready bool, started time.Time) error {
	_, err := c.CoreV1().Pods(namespace).Patch(ctx, podName(i), types.MergePatchType,
		statusPatch(podStatus(i, boards, ready, started)), metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("pod %s status: %w", podName(i), err)
	}
	return nil
}

// markedNodes counts the benchmark's Nodes whose Ready condition is not
// True.
func markedNodes(ctx context.Context, c *kubernetes.Clientset) (int, error) {
	list, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: benchNodeLabel + "=true"})
	if err != nil {
		return 0, fmt.Errorf("list nodes: %w", err)
	}
	n := 0
	for _, node := range list.Items {
		for _, cd := range node.Status.Conditions {
			if cd.Type == corev1.NodeReady && cd.Status != corev1.ConditionTrue {
				n++
			}
		}
	}
	return n, nil
}

// totals counts what the map is to show: every Node, Pod and Service.
func totals(ctx context.Context, c *kubernetes.Clientset, res *results) error {
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	pods, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	svcs, err := c.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list services: %w", err)
	}
	bound := 0
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			bound++
		}
	}
	res.boardsTotal, res.podsTotal, res.servicesTotal = len(nodes.Items), bound, len(svcs.Items)
	if bound != len(pods.Items) {
		slog.Warn("pods not bound (the map draws them in the village, not on boards)", "pods", len(pods.Items)-bound)
	}
	return nil
}

// createAll calls op(i) for i in [0, n) from writers goroutines and fails
// if any call failed.
func createAll(ctx context.Context, what string, n, writers int, op func(ctx context.Context, i int) error) error {
	var mu sync.Mutex
	var failed int
	var first error
	benchkit.Parallel(ctx, n, writers, func(ctx context.Context, i int) {
		if err := op(ctx, i); err != nil {
			mu.Lock()
			failed++
			if first == nil {
				first = err
			}
			mu.Unlock()
		}
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if failed > 0 {
		return fmt.Errorf("%s: %d of %d failed: %w", what, failed, n, first)
	}
	return nil
}

// trials flips the Ready condition of each pod of keys in turn and times
// it from the request to the pod's bubble changing on the map.
func trials(ctx context.Context, c *kubernetes.Clientset, p *page, o options, pods []int, ready []bool, started time.Time, res *results) error {
	slog.Info("timing single changes from the API to the map", "trials", len(pods))
	for _, i := range pods {
		key := podKey(i)
		if err := p.expect(ctx, []string{key}, ready[i]); err != nil {
			return err
		}
		t0 := time.Now()
		if err := setReady(ctx, c, i, o.boards, !ready[i], started); err != nil {
			return err
		}
		res.writes = append(res.writes, time.Since(t0))
		ready[i] = !ready[i]
		seen, err := p.waitSeen(ctx, []string{key}, 10*time.Second)
		if err != nil {
			return err
		}
		if seen[0] < 0 {
			res.missed++
		} else {
			res.latencies = append(res.latencies, sinceMillis(t0, seen[0]))
		}
		sleep(ctx, 200*time.Millisecond) // the trial's trailing updates (its EndpointSlice) pass
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// sinceMillis is the time from t0 to the wall-clock time ms (Unix
// milliseconds, as Date.now() gives it).
func sinceMillis(t0 time.Time, ms float64) time.Duration {
	return time.Duration((ms - float64(t0.UnixNano())/1e6) * float64(time.Millisecond))
}

// burst records the page's frames idle, then while the pods of keys all
// flip their Ready condition at once (one request each, all in flight
// together).
func burst(ctx context.Context, c *kubernetes.Clientset, b *chromium, srv *isleserver.Server, proxy *mapProc, p *page, o options, pods []int, ready []bool, started time.Time, res *results) error {
	sleep(ctx, 4*time.Second) // the trials' flows and flashes end
	slog.Info("recording frames idle, then while pods change at once", "pods", len(pods))
	if err := p.enableMetrics(ctx); err != nil {
		return err
	}
	m0, err := p.mainThread(ctx)
	if err != nil {
		return err
	}
	w0 := time.Now()
	if err := p.startFrames(ctx); err != nil {
		return err
	}
	sleep(ctx, 2*time.Second)
	if res.idle, err = p.stopFrames(ctx); err != nil {
		return err
	}
	m1, err := p.mainThread(ctx)
	if err != nil {
		return err
	}
	res.idleMain, res.idleWall = m1.sub(m0), time.Since(w0)
	keys := make([]string, len(pods))
	for n, i := range pods {
		keys[n] = podKey(i)
		if !ready[i] {
			return errors.New("burst: a pod is not ready") // trials and burst take distinct pods
		}
	}
	if err := p.expect(ctx, keys, true); err != nil {
		return err
	}
	if o.cpuProfile != "" {
		if err := p.startProfile(ctx); err != nil {
			return fmt.Errorf("start the page's profiler: %w", err)
		}
	}
	if m0, err = p.mainThread(ctx); err != nil {
		return err
	}
	srv0, _, err := serverCPU(ctx, srv)
	if err != nil {
		return err
	}
	map0, err := proxy.CPUTime()
	if err != nil {
		return err
	}
	chr0 := b.cpuTime()
	w0 = time.Now()
	if err := p.startFrames(ctx); err != nil {
		return err
	}
	sleep(ctx, 250*time.Millisecond)
	t0 := time.Now()
	res.burstStart = float64(t0.UnixNano()) / 1e6
	var wg sync.WaitGroup
	errs := make([]error, len(pods))
	for n, i := range pods {
		wg.Go(func() { errs[n] = setReady(ctx, c, i, o.boards, false, started) })
	}
	wg.Wait()
	res.burstWrite = time.Since(t0)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, i := range pods {
		ready[i] = false
	}
	sleep(ctx, time.Until(t0.Add(3*time.Second)))
	if res.burst, err = p.stopFrames(ctx); err != nil {
		return err
	}
	if m1, err = p.mainThread(ctx); err != nil {
		return err
	}
	res.burstMain, res.burstWall = m1.sub(m0), time.Since(w0)
	srv1, _, err := serverCPU(ctx, srv)
	if err != nil {
		return err
	}
	map1, err := proxy.CPUTime()
	if err != nil {
		return err
	}
	res.burstServerCPU, res.burstMapCPU, res.burstChromiumCPU = srv1-srv0, map1-map0, b.cpuTime()-chr0
	if o.cpuProfile != "" {
		if err := p.stopProfile(ctx, o.cpuProfile); err != nil {
			return fmt.Errorf("the page's profile: %w", err)
		}
	}
	seen, err := p.waitSeen(ctx, keys, 10*time.Second)
	if err != nil {
		return err
	}
	last := 0.0
	for _, s := range seen {
		if s < 0 {
			res.burstMiss++
		}
		last = max(last, s)
	}
	res.burstAll = sinceMillis(t0, last)
	return nil
}

// idle reads the server (and isle map) over d of idleness: CPU time over
// it, memory at its end, after a garbage collection of the server's heap.
func idle(ctx context.Context, srv *isleserver.Server, proxy *mapProc, d time.Duration) (window, error) {
	var w window
	cpu0, req0, err := serverCPU(ctx, srv)
	if err != nil {
		return w, err
	}
	p0, err := proxy.CPUTime()
	if err != nil {
		return w, err
	}
	start := time.Now()
	sleep(ctx, d)
	if ctx.Err() != nil {
		return w, ctx.Err()
	}
	cpu1, req1, err := serverCPU(ctx, srv)
	if err != nil {
		return w, err
	}
	p1, err := proxy.CPUTime()
	if err != nil {
		return w, err
	}
	w.elapsed = time.Since(start)
	w.cpu, w.proxyCPU, w.requested = cpu1-cpu0, p1-p0, req1-req0
	if w.mem, err = heapFloor(ctx, srv); err != nil {
		return w, err
	}
	if w.proxyRSS, _, err = proxy.Memory(); err != nil {
		return w, err
	}
	return w, nil
}

// heapFloor reads the server's memory six times, each read after a
// garbage collection (each read ends with one: pprof's heap with gc=1),
// and keeps the least heap in use and live heap: the server allocates all
// the time (its controllers' periodic lists), and the least is the read
// closest to its collection. RSS is the last read's.
func heapFloor(ctx context.Context, srv *isleserver.Server) (isleserver.Memory, error) {
	m, err := srv.Memory(ctx)
	if err != nil {
		return m, err
	}
	var low isleserver.Memory
	for i := range 5 {
		sleep(ctx, 100*time.Millisecond)
		if m, err = srv.Memory(ctx); err != nil {
			return m, err
		}
		if i == 0 || m.HeapInuse < low.HeapInuse {
			low.HeapInuse = m.HeapInuse
		}
		if i == 0 || m.Live < low.Live {
			low.Live = m.Live
		}
		low.RSS, low.Peak, low.HeapSys = m.RSS, m.Peak, m.HeapSys
	}
	return low, nil
}

// serverCPU reads the server's CPU time (process_cpu_seconds_total) and
// its API requests so far.
func serverCPU(ctx context.Context, srv *isleserver.Server) (time.Duration, float64, error) {
	vals, err := srv.Scrape(ctx)
	if err != nil {
		return 0, 0, err
	}
	s, ok := vals["process_cpu_seconds_total"]
	if !ok {
		return 0, 0, errors.New("scrape: no process_cpu_seconds_total")
	}
	return time.Duration(s * float64(time.Second)), benchkit.Sum(vals, "apiserver_request_total"), nil
}

// quiet waits until the server has applied no write for still.
func quiet(ctx context.Context, srv *isleserver.Server, still time.Duration) error {
	applied := func() (float64, error) {
		vals, err := srv.Scrape(ctx)
		if err != nil {
			return 0, err
		}
		v, ok := vals["isle_raft_applied_index"]
		if !ok {
			return 0, errors.New("scrape: no isle_raft_applied_index")
		}
		return v, nil
	}
	last, err := applied()
	if err != nil {
		return err
	}
	since, deadline := time.Now(), time.Now().Add(time.Minute)
	for time.Since(since) < still {
		if time.Now().After(deadline) {
			return fmt.Errorf("the server did not go quiet within a minute (applied index %v)", last)
		}
		sleep(ctx, 50*time.Millisecond)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		cur, err := applied()
		if err != nil {
			return err
		}
		if cur != last {
			last, since = cur, time.Now()
		}
	}
	return nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// millis are durations in milliseconds, as the page measures them.
func millis(ms []float64) []time.Duration {
	out := make([]time.Duration, len(ms))
	for i, m := range ms {
		out[i] = time.Duration(m * float64(time.Millisecond))
	}
	return out
}

func maxDuration(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return slices.Max(ds)
}
