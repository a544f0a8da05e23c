package events_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/isle-cluster/isle/control/events"
	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/raft/rafttest"
)

const wait = 15 * time.Second

// clock is a clock that moves only when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type env struct {
	*registry.Store
	ctx    context.Context
	clock  *clock
	events *registry.Resource
	pods   *registry.Resource
}

// newEnv starts a store with namespace "default" and a Broadcaster on it,
// built with cfg (Store and Now filled in) and run when run is set.
func newEnv(t *testing.T, cfg events.Config, run bool) (*env, *events.Broadcaster) {
	t.Helper()
	c := rafttest.NewCluster(t, rafttest.Options{Size: 1})
	log := slog.New(slog.DiscardHandler)
	clk := &clock{t: time.Now().UTC().Truncate(time.Second)}
	s := registry.New(registry.Config{Node: c.Node(c.IDs()[0]), Logger: log, Now: clk.now})
	e := &env{Store: s, ctx: t.Context(), clock: clk,
		events: lookup(t, s, "events"), pods: lookup(t, s, "pods")}
	if _, err := s.Create(e.ctx, lookup(t, s, "namespaces"), "", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg.Store, cfg.Now, cfg.Logger = s, clk.now, log
	b := events.NewBroadcaster(cfg)
	if run {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			b.Run(ctx)
		}()
		t.Cleanup(func() {
			cancel()
			<-done
		})
	}
	return e, b
}

func lookup(t *testing.T, s *registry.Store, resource string) *registry.Resource {
	t.Helper()
	r, ok := s.Resources().Lookup(corev1.SchemeGroupVersion.WithResource(resource))
	if !ok {
		t.Fatalf("%s not served", resource)
	}
	return r
}

func (e *env) pod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	out, err := e.Create(e.ctx, e.pods, "default", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, registry.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out.(*corev1.Pod)
}

// list lists Events with a field selector, in all namespaces.
func (e *env) list(t *testing.T, fieldSelector string) []corev1.Event {
	t.Helper()
	out, err := e.List(e.ctx, e.events, "", metav1.ListOptions{FieldSelector: fieldSelector})
	if err != nil {
		t.Fatal(err)
	}
	return out.(*corev1.EventList).Items
}

// describeSelector is the selector `kubectl describe` lists an object's
// Events with.
func describeSelector(ns, name, kind, uid string) string {
	return "involvedObject.name=" + name + ",involvedObject.namespace=" + ns + ",involvedObject.kind=" + kind + ",involvedObject.uid=" + uid
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true within %v", what, wait)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestEventOfPod(t *testing.T) {
	e, b := newEnv(t, events.Config{}, true)
	pod := e.pod(t, "web-1")
	rec := b.Recorder("default-scheduler")
	rec.Eventf(pod, corev1.EventTypeNormal, "Scheduled", "Successfully assigned %s/%s to %s", pod.Namespace, pod.Name, "pi-1")

	sel := describeSelector("default", "web-1", "Pod", string(pod.UID))
	var evs []corev1.Event
	eventually(t, "the event is listed as kubectl describe lists it", func() bool {
		evs = e.list(t, sel)
		return len(evs) == 1
	})
	ev := evs[0]
	now := metav1.NewTime(e.clock.now())
	want := corev1.Event{
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "default", Name: "web-1",
			UID: pod.UID, ResourceVersion: pod.ResourceVersion},
		Reason: "Scheduled", Message: "Successfully assigned default/web-1 to pi-1", Type: corev1.EventTypeNormal,
		Source: corev1.EventSource{Component: "default-scheduler"}, ReportingController: "default-scheduler",
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	got := ev
	got.ObjectMeta = metav1.ObjectMeta{}
	if !equalEvents(got, want) {
		t.Errorf("event\n got %+v\nwant %+v", got, want)
	}
	if ev.Namespace != "default" || !strings.HasPrefix(ev.Name, "web-1.") {
		t.Errorf("event %s/%s, want default/web-1.<hex>", ev.Namespace, ev.Name)
	}
	// Another object's Events are not listed with it.
	if n := len(e.list(t, describeSelector("default", "web-1", "Pod", "other-uid"))); n != 0 {
		t.Errorf("%d events for another uid", n)
	}
}

func equalEvents(a, b corev1.Event) bool {
	return a.InvolvedObject == b.InvolvedObject && a.Reason == b.Reason && a.Message == b.Message && a.Type == b.Type &&
		a.Source == b.Source && a.ReportingController == b.ReportingController && a.Count == b.Count &&
		a.FirstTimestamp.Equal(&b.FirstTimestamp) && a.LastTimestamp.Equal(&b.LastTimestamp)
}

