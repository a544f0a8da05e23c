package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
	"github.com/isle-cluster/isle/e2e/bench/benchkit/isleserver"
)

// results is everything measured.
type results struct {
	nodes     batch // Node creates
	pods      batch // pending Pod creates
	placement placement
	deploy    deployment
	antiPods  batch     // anti-affinity Pod creates
	anti      placement // the anti-affinity pods, placed once the label comes
	// attempts are the scheduler's attempts by result, over the whole run.
	attempts      map[string]float64
	eventsDropped float64
	// notReady counts the nodes that were no longer Ready, or tainted so,
	// at the end; nodesAge is how long the nodes had existed then.
	notReady int
	nodesAge time.Duration
}

// batch is a set of creates from concurrent writers.
type batch struct {
	count, failed int
	firstErr      error
	elapsed       time.Duration
}

func (b batch) perSec() float64 { return float64(b.count) / b.elapsed.Seconds() }

// placement: pending pods, placed once the nodes come.
type placement struct {
	pods    int
	elapsed time.Duration // from the first Node create to the last pod bound
	writes  float64       // raft entries applied meanwhile, the Nodes' excluded
	// minPerNode and maxPerNode count the pods of the busiest and idlest
	// nodes; wrongArch the pods selecting arm64 bound elsewhere;
	// groupClash the anti-affinity pods beside another of their group.
	minPerNode, maxPerNode, wrongArch, groupClash int
}

// deployment: a Deployment created, its pods bound.
type deployment struct {
	replicas int
	elapsed  time.Duration // from the create request to the last pod bound
	writes   float64       // raft entries applied from the create until quiet
}

// measure runs both experiments.
func measure(ctx context.Context, srv *isleserver.Server, c *kubernetes.Clientset, o options) (results, error) {
	var res results

	// Pending pods first: with no node they wait, each once tried.
	place, err := startTracker(ctx, c, placeLabel)
	if err != nil {
		return res, err
	}
	slog.Info("creating pending pods", "pods", o.pods, "writers", o.writers)
	res.pods = createAll(ctx, o.pods, o.writers, func(ctx context.Context, i int) error {
		_, err := c.CoreV1().Pods(namespace).Create(ctx, pendingPod(i), metav1.CreateOptions{})
		return err
	})
	if res.pods.count == 0 {
		return res, fmt.Errorf("create pods: none was created: %w", res.pods.firstErr)
	}
	if err := place.waitFor(ctx, "every pending pod tried once", func(t *tracker) bool { return len(t.unschedulable) >= res.pods.count }); err != nil {
		return res, err
	}
	before, err := quiet(ctx, srv, 500*time.Millisecond)
	if err != nil {
		return res, err
	}

	// Then the nodes: the pods are placed as they come.
	slog.Info("creating nodes", "nodes", o.nodes)
	nodesCreated := time.Now()
	res.nodes = createAll(ctx, o.nodes, o.writers, func(ctx context.Context, i int) error {
		_, err := c.CoreV1().Nodes().Create(ctx, benchNode(i), metav1.CreateOptions{})
		return err
	})
	if res.nodes.count < 2 {
		return res, fmt.Errorf("create nodes: %d created: %w", res.nodes.count, res.nodes.firstErr)
	}
	if err := place.waitFor(ctx, "every pending pod bound", func(t *tracker) bool { return len(t.bound) >= res.pods.count }); err != nil {
		return res, err
	}
	res.placement = place.placement(nodesCreated)
	after, err := quiet(ctx, srv, 500*time.Millisecond)
	if err != nil {
		return res, err
	}
	res.placement.writes = after - before - float64(res.nodes.count)

	// A Deployment on the loaded cluster.
	deployed, err := startTracker(ctx, c, deployLabel)
	if err != nil {
		return res, err
	}
	slog.Info("creating a Deployment", "replicas", o.replicas)
	created := time.Now()
	if _, err := c.AppsV1().Deployments(namespace).Create(ctx, benchDeployment(int32(o.replicas)), metav1.CreateOptions{}); err != nil {
		return res, fmt.Errorf("create deployment: %w", err)
	}
	if err := deployed.waitFor(ctx, "the Deployment's pods bound", func(t *tracker) bool { return len(t.bound) >= o.replicas }); err != nil {
		return res, err
	}
	res.deploy = deployment{replicas: o.replicas, elapsed: deployed.lastBind().Sub(created)}
	// Its trailing writes (Events, ReplicaSet and Deployment status) count.
	settled, err := quiet(ctx, srv, time.Second)
	if err != nil {
		return res, err
	}
	res.deploy.writes = settled - after
	place.stop()
	deployed.stop()

	// Anti-affinity on every pod, on the loaded cluster.
	if err := measureAnti(ctx, c, o, &res); err != nil {
		return res, err
	}

	if res.attempts, err = attempts(ctx, srv); err != nil {
		return res, err
	}
	vals, err := srv.Scrape(ctx)
	if err != nil {
		return res, err
	}
	res.eventsDropped = vals["isle_events_dropped_total"]
	res.notReady, err = notReadyNodes(ctx, c)
	res.nodesAge = time.Since(nodesCreated)
	return res, err
}

