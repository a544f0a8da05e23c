package nodelifecycle_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/isle-cluster/isle/control/controllers/internal/tabletest"
	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/controllers/nodelifecycle"
	"github.com/isle-cluster/isle/control/registry"
)

// fakeLiveness is the membership as a test sets it.
type fakeLiveness struct {
	mu      sync.Mutex
	members map[string]nodelifecycle.BoardState
	changed chan struct{}
}

func (f *fakeLiveness) set(name string, st nodelifecycle.BoardState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.members[name] = st
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeLiveness) Boards() []nodelifecycle.Board {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []nodelifecycle.Board
	for name, st := range f.members {
		out = append(out, nodelifecycle.Board{Name: name, State: st})
	}
	return out
}

func (f *fakeLiveness) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

// env is a store for the node lifecycle tests.
type env struct{ *tabletest.Env }

// lifecycleEnv runs the node lifecycle controller alone on a store.
// Boards never heard in gossip have their pods' tolerations held for hold.
func lifecycleEnv(t *testing.T, grace, hold time.Duration) (*env, *fakeLiveness) {
	t.Helper()
	e := &env{tabletest.NewStore(t)}
	live := &fakeLiveness{members: map[string]nodelifecycle.BoardState{}, changed: make(chan struct{})}
	ctl := nodelifecycle.New(e.Store, live, nodelifecycle.Config{Grace: grace, Resync: 50 * time.Millisecond, PodGC: 100 * time.Millisecond,
		PodCIDR: netip.MustParsePrefix("10.42.0.0/22"), Hold: hold}, e.Log)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); ctl.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return e, live
}

func (e *env) node(t *testing.T, name string) *corev1.Node {
	t.Helper()
	obj, err := e.Get(e.Ctx, e.Res(t, "", "v1", "nodes"), "", name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*corev1.Node)
}

func condition(n *corev1.Node, typ corev1.NodeConditionType) corev1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return corev1.NodeCondition{}
}

func taintKeys(n *corev1.Node) []string {
	var out []string
	for _, tn := range n.Spec.Taints {
		out = append(out, tn.Key+":"+string(tn.Effect))
	}
	return out
}