func TestEventOfClusterScopedObject(t *testing.T) {
	e, b := newEnv(t, events.Config{}, true)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "pi-1", UID: "node-uid"}}
	b.Recorder("node-controller").Eventf(node, corev1.EventTypeNormal, "RegisteredNode", "Node %s event: Registered Node %s in Controller", "pi-1", "pi-1")
	eventually(t, "the node's event is stored in namespace default", func() bool {
		evs := e.list(t, "involvedObject.kind=Node,involvedObject.name=pi-1,involvedObject.namespace=")
		return len(evs) == 1 && evs[0].Namespace == "default" && evs[0].InvolvedObject.APIVersion == "v1"
	})
}

// OnEvent hears of every Event recorded, also of those de-duplicated
// later: each is an action of a controller (the leader's activity LED).
func TestOnEvent(t *testing.T) {
	var n atomic.Int32
	_, b := newEnv(t, events.Config{OnEvent: func() { n.Add(1) }}, true)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "pi-1", UID: "node-uid"}}
	rec := b.Recorder("node-controller")
	for range 3 {
		rec.Eventf(node, corev1.EventTypeNormal, "RegisteredNode", "Node %s registered", "pi-1")
	}
	if got := n.Load(); got != 3 {
		t.Fatalf("OnEvent called %d times for 3 Events, want 3", got)
	}
}

func TestEventDeduplication(t *testing.T) {
	e, b := newEnv(t, events.Config{}, true)
	pod := e.pod(t, "p")
	rec := b.Recorder("default-scheduler")
	first := e.clock.now()
	const n = 5
	for i := range n {
		if i > 0 {
			e.clock.advance(time.Second)
		}
		rec.Eventf(pod, corev1.EventTypeWarning, "FailedScheduling", "0/3 nodes are available: 3 Insufficient memory.")
		// Give the writer a chance to write in between, so that both the
		// create and the updates of the count are exercised.
		if i == 0 {
			eventually(t, "the first event is stored", func() bool { return len(e.list(t, "reason=FailedScheduling")) == 1 })
		}
	}
	var ev corev1.Event
	eventually(t, "one event with count 5", func() bool {
		evs := e.list(t, "reason=FailedScheduling")
		if len(evs) != 1 {
			t.Fatalf("%d events, want 1 with a count", len(evs))
		}
		ev = evs[0]
		return ev.Count == n
	})
	if !ev.FirstTimestamp.Time.Equal(first) || !ev.LastTimestamp.Time.Equal(first.Add((n-1)*time.Second)) {
		t.Errorf("first %v last %v, want %v and %v", ev.FirstTimestamp, ev.LastTimestamp, first, first.Add((n-1)*time.Second))
	}

	// A different message, type or source is another Event.
	rec.Eventf(pod, corev1.EventTypeWarning, "FailedScheduling", "0/3 nodes are available: 3 Insufficient cpu.")
	b.Recorder("other-scheduler").Eventf(pod, corev1.EventTypeWarning, "FailedScheduling", "0/3 nodes are available: 3 Insufficient memory.")
	eventually(t, "three events", func() bool { return len(e.list(t, "reason=FailedScheduling")) == 3 })

	// An Event deleted meanwhile (expired, or by a user) is stored again.
	if _, _, err := e.Delete(e.ctx, e.events, ev.Namespace, ev.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rec.Eventf(pod, corev1.EventTypeWarning, "FailedScheduling", "0/3 nodes are available: 3 Insufficient memory.")
	eventually(t, "the deleted event comes back with its count", func() bool {
		obj, err := e.Get(e.ctx, e.events, ev.Namespace, ev.Name, metav1.GetOptions{})
		return err == nil && obj.(*corev1.Event).Count == n+1
	})
}

func TestEventAggregation(t *testing.T) {
	e, b := newEnv(t, events.Config{}, true)
	rs := &corev1.ObjectReference{Kind: "ReplicaSet", APIVersion: "apps/v1", Namespace: "default", Name: "web-5d4f", UID: "rs-uid"}
	rec := b.Recorder("replicaset-controller")
	for i := range 12 {
		rec.Eventf(rs, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: web-5d4f-%02d", i)
	}
	combined := func(ev corev1.Event) bool { return strings.HasPrefix(ev.Message, "(combined from similar events): ") }
	eventually(t, "nine single events and one combined with count 3", func() bool {
		evs := e.list(t, "involvedObject.uid=rs-uid")
		i := slices.IndexFunc(evs, combined)
		return len(evs) == 10 && i >= 0 && evs[i].Count == 3 && evs[i].Message == "(combined from similar events): Created pod: web-5d4f-11"
	})
	for _, ev := range e.list(t, "involvedObject.uid=rs-uid") {
		if !combined(ev) && ev.Count != 1 {
			t.Errorf("single event %q has count %d", ev.Message, ev.Count)
		}
	}
}

// CacheSize bounds the Events the Broadcaster remembers, shared by its
// writers (client-go's bound is per process): an Event forgotten is
// stored anew the next time it comes instead of counted.
func TestEventCacheSharedByWriters(t *testing.T) {
	e, b := newEnv(t, events.Config{Writers: 2, CacheSize: 4}, true)
	pod := e.pod(t, "p")
	rec := b.Recorder("default-scheduler")
	// All Events of one object go through one writer, which remembers 2.
	for i, msg := range []string{"a", "b", "c", "a"} {
		rec.Eventf(pod, corev1.EventTypeWarning, "FailedScheduling", "%s", msg)
		eventually(t, "event stored", func() bool { return len(e.list(t, "reason=FailedScheduling")) >= min(i+1, 3) })
	}
	eventually(t, "a forgotten Event stored anew", func() bool {
		n := 0
		for _, ev := range e.list(t, "reason=FailedScheduling") {
			if ev.Count != 1 {
				t.Fatalf("event %q counted %d times: the writer remembered more than its share", ev.Message, ev.Count)
			}
			if ev.Message == "a" {
				n++
			}
		}
		return n == 2
	})
	// Within its share a repeat is counted.
	rec.Eventf(pod, corev1.EventTypeWarning, "FailedScheduling", "%s", "a")
	eventually(t, "a remembered Event counted", func() bool {
		for _, ev := range e.list(t, "reason=FailedScheduling") {
			if ev.Message == "a" && ev.Count == 2 {
				return true
			}
		}
		return false
	})
}

func TestEventfNeverBlocks(t *testing.T) {
	// Not running: nothing drains the queue of one.
	e, b := newEnv(t, events.Config{Writers: 1, QueueSize: 2}, false)
	pod := e.pod(t, "p")
	dropped := metric(t, "isle_events_dropped_total")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 5 {
			b.Recorder("test").Eventf(pod, corev1.EventTypeNormal, "Test", "event %d", i)
		}
	}()
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatal("Eventf blocked on a full queue")
	}
	if got := metric(t, "isle_events_dropped_total") - dropped; got != 3 {
		t.Errorf("dropped %v events, want 3", got)
	}
}