// measureAnti creates the anti-affinity pods, which wait for nodes of
// their own, then as many nodes again as the first ones, and times their
// placement. (The first nodes, without boards, are marked unreachable by
// now.) Every decision still weighs every pod placed so far.
func measureAnti(ctx context.Context, c *kubernetes.Clientset, o options, res *results) error {
	anti, err := startTracker(ctx, c, antiLabel)
	if err != nil {
		return err
	}
	defer anti.stop()
	slog.Info("creating pending pods with anti-affinity", "pods", o.antiPods, "group", o.antiGroup)
	res.antiPods = createAll(ctx, o.antiPods, o.writers, func(ctx context.Context, i int) error {
		_, err := c.CoreV1().Pods(namespace).Create(ctx, antiPod(i, o.antiGroup), metav1.CreateOptions{})
		return err
	})
	if res.antiPods.count == 0 {
		return fmt.Errorf("create anti-affinity pods: none was created: %w", res.antiPods.firstErr)
	}
	if err := anti.waitFor(ctx, "every anti-affinity pod tried once", func(t *tracker) bool { return len(t.unschedulable) >= res.antiPods.count }); err != nil {
		return err
	}
	slog.Info("creating nodes for them", "nodes", o.nodes)
	labelled := time.Now()
	b := createAll(ctx, o.nodes, o.writers, func(ctx context.Context, i int) error {
		node := benchNode(o.nodes + i)
		node.Labels[antiNodeLabel] = "true"
		_, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		return err
	})
	if b.failed > 0 {
		return fmt.Errorf("create nodes: %d failed: %w", b.failed, b.firstErr)
	}
	if err := anti.waitFor(ctx, "every anti-affinity pod bound", func(t *tracker) bool { return len(t.bound) >= res.antiPods.count }); err != nil {
		return err
	}
	res.anti = anti.placement(labelled)
	res.anti.groupClash = anti.groupClashes()
	return nil
}

// createAll calls create(i) for i in [0, n) from writers goroutines.
func createAll(ctx context.Context, n, writers int, create func(ctx context.Context, i int) error) batch {
	var mu sync.Mutex
	var b batch
	start := time.Now()
	benchkit.Parallel(ctx, n, writers, func(ctx context.Context, i int) {
		err := create(ctx, i)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			b.failed++
			if b.firstErr == nil {
				b.firstErr = err
			}
			return
		}
		b.count++
	})
	b.elapsed = time.Since(start)
	return b
}

// tracker follows the pods of one app label through a watch: which are
// bound where, which were found unschedulable, and when the last was
// bound.
type tracker struct {
	mu            sync.Mutex
	changed       chan struct{} // closed and replaced on every change
	bound         map[string]string
	groups        map[string]string // anti-affinity group of each pod
	arm64Only     map[string]bool
	unschedulable map[string]bool
	// why is the latest PodScheduled message of a pod not bound.
	why    map[string]string
	last   time.Time
	cancel context.CancelFunc
	c      *kubernetes.Clientset
}