func TestNodeLifecycleConditionsAndTaints(t *testing.T) {
	e, live := lifecycleEnv(t, 300*time.Millisecond, time.Hour)
	nodes := e.Res(t, "", "v1", "nodes")
	for _, name := range []string{"alive", "dies", "leaves", "never"} {
		if name != "never" {
			live.set(name, nodelifecycle.BoardAlive)
		}
		e.MustCreate(t, nodes, "", tabletest.ReadyNode(name))
	}
	unreachable := func(name, msg string) func() bool {
		return func() bool {
			n := e.node(t, name)
			c := condition(n, corev1.NodeReady)
			keys := strings.Join(taintKeys(n), ",")
			return c.Status == corev1.ConditionUnknown && c.Reason == "NodeStatusUnknown" && strings.Contains(c.Message, msg) &&
				condition(n, corev1.NodeMemoryPressure).Status == corev1.ConditionUnknown &&
				keys == "node.kubernetes.io/unreachable:NoSchedule,node.kubernetes.io/unreachable:NoExecute"
		}
	}

	// Every node gets its own block of the pod range.
	tabletest.Eventually(t, "pod CIDRs", func() bool {
		seen := map[string]bool{}
		for _, name := range []string{"alive", "dies", "leaves", "never"} {
			cidr := e.node(t, name).Spec.PodCIDR
			if cidr == "" || seen[cidr] || !netip.MustParsePrefix("10.42.0.0/22").Overlaps(netip.MustParsePrefix(cidr)) {
				return false
			}
			seen[cidr] = true
		}
		return true
	})

	live.set("dies", nodelifecycle.BoardDead)
	live.set("leaves", nodelifecycle.BoardLeft)
	tabletest.Eventually(t, "dead node unreachable", unreachable("dies", "stopped answering gossip"))
	tabletest.Eventually(t, "left node unreachable", unreachable("leaves", "left the cluster"))
	tabletest.Eventually(t, "node never in gossip unreachable after the grace", unreachable("never", "No board of this name"))
	if n := e.node(t, "alive"); condition(n, corev1.NodeReady).Status != corev1.ConditionTrue || len(n.Spec.Taints) != 0 {
		t.Fatalf("the alive node was touched: %+v %v", n.Status.Conditions, n.Spec.Taints)
	}

	// Back: gossip says alive, the agent posts Ready again; taints go.
	live.set("dies", nodelifecycle.BoardAlive)
	time.Sleep(200 * time.Millisecond)
	if n := e.node(t, "dies"); condition(n, corev1.NodeReady).Status != corev1.ConditionUnknown {
		t.Fatal("the controller set Ready itself; that is the agent's")
	}
	if _, err := e.Mutate(e.Ctx, nodes, "", "dies", "status", func(obj runtime.Object) error {
		n := obj.(*corev1.Node)
		for i := range n.Status.Conditions {
			n.Status.Conditions[i].Status, n.Status.Conditions[i].Reason = corev1.ConditionTrue, "KubeletReady"
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	tabletest.Eventually(t, "taints removed", func() bool { return len(e.node(t, "dies").Spec.Taints) == 0 })

	// An agent reporting not ready gets the not-ready taints.
	if _, err := e.Mutate(e.Ctx, nodes, "", "alive", "status", func(obj runtime.Object) error {
		n := obj.(*corev1.Node)
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == corev1.NodeReady {
				n.Status.Conditions[i].Status = corev1.ConditionFalse
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	tabletest.Eventually(t, "not-ready taints", func() bool {
		return strings.Join(taintKeys(e.node(t, "alive")), ",") == "node.kubernetes.io/not-ready:NoSchedule,node.kubernetes.io/not-ready:NoExecute"
	})

	// A healthy cluster costs no writes.
	before := e.node(t, "dies").ResourceVersion
	time.Sleep(300 * time.Millisecond)
	if after := e.node(t, "dies").ResourceVersion; after != before {
		t.Fatalf("a settled node was written: %s -> %s", before, after)
	}
}

func TestNodeLifecycleEviction(t *testing.T) {
	e, live := lifecycleEnv(t, time.Hour, time.Hour)
	nodes, pods := e.Res(t, "", "v1", "nodes"), e.Res(t, "", "v1", "pods")
	e.Namespace(t, "default")
	live.set("pi", nodelifecycle.BoardAlive)
	live.set("other", nodelifecycle.BoardAlive)
	e.MustCreate(t, nodes, "", tabletest.ReadyNode("pi"))
	e.MustCreate(t, nodes, "", tabletest.ReadyNode("other"))
	secs := func(s int64) *int64 { return &s }
	cases := []struct {
		name        string
		tolerations []corev1.Toleration
		evicted     bool
	}{
		// Admission gives pods 30 s; these replace it.
		{"zero seconds", []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: secs(0)}}, true},
		{"an hour", []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: secs(3600)}}, false},
		{"forever", []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, false},
	}
	for _, tc := range cases {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: strings.ReplaceAll(tc.name, " ", "-"), Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: "pi", Tolerations: tc.tolerations, Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
		e.MustCreate(t, pods, "default", p)
	}
	// The pods of a lost board stop being Ready.
	if _, err := e.Mutate(e.Ctx, pods, "default", "an-hour", "status", func(obj runtime.Object) error {
		p := obj.(*corev1.Pod)
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: "other", Tolerations: cases[0].tolerations, Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
	e.MustCreate(t, pods, "default", other)

	// Eviction is a graceful deletion: the node agent (or, for a board
	// that is gone, the pod garbage collector) finishes it.
	evicted := func(name string) bool {
		obj, there := e.Exists(t, pods, "default", name)
		return !there || obj.GetDeletionTimestamp() != nil
	}
	live.set("pi", nodelifecycle.BoardDead)
	tabletest.Eventually(t, "evictions", func() bool { return evicted("zero-seconds") })
	tabletest.Eventually(t, "the pods of the lost board not Ready", func() bool {
		obj, _ := e.Exists(t, pods, "default", "an-hour")
		c := obj.(*corev1.Pod).Status.Conditions
		return len(c) == 1 && c[0].Status == corev1.ConditionFalse
	})
	time.Sleep(300 * time.Millisecond)
	for _, name := range []string{"an-hour", "forever", "elsewhere"} {
		if evicted(name) {
			t.Errorf("pod %s was evicted", name)
		}
	}
}

// podOn is a pod bound to node that tolerates its loss for no time at all.
func podOn(name, node string) *corev1.Pod {
	zero := int64(0)
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{NodeName: node,
		Tolerations: []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &zero}},
		Containers:  []corev1.Container{{Name: "c", Image: "img"}}}}
}

func (e *env) evicted(t *testing.T, name string) bool {
	t.Helper()
	obj, there := e.Exists(t, e.Res(t, "", "v1", "pods"), "default", name)
	return !there || obj.GetDeletionTimestamp() != nil
}

func (e *env) setReady(t *testing.T, name string) {
	t.Helper()
	if _, err := e.Mutate(e.Ctx, e.Res(t, "", "v1", "nodes"), "", name, "status", func(obj runtime.Object) error {
		n := obj.(*corev1.Node)
		for i := range n.Status.Conditions {
			n.Status.Conditions[i].Status, n.Status.Conditions[i].Reason = corev1.ConditionTrue, "KubeletReady"
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// When every Node is lost at once the controller marks them but evicts
// nothing; when boards come back, the tolerations of the pods on those
// still lost count from a grace after then.
func TestNodeLifecycleFullDisruption(t *testing.T) {
	e, live := lifecycleEnv(t, 500*time.Millisecond, time.Hour)
	e.Namespace(t, "default")
	nodes, pods := e.Res(t, "", "v1", "nodes"), e.Res(t, "", "v1", "pods")
	names := []string{"pi1", "pi2", "pi3"}
	for _, name := range names {
		live.set(name, nodelifecycle.BoardAlive)
		e.MustCreate(t, nodes, "", tabletest.ReadyNode(name))
		e.MustCreate(t, pods, "default", podOn("on-"+name, name))
	}
	for _, name := range names {
		live.set(name, nodelifecycle.BoardDead)
	}
	tabletest.Eventually(t, "every node unreachable", func() bool {
		for _, name := range names {
			if len(e.node(t, name).Spec.Taints) != 2 {
				return false
			}
		}
		return true
	})
	time.Sleep(400 * time.Millisecond)
	for _, name := range names {
		if e.evicted(t, "on-"+name) {
			t.Fatalf("pod on-%s was evicted while every node was lost", name)
		}
	}
	// Two boards are back: the third one's pod goes.
	for _, name := range names[:2] {
		live.set(name, nodelifecycle.BoardAlive)
		e.setReady(t, name)
	}
	tabletest.Eventually(t, "the pod of the board still lost evicted", func() bool { return e.evicted(t, "on-pi3") })
	for _, name := range names[:2] {
		if e.evicted(t, "on-"+name) {
			t.Errorf("pod on-%s of a board that came back was evicted", name)
		}
	}
}

// After the control plane's own outage, the boards it has not heard from
// since it started keep their pods for the hold: they may simply not have
// found the servers yet. A board seen to die is not held.
func TestNodeLifecycleHoldAfterTakeover(t *testing.T) {
	const hold = 3 * time.Second
	start := time.Now()
	e, live := lifecycleEnv(t, 100*time.Millisecond, hold)
	e.Namespace(t, "default")
	nodes, pods := e.Res(t, "", "v1", "nodes"), e.Res(t, "", "v1", "pods")
	for _, name := range []string{"pi1", "pi2", "pi3", "dies", "unheard"} {
		if name != "unheard" {
			live.set(name, nodelifecycle.BoardAlive)
		}
		e.MustCreate(t, nodes, "", tabletest.ReadyNode(name))
	}
	e.MustCreate(t, pods, "default", podOn("on-dies", "dies"))
	e.MustCreate(t, pods, "default", podOn("on-unheard", "unheard"))
	live.set("dies", nodelifecycle.BoardDead)
	tabletest.Eventually(t, "the dead board's pod evicted", func() bool { return e.evicted(t, "on-dies") })
	tabletest.Eventually(t, "the unheard board tainted", func() bool { return len(e.node(t, "unheard").Spec.Taints) == 2 })
	// Under emulation the writes above may take longer than the hold:
	// an eviction then is due.
	if e.evicted(t, "on-unheard") && time.Since(start) < hold {
		t.Fatal("the pod of a board not heard since the start was evicted before the hold ended")
	}
	tabletest.Eventually(t, "the unheard board's pod evicted after the hold", func() bool { return e.evicted(t, "on-unheard") })
	if took := time.Since(start); took < hold {
		t.Fatalf("evicted %v after the start, before the %v hold", took, hold)
	}
}

// A pod bound to a Node that is gone is deleted at once: no agent is left
// to finish a graceful deletion.
func TestNodeLifecyclePodGC(t *testing.T) {
	e, live := lifecycleEnv(t, time.Hour, time.Hour)
	e.Namespace(t, "default")
	nodes, pods := e.Res(t, "", "v1", "nodes"), e.Res(t, "", "v1", "pods")
	live.set("pi", nodelifecycle.BoardAlive)
	e.MustCreate(t, nodes, "", tabletest.ReadyNode("pi"))
	for _, tc := range []struct{ name, node string }{{"kept", "pi"}, {"orphan", "removed-board"}, {"pending", ""}} {
		e.MustCreate(t, pods, "default", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tc.name, Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: tc.node, Containers: []corev1.Container{{Name: "c", Image: "img"}}}})
	}
	tabletest.Eventually(t, "the orphan deleted", func() bool { _, there := e.Exists(t, pods, "default", "orphan"); return !there })
	for _, name := range []string{"kept", "pending"} {
		if obj, ok := e.Exists(t, pods, "default", name); !ok || obj.GetDeletionTimestamp() != nil {
			t.Errorf("pod %s was deleted", name)
		}
	}
}

// A board back from an outage is alive in gossip before its agent posts
// Ready again: the unreachable taint its Node kept from before is stale,
// and its pods stay, however old the taint.
func TestNodeLifecycleStaleTaint(t *testing.T) {
	e, live := lifecycleEnv(t, time.Hour, time.Hour)
	e.Namespace(t, "default")
	nodes, pods := e.Res(t, "", "v1", "nodes"), e.Res(t, "", "v1", "pods")
	// The healthy ones first: one lost Node alone would be a disruption.
	for _, name := range []string{"other1", "other2", "back"} {
		live.set(name, nodelifecycle.BoardAlive)
		n := tabletest.ReadyNode(name)
		if name == "back" {
			long := metav1.NewTime(time.Now().Add(-time.Hour))
			for i := range n.Status.Conditions {
				n.Status.Conditions[i].Status = corev1.ConditionUnknown
			}
			n.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &long},
				{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &long}}
		}
		e.MustCreate(t, nodes, "", n)
	}
	e.MustCreate(t, pods, "default", podOn("on-back", "back"))
	time.Sleep(400 * time.Millisecond)
	if e.evicted(t, "on-back") {
		t.Fatal("the pod of a board alive in gossip was evicted for a stale unreachable taint")
	}
	// Gone again for good: now the taint means it.
	live.set("back", nodelifecycle.BoardDead)
	tabletest.Eventually(t, "the pod evicted once the board is dead", func() bool { return e.evicted(t, "on-back") })
}

// countingStore counts the lists of pods the controller makes.
type countingStore struct {
	*registry.Store
	podLists atomic.Int64
}

func (s *countingStore) List(ctx context.Context, r *registry.Resource, ns string, opts metav1.ListOptions) (runtime.Object, error) {
	if r.Resource == "pods" {
		s.podLists.Add(1)
	}
	return s.Store.List(ctx, r, ns, opts)
}

// Lost boards whose pods tolerate it cost no list of the pods, however
// often the controller looks (each list decoded every pod of the
// cluster); a pod bound to a lost board later is still evicted.
func TestNodeLifecycleListsNoPods(t *testing.T) {
	e := &env{tabletest.NewStore(t)}
	e.Namespace(t, "default")
	store := &countingStore{Store: e.Store}
	live := &fakeLiveness{members: map[string]nodelifecycle.BoardState{}, changed: make(chan struct{})}
	ctl := nodelifecycle.New(store, live, nodelifecycle.Config{Grace: time.Hour, Hold: time.Hour, Resync: 10 * time.Millisecond, PodGC: 20 * time.Millisecond}, e.Log)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); ctl.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	nodes, pods := e.Res(t, "", "v1", "nodes"), e.Res(t, "", "v1", "pods")
	for _, name := range []string{"pi1", "pi2", "pi3", "lost"} {
		live.set(name, nodelifecycle.BoardAlive)
		e.MustCreate(t, nodes, "", tabletest.ReadyNode(name))
	}
	hour := int64(3600)
	for i := range 20 {
		p := podOn(fmt.Sprintf("stays-%d", i), "lost")
		p.Spec.Tolerations[0].TolerationSeconds = &hour
		e.MustCreate(t, pods, "default", p)
	}
	if _, err := e.Mutate(e.Ctx, pods, "default", "stays-0", "status", func(obj runtime.Object) error {
		obj.(*corev1.Pod).Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	live.set("lost", nodelifecycle.BoardDead)
	tabletest.Eventually(t, "the lost board tainted and its pod not ready", func() bool {
		obj, _ := e.Exists(t, pods, "default", "stays-0")
		return len(e.node(t, "lost").Spec.Taints) == 2 && !kit.PodReady(obj.(*corev1.Pod))
	})
	time.Sleep(300 * time.Millisecond) // 30 resyncs and 15 pod collections
	if n := store.podLists.Load(); n != 0 {
		t.Fatalf("%d lists of the pods", n)
	}
	for i := range 20 {
		if e.evicted(t, fmt.Sprintf("stays-%d", i)) {
			t.Fatalf("pod stays-%d evicted before its hour", i)
		}
	}
	e.MustCreate(t, pods, "default", podOn("goes", "lost"))
	tabletest.Eventually(t, "a pod bound to the lost board later evicted", func() bool { return e.evicted(t, "goes") })
}

// A pod whose Ready arrives after its board was marked lost (a status
// written late) is marked not ready too, as Kubernetes' controller marks a
// pod updated on a node that is not ready; before, only the pods ready at
// the moment of marking were (TestNodeLifecycleListsNoPods failed under
// armv6 emulation when the controller's cache saw the pod's Ready late).
func TestNodeLifecyclePodReadyAfterTheMark(t *testing.T) {
	e, live := lifecycleEnv(t, time.Hour, time.Hour)
	e.Namespace(t, "default")
	nodes, pods := e.Res(t, "", "v1", "nodes"), e.Res(t, "", "v1", "pods")
	for _, name := range []string{"pi1", "pi2", "pi3", "lost"} {
		live.set(name, nodelifecycle.BoardAlive)
		e.MustCreate(t, nodes, "", tabletest.ReadyNode(name))
	}
	hour := int64(3600)
	p := podOn("late", "lost")
	p.Spec.Tolerations[0].TolerationSeconds = &hour
	e.MustCreate(t, pods, "default", p)
	live.set("lost", nodelifecycle.BoardDead)
	tabletest.Eventually(t, "the lost board marked", func() bool {
		return kit.NodeReadyStatus(e.node(t, "lost")) == corev1.ConditionUnknown
	})
	if _, err := e.Mutate(e.Ctx, pods, "default", "late", "status", func(obj runtime.Object) error {
		obj.(*corev1.Pod).Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	tabletest.Eventually(t, "the pod ready after the mark made not ready", func() bool {
		obj, _ := e.Exists(t, pods, "default", "late")
		return !kit.PodReady(obj.(*corev1.Pod))
	})
}