func TestEventExpiry(t *testing.T) {
	e, _ := newEnv(t, events.Config{TTL: time.Hour, SweepInterval: 10 * time.Millisecond}, true)
	// Events written by other clients expire too, an hour after their last
	// update: the latest of their timestamps and their creation.
	mk := func(name string, series *corev1.EventSeries) {
		now := metav1.NewTime(e.clock.now())
		ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p"},
			Reason:         "Test", FirstTimestamp: now, LastTimestamp: now, Count: 1, Series: series}
		if _, err := e.Create(e.ctx, e.events, "default", ev, registry.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	names := func() []string {
		var out []string
		for _, ev := range e.list(t, "") {
			out = append(out, ev.Name)
		}
		return out
	}
	start := e.clock.now()
	mk("first", nil)
	mk("series", &corev1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(start.Add(45 * time.Minute))})
	e.clock.advance(30 * time.Minute)
	mk("second", nil)

	e.clock.advance(31 * time.Minute) // start+61m
	eventually(t, "the first event expires", func() bool { return slices.Equal(names(), []string{"second", "series"}) })
	e.clock.advance(30 * time.Minute) // start+91m
	eventually(t, "the second event expires", func() bool { return slices.Equal(names(), []string{"series"}) })
	e.clock.advance(15 * time.Minute) // start+106m
	eventually(t, "the series expires an hour after its last observation", func() bool { return len(names()) == 0 })
}

// metric returns the value of one of the package's counters.
func metric(t *testing.T, name string) float64 {
	t.Helper()
	metricsOnce.Do(func() { events.RegisterMetrics(metricsReg) })
	families, err := metricsReg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			sum := 0.0
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			return sum
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

var (
	metricsOnce sync.Once
	metricsReg  = prometheus.NewRegistry()
)

// The writers remember the Events they have seen by name, count and
// times, not whole Events: what their caches hold, the heap the running
// Broadcaster keeps above the same store without it, is ~700 bytes per
// Event seen, most of it the two LRU caches' entries (it was ~1,350 with
// whole Events).
func TestEventCacheHoldsNoEvents(t *testing.T) {
	const n = 2000
	e, b := newEnv(t, events.Config{Writers: 4, QueueSize: n}, false)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	rec := b.Recorder("default-scheduler")
	pods := make([]*corev1.ObjectReference, n)
	for i := range pods {
		pods[i] = &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "default",
			Name: fmt.Sprintf("web-%d", i), UID: types.UID(fmt.Sprintf("6b3d1f5e-1c2a-4e8b-9f00-%012d", i))}
	}
	for i, p := range pods {
		rec.Eventf(p, corev1.EventTypeNormal, "Scheduled", "Successfully assigned default/%s to pi-%d", p.Name, i%10)
	}
	eventually(t, "events stored", func() bool { return len(e.list(t, "reason=Scheduled")) == n })
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	with := heap()
	cancel()
	<-done
	without := heap()
	per := (int64(with) - int64(without)) / n
	t.Logf("the writers hold %d bytes per Event seen", per)
	if per > 900 {
		t.Errorf("the writers hold %d bytes per Event seen, want at most 900", per)
	}
	runtime.KeepAlive(pods)
}