// startTracker lists the app's pods (none yet) and watches them from there.
func startTracker(ctx context.Context, c *kubernetes.Clientset, app string) (*tracker, error) {
	sel := metav1.ListOptions{LabelSelector: "app=" + app}
	list, err := c.CoreV1().Pods(namespace).List(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	t := &tracker{changed: make(chan struct{}), bound: map[string]string{}, groups: map[string]string{}, arm64Only: map[string]bool{},
		unschedulable: map[string]bool{}, why: map[string]string{}, cancel: cancel, c: c}
	go t.watch(ctx, sel, list.ResourceVersion)
	return t, nil
}

func (t *tracker) stop() { t.cancel() }

// watch follows the pods from resourceVersion rv, watching again whenever
// a watch ends.
func (t *tracker) watch(ctx context.Context, sel metav1.ListOptions, rv string) {
	for ctx.Err() == nil {
		opts := sel
		opts.ResourceVersion, opts.AllowWatchBookmarks = rv, true
		w, err := t.c.CoreV1().Pods(namespace).Watch(ctx, opts)
		if err != nil {
			slog.Warn("watch pods; retrying", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			rv = pod.ResourceVersion
			if ev.Type != watch.Bookmark {
				t.observe(pod)
			}
		}
		w.Stop()
	}
}

func (t *tracker) observe(pod *corev1.Pod) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if pod.Spec.NodeSelector[corev1.LabelArchStable] == "arm64" {
		t.arm64Only[pod.Name] = true
	}
	if g, ok := pod.Labels[antiGroup]; ok {
		t.groups[pod.Name] = g
	}
	if pod.Spec.NodeName != "" {
		if _, seen := t.bound[pod.Name]; !seen {
			t.bound[pod.Name] = pod.Spec.NodeName
			t.last = now
		}
	} else {
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
				t.unschedulable[pod.Name] = true
				t.why[pod.Name] = c.Message
			}
		}
	}
	close(t.changed)
	t.changed = make(chan struct{})
}

// waitFor waits, at most two minutes, until cond holds.
func (t *tracker) waitFor(ctx context.Context, what string, cond func(*tracker) bool) error {
	deadline := time.After(2 * time.Minute)
	for {
		t.mu.Lock()
		ok, changed := cond(t), t.changed
		bound, unschedulable := len(t.bound), len(t.unschedulable)
		var example string
		for pod, why := range t.why {
			if _, ok := t.bound[pod]; !ok {
				example = fmt.Sprintf("; %s: %s", pod, why)
				break
			}
		}
		t.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w", what, ctx.Err())
		case <-deadline:
			return fmt.Errorf("wait for %s: not within two minutes (%d bound, %d found unschedulable%s)", what, bound, unschedulable, example)
		case <-changed:
		}
	}
}

func (t *tracker) lastBind() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

// placement sums up where the pods went.
func (t *tracker) placement(start time.Time) placement {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := placement{pods: len(t.bound), elapsed: t.last.Sub(start)}
	perNode := map[string]int{}
	for pod, node := range t.bound {
		perNode[node]++
		if t.arm64Only[pod] && benchNodeArch(node) != "arm64" {
			p.wrongArch++
		}
	}
	p.minPerNode = -1
	for _, n := range perNode {
		p.maxPerNode = max(p.maxPerNode, n)
		if p.minPerNode < 0 || n < p.minPerNode {
			p.minPerNode = n
		}
	}
	return p
}

// groupClashes counts the pods bound beside another of their
// anti-affinity group.
func (t *tracker) groupClashes() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	type place struct{ group, node string }
	seen := map[place]int{}
	for pod, node := range t.bound {
		if g, ok := t.groups[pod]; ok {
			seen[place{g, node}]++
		}
	}
	clashes := 0
	for _, n := range seen {
		clashes += n - 1
	}
	return clashes
}

// benchNodeArch is the architecture benchNode gave the node of that name.
func benchNodeArch(name string) string {
	var i int
	if _, err := fmt.Sscanf(name, "pi-%d", &i); err == nil && i%2 == 1 {
		return "arm"
	}
	return "arm64"
}

// notReadyNodes counts the nodes that are not Ready, or carry the taints
// of a node that is not, such as the node lifecycle controller sets on
// Nodes no board answers for.
func notReadyNodes(ctx context.Context, c *kubernetes.Clientset) (int, error) {
	list, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list nodes: %w", err)
	}
	n := 0
	for _, node := range list.Items {
		ready := false
		for _, cond := range node.Status.Conditions {
			ready = ready || cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue
		}
		for _, taint := range node.Spec.Taints {
			ready = ready && taint.Key != corev1.TaintNodeNotReady && taint.Key != corev1.TaintNodeUnreachable
		}
		if !ready {
			n++
		}
	}
	return n, nil
}
