package registry_test

import (
	"fmt"
	"net/http"
	goruntime "runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/raft"
)

func rvInt(t *testing.T, obj runtime.Object) int64 {
	t.Helper()
	n, err := strconv.ParseInt(rvOf(obj), 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q of %s: %v", rvOf(obj), nameOf(obj), err)
	}
	return n
}

func TestWatchFromResourceVersion(t *testing.T) {
	e := newEnv(t)
	cms := e.cms(t)
	e.create(t, e.res(t, "", "v1", "namespaces"), "", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}})
	e.create(t, cms, "default", newConfigMap("a", nil))
	b := e.create(t, cms, "default", newConfigMap("b", nil))
	c := e.create(t, cms, "default", newConfigMap("c", nil))
	a2, err := e.Mutate(e.ctx, cms, "default", "a", "", func(o runtime.Object) error {
		o.(*corev1.ConfigMap).Data["k"] = "a2"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	o := e.create(t, cms, "other", newConfigMap("o", nil))

	t.Run("namespace", func(t *testing.T) {
		w := e.watch(t, cms, "default", metav1.ListOptions{ResourceVersion: rvOf(b)})
		if ev := w.expect(watch.Added, "c"); rvOf(ev.Object) != rvOf(c) {
			t.Errorf("ADDED c at rv %s, want %s", rvOf(ev.Object), rvOf(c))
		}
		if ev := w.expect(watch.Modified, "a"); rvOf(ev.Object) != rvOf(a2) || ev.Object.(*corev1.ConfigMap).Data["k"] != "a2" {
			t.Errorf("MODIFIED a: rv %s data %v", rvOf(ev.Object), ev.Object.(*corev1.ConfigMap).Data)
		}
		// Live: the next event is the deletion below, nothing older.
		if _, _, err := e.Delete(e.ctx, cms, "default", "b", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		ev := w.expect(watch.Deleted, "b")
		if rvInt(t, ev.Object) <= rvInt(t, o) {
			t.Errorf("DELETED b carries rv %s, not the deletion's (after %s)", rvOf(ev.Object), rvOf(o))
		}
	})
	t.Run("all namespaces", func(t *testing.T) {
		w := e.watch(t, cms, "", metav1.ListOptions{ResourceVersion: rvOf(c)})
		w.expect(watch.Modified, "a")
		w.expect(watch.Added, "o")
		w.expect(watch.Deleted, "b")
	})
	t.Run("resourceVersion empty sends the current objects first", func(t *testing.T) {
		w := e.watch(t, cms, "default", metav1.ListOptions{})
		w.expect(watch.Added, "a")
		w.expect(watch.Added, "c")
		e.create(t, cms, "default", newConfigMap("d", nil))
		w.expect(watch.Added, "d")
	})
	t.Run("future resourceVersion", func(t *testing.T) {
		// A watch from a revision a little ahead waits for it (up to
		// aheadWait), as kube-apiserver's watch cache does.
		next := e.node.KV().Revision() + 2
		created := make(chan error, 1)
		go func() {
			time.Sleep(100 * time.Millisecond)
			for _, n := range []string{"skipped-1", "skipped-2", "seen"} {
				if _, err := e.Create(e.ctx, cms, "default", newConfigMap(n, nil), registry.WriteOptions{}); err != nil {
					created <- err
					return
				}
			}
			created <- nil
		}()
		w := e.watch(t, cms, "default", metav1.ListOptions{ResourceVersion: strconv.FormatInt(next, 10)})
		w.expect(watch.Added, "seen")
		// The watch may see the last create before it returns: its
		// outcome is awaited here, not reported after the test ended.
		if err := <-created; err != nil {
			t.Error(err)
		}
	})
	t.Run("bad requests", func(t *testing.T) {
		for _, opts := range []metav1.ListOptions{
			{ResourceVersion: "abc"}, {ResourceVersion: "-3"}, {FieldSelector: "data.k=v"}, {LabelSelector: "a in ("},
		} {
			if _, err := e.Watch(e.ctx, cms, "default", opts); !apierrors.IsBadRequest(err) {
				t.Errorf("watch %+v: %v, want BadRequest", opts, err)
			}
		}
	})
}

func TestWatchSelectorTransitions(t *testing.T) {
	e := newEnv(t)
	cms, pods := e.cms(t), e.pods(t)

	setLabel := func(name, app string) func(t *testing.T) runtime.Object {
		return func(t *testing.T) runtime.Object {
			out, err := e.Mutate(e.ctx, cms, "default", name, "", func(o runtime.Object) error {
				o.(*corev1.ConfigMap).Labels = map[string]string{"app": app}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
	}
	setData := func(name, v string) func(t *testing.T) runtime.Object {
		return func(t *testing.T) runtime.Object {
			out, err := e.Mutate(e.ctx, cms, "default", name, "", func(o runtime.Object) error {
				o.(*corev1.ConfigMap).Data["k"] = v
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
	}
	create := func(name, app string) func(t *testing.T) runtime.Object {
		return func(t *testing.T) runtime.Object {
			return e.create(t, cms, "default", newConfigMap(name, map[string]string{"app": app}))
		}
	}
	del := func(name string) func(t *testing.T) runtime.Object {
		return func(t *testing.T) runtime.Object {
			if _, _, err := e.Delete(e.ctx, cms, "default", name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			return nil
		}
	}

	w := e.watch(t, cms, "default", metav1.ListOptions{LabelSelector: "app=web", ResourceVersion: strconv.FormatInt(e.node.KV().Revision(), 10)})
	steps := []struct {
		name string
		do   func(t *testing.T) runtime.Object
		want watch.EventType // "" = no event
	}{
		{"create outside", create("x", "db"), ""},
		{"label moves in", setLabel("x", "web"), watch.Added},
		{"change inside", setData("x", "1"), watch.Modified},
		{"label moves out", setLabel("x", "db"), watch.Deleted},
		{"change outside", setData("x", "2"), ""},
		{"create inside", create("y", "web"), watch.Added},
		{"delete inside", del("y"), watch.Deleted},
		{"label moves in again", setLabel("x", "web"), watch.Added},
		{"delete", del("x"), watch.Deleted},
		{"create outside, delete outside", func(t *testing.T) runtime.Object { create("z", "db")(t); return del("z")(t) }, ""},
		{"sentinel", create("s", "web"), watch.Added},
	}
	type want struct {
		typ  watch.EventType
		name string
		rv   string
	}
	var wants []want
	for _, st := range steps {
		out := st.do(t)
		if st.want == "" {
			continue
		}
		wt := want{typ: st.want, rv: "?"}
		if out != nil {
			wt.name, wt.rv = nameOf(out), rvOf(out)
		}
		wants = append(wants, wt)
	}
	for i, wt := range wants {
		ev := w.nextNonBookmark()
		if ev.Type != wt.typ || (wt.name != "" && nameOf(ev.Object) != wt.name) || (wt.rv != "?" && rvOf(ev.Object) != wt.rv) {
			t.Fatalf("event %d: got %s %s rv %s, want %s %s rv %s", i, ev.Type, nameOf(ev.Object), rvOf(ev.Object), wt.typ, wt.name, wt.rv)
		}
		if l := ev.Object.(*corev1.ConfigMap).Labels["app"]; wt.typ == watch.Deleted && ev.Type == watch.Deleted && wt.rv != "?" && l != "db" {
			t.Errorf("event %d: DELETED for a label change should carry the new object, has app=%s", i, l)
		}
	}

	t.Run("field selector", func(t *testing.T) {
		w := e.watch(t, pods, "default", metav1.ListOptions{FieldSelector: "spec.nodeName=n1", ResourceVersion: strconv.FormatInt(e.node.KV().Revision(), 10)})
		e.create(t, pods, "default", newPod("elsewhere", nil))
		e.create(t, pods, "default", newPod("here", nil))
		if err := e.Bind(e.ctx, "default", "elsewhere", &corev1.Binding{Target: corev1.ObjectReference{Name: "n2"}}); err != nil {
			t.Fatal(err)
		}
		if err := e.Bind(e.ctx, "default", "here", &corev1.Binding{Target: corev1.ObjectReference{Name: "n1"}}); err != nil {
			t.Fatal(err)
		}
		if ev := w.expect(watch.Added, "here"); ev.Object.(*corev1.Pod).Spec.NodeName != "n1" {
			t.Errorf("ADDED here with nodeName %q", ev.Object.(*corev1.Pod).Spec.NodeName)
		}
		if _, err := e.Mutate(e.ctx, pods, "default", "here", "status", func(o runtime.Object) error {
			o.(*corev1.Pod).Status.Phase = corev1.PodRunning
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		w.expect(watch.Modified, "here")
	})
}

func TestWatchCompacted(t *testing.T) {
	e := newEnv(t, func(cfg *raft.Config, _ *registry.Config) {
		cfg.KV.HistoryLimit = 5
		cfg.KV.WatchBuffer = 2
	})
	cms := e.cms(t)
	first := e.create(t, cms, "default", newConfigMap("first", nil))
	e.create(t, cms, "default", newConfigMap("first-b", nil))
	page, err := e.List(e.ctx, cms, "default", metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	cont := page.(*corev1.ConfigMapList).Continue
	for i := range 20 {
		e.create(t, cms, "default", newConfigMap(fmt.Sprintf("cm-%02d", i), nil))
	}
	if c := e.node.KV().CompactRevision(); c <= rvInt(t, first) {
		t.Fatalf("history not compacted past %s (compact revision %d)", rvOf(first), c)
	}

	t.Run("watch", func(t *testing.T) {
		_, err := e.Watch(e.ctx, cms, "default", metav1.ListOptions{ResourceVersion: rvOf(first)})
		if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
			t.Fatalf("watch from compacted rv %s: %v, want 410", rvOf(first), err)
		}
		if statusCode(err) != http.StatusGone {
			t.Errorf("code %d, want 410", statusCode(err))
		}
	})
	t.Run("list continue", func(t *testing.T) {
		if cont == "" {
			t.Fatal("first page had no continue token")
		}
		if _, err := e.List(e.ctx, cms, "default", metav1.ListOptions{Limit: 1, Continue: cont}); !apierrors.IsResourceExpired(err) {
			t.Fatalf("list with a continue token older than the history: %v, want 410", err)
		}
	})
	t.Run("list exact old resourceVersion", func(t *testing.T) {
		_, err := e.List(e.ctx, cms, "default", metav1.ListOptions{ResourceVersion: rvOf(first), ResourceVersionMatch: metav1.ResourceVersionMatchExact})
		if !apierrors.IsResourceExpired(err) {
			t.Fatalf("got %v, want 410", err)
		}
	})
	t.Run("recent resourceVersion", func(t *testing.T) {
		rev := e.node.KV().Revision()
		w := e.watch(t, cms, "default", metav1.ListOptions{ResourceVersion: strconv.FormatInt(rev, 10)})
		e.create(t, cms, "default", newConfigMap("fresh", nil))
		w.expect(watch.Added, "fresh")
	})
	t.Run("watcher falls behind", func(t *testing.T) {
		w := e.watch(t, cms, "default", metav1.ListOptions{ResourceVersion: strconv.FormatInt(e.node.KV().Revision(), 10)})
		for i := range 40 { // not read meanwhile: more than the channel, the watch buffer and the history hold
			e.create(t, cms, "default", newConfigMap(fmt.Sprintf("burst-%02d", i), nil))
		}
		var last registry.WatchEvent
		n := 0
		deadline := time.After(wait)
	drain:
		for {
			select {
			case ev, ok := <-w.ch:
				if !ok {
					break drain
				}
				last = ev
				n++
			case <-deadline:
				t.Fatalf("watch still open after %d events", n)
			}
		}
		st, ok := last.Object.(*metav1.Status)
		if last.Type != watch.Error || !ok || st.Code != http.StatusGone {
			t.Fatalf("after %d events the watch ended with %s %#v, want ERROR 410", n, last.Type, last.Object)
		}
		if n > 40 {
			t.Errorf("%d events for 40 writes", n)
		}
	})
}

func TestWatchInitialEvents(t *testing.T) {
	tests := []struct {
		name        string
		bookmarks   bool
		wantInitEnd bool
	}{
		{"with bookmarks", true, true},
		{"without bookmarks", false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			pods := e.pods(t)
			var lastRV int64
			for _, n := range []string{"a", "b", "c"} {
				lastRV = rvInt(t, e.create(t, pods, "default", newPod(n, nil)))
			}
			e.create(t, pods, "default", newPod("other-label", map[string]string{"skip": "yes"}))
			w := e.watch(t, pods, "default", metav1.ListOptions{
				SendInitialEvents: ptr(true), AllowWatchBookmarks: tc.bookmarks,
				ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, LabelSelector: "!skip",
			})
			for _, n := range []string{"a", "b", "c"} {
				if ev := w.next(); ev.Type != watch.Added || nameOf(ev.Object) != n {
					t.Fatalf("initial event: %s %s, want ADDED %s", ev.Type, nameOf(ev.Object), n)
				}
			}
			if tc.wantInitEnd {
				ev := w.next()
				if ev.Type != watch.Bookmark {
					t.Fatalf("after the initial events: %s %s, want BOOKMARK", ev.Type, nameOf(ev.Object))
				}
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					t.Fatalf("bookmark object %T, want *v1.Pod", ev.Object)
				}
				if p.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
					t.Errorf("bookmark annotations %v, want %s=true", p.Annotations, metav1.InitialEventsAnnotationKey)
				}
				if rvInt(t, p) < lastRV {
					t.Errorf("bookmark rv %s older than the last initial object (%d)", p.ResourceVersion, lastRV)
				}
				if p.Kind != "Pod" || p.APIVersion != "v1" {
					t.Errorf("bookmark kind %q apiVersion %q", p.Kind, p.APIVersion)
				}
			}
			e.create(t, pods, "default", newPod("d", nil))
			if ev := w.next(); ev.Type != watch.Added || nameOf(ev.Object) != "d" {
				t.Fatalf("live event: %s %s, want ADDED d", ev.Type, nameOf(ev.Object))
			}
		})
	}
}

func TestWatchBookmarks(t *testing.T) {
	saved := registry.BookmarkInterval
	registry.BookmarkInterval = 5 * time.Millisecond
	t.Cleanup(func() { registry.BookmarkInterval = saved }) // runs after the watches' cleanups have drained them

	e := newEnv(t)
	pods, cms := e.pods(t), e.cms(t)
	from := strconv.FormatInt(e.node.KV().Revision(), 10)
	withBM := e.watch(t, pods, "default", metav1.ListOptions{ResourceVersion: from, AllowWatchBookmarks: true})
	without := e.watch(t, pods, "default", metav1.ListOptions{ResourceVersion: from})

	// Writes elsewhere move the store's revision; a quiet pod watch learns
	// of it through a bookmark.
	cm := e.create(t, cms, "default", newConfigMap("elsewhere", nil))
	ev := withBM.next()
	for ev.Type == watch.Bookmark && rvInt(t, ev.Object) < rvInt(t, cm) {
		ev = withBM.next()
	}
	if ev.Type != watch.Bookmark {
		t.Fatalf("got %s, want BOOKMARK", ev.Type)
	}
	bm, ok := ev.Object.(*corev1.Pod)
	if !ok || bm.Name != "" || bm.Kind != "Pod" {
		t.Fatalf("bookmark object %#v", ev.Object)
	}

	// Bookmarks only move forward.
	prev := rvInt(t, bm)
	cm2 := e.create(t, cms, "default", newConfigMap("elsewhere-2", nil))
	for {
		ev := withBM.next()
		if ev.Type != watch.Bookmark {
			t.Fatalf("got %s, want BOOKMARK", ev.Type)
		}
		rv := rvInt(t, ev.Object)
		if rv <= prev {
			t.Fatalf("bookmark rv %d after %d", rv, prev)
		}
		prev = rv
		if rv >= rvInt(t, cm2) {
			break
		}
	}

	// The watch that did not allow bookmarks gets none: its first event is
	// the pod.
	e.create(t, pods, "default", newPod("p", nil))
	if ev := without.next(); ev.Type != watch.Added || nameOf(ev.Object) != "p" {
		t.Fatalf("watch without bookmarks: %s %s, want ADDED p", ev.Type, nameOf(ev.Object))
	}
	withBM.expect(watch.Added, "p")
}

// TestWatchInitialObjectsShared: watches that start from the current
// state hand out one decoded object per stored object, as their later
// events do, however many changes came since: each cache that keeps them
// holds the same copy.
func TestWatchInitialObjectsShared(t *testing.T) {
	e := newEnv(t)
	cms := e.cms(t)
	e.create(t, cms, "default", newConfigMap("a", nil))
	first := e.watch(t, cms, "default", metav1.ListOptions{}).expect(watch.Added, "a").Object
	for i := range 600 { // past the newest changes kept alive
		e.create(t, cms, "default", newConfigMap(fmt.Sprintf("x%d", i), nil))
	}
	goruntime.GC()
	second := e.watch(t, cms, "default", metav1.ListOptions{}).expect(watch.Added, "a").Object
	if first != second {
		t.Errorf("two watches decoded configMap a twice; want one shared object")
	}
}

// A list by labels reads the labels of objects the watchers share from
// the shared objects, not from their JSON, and finds the same objects
// either way.
func TestListByLabelsReadsSharedObjects(t *testing.T) {
	e := newEnv(t)
	cms := e.cms(t)
	const n = 200
	for i := range n {
		e.create(t, cms, "default", newConfigMap(fmt.Sprintf("c%d", i), map[string]string{"app": fmt.Sprint(i % 2)}))
	}
	list := func(sel string) []string {
		out, err := e.List(e.ctx, cms, "default", metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, cm := range out.(*corev1.ConfigMapList).Items {
			names = append(names, cm.Name)
		}
		return names
	}
	unshared := list("app=1")
	nothing := func() {
		if names := list("app=none"); len(names) != 0 {
			t.Fatalf("app=none found %v", names)
		}
	}
	allocsUnshared := testing.AllocsPerRun(5, nothing)

	// A watch's initial events share every object; the watcher keeps them.
	w := e.watch(t, cms, "default", metav1.ListOptions{})
	var held []runtime.Object
	for range n {
		held = append(held, w.nextNonBookmark().Object)
	}
	if shared := list("app=1"); !slices.Equal(shared, unshared) || len(shared) != n/2 {
		t.Errorf("app=1: %d objects through the shared objects, %d from JSON; want the same %d", len(shared), len(unshared), n/2)
	}
	allocsShared := testing.AllocsPerRun(5, nothing)
	t.Logf("a list by labels matching none of %d objects: %.0f allocations reading JSON, %.0f reading shared objects", n, allocsUnshared, allocsShared)
	if allocsShared > allocsUnshared/4 {
		t.Errorf("%.0f allocations with every object shared against %.0f reading JSON: the labels are still read from JSON", allocsShared, allocsUnshared)
	}
	goruntime.KeepAlive(held)
}

// The in-process watchers take objects without managedFields (a quarter
// of a decoded pod, read by no controller): otherwise the objects an API
// watcher gets, at every kind of event, selectors or not. A controller
// that writes back a copy of what it watched keeps the stored
// managedFields.
func TestWatchWithoutManagedFields(t *testing.T) {
	e := newEnv(t)
	cms := e.cms(t)
	e.create(t, cms, "default", newConfigMap("a", map[string]string{"app": "x"}))
	whole := e.watch(t, cms, "default", metav1.ListOptions{})
	lite := e.watch(t, cms, "default", metav1.ListOptions{}, registry.WithoutManagedFields())
	wholeSel := e.watch(t, cms, "default", metav1.ListOptions{LabelSelector: "app=x"})
	liteSel := e.watch(t, cms, "default", metav1.ListOptions{LabelSelector: "app=x"}, registry.WithoutManagedFields())
	same := func(what string, typ watch.EventType) *corev1.ConfigMap {
		t.Helper()
		w := whole.expect(typ, "a").Object.(*corev1.ConfigMap)
		l := lite.expect(typ, "a").Object.(*corev1.ConfigMap)
		ws := wholeSel.expect(typ, "a").Object.(*corev1.ConfigMap)
		ls := liteSel.expect(typ, "a").Object.(*corev1.ConfigMap)
		if len(w.ManagedFields) == 0 || len(ws.ManagedFields) == 0 {
			t.Fatalf("%s: the API's watches got no managedFields", what)
		}
		want := w.DeepCopy()
		want.ManagedFields = nil
		for _, got := range []*corev1.ConfigMap{l, ls} {
			if !equality.Semantic.DeepEqual(got, want) {
				t.Fatalf("%s: watched without managedFields %+v, want %+v", what, got, want)
			}
		}
		if !equality.Semantic.DeepEqual(ws, w) {
			t.Fatalf("%s: with a selector %+v, without %+v", what, ws, w)
		}
		return l
	}
	l := same("initial state", watch.Added)

	// A controller updates the object it watched.
	cp := l.DeepCopy()
	cp.Data["k"] = "w"
	if _, err := e.Update(e.ctx, cms, "default", "a", "", cp, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := e.get(t, cms, "default", "a").(*corev1.ConfigMap); len(got.ManagedFields) == 0 {
		t.Fatalf("an update of an object watched without managedFields dropped the stored ones")
	}
	same("an update", watch.Modified)
	if _, _, err := e.Delete(e.ctx, cms, "default", "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	same("a deletion", watch.Deleted)
}

// A caller that changes nothing (a Table's rows) is handed the objects
// the in-process watchers share, in the form it asked for, not decoded
// again; any other caller gets its own copies.
func TestScanReadOnlySharesObjects(t *testing.T) {
	e := newEnv(t)
	cms := e.cms(t)
	for i := range 3 {
		e.create(t, cms, "default", newConfigMap(fmt.Sprintf("c%d", i), nil))
	}
	w := e.watch(t, cms, "default", metav1.ListOptions{}, registry.WithoutManagedFields())
	held := map[string]runtime.Object{}
	for range 3 {
		obj := w.nextNonBookmark().Object
		held[nameOf(obj)] = obj
	}
	scan := func(with ...registry.ScanOption) map[string]runtime.Object {
		got := map[string]runtime.Object{}
		if _, err := e.Scan(e.ctx, cms, "default", metav1.ListOptions{}, func(obj runtime.Object) error {
			got[nameOf(obj)] = obj
			return nil
		}, with...); err != nil {
			t.Fatal(err)
		}
		return got
	}
	for name, obj := range scan(registry.WithoutManagedFields(), registry.ReadOnly()) {
		if obj != held[name] {
			t.Errorf("%s: a read-only scan decoded it again; want the watchers' object", name)
		}
	}
	for name, obj := range scan(registry.WithoutManagedFields()) {
		if obj == held[name] {
			t.Errorf("%s: a scan that may change its objects got the watchers' object", name)
		}
	}
	// Read only but with managedFields: not the form the watchers hold.
	for name, obj := range scan(registry.ReadOnly()) {
		if obj == held[name] || len(obj.(*corev1.ConfigMap).ManagedFields) == 0 {
			t.Errorf("%s: a read-only scan with managedFields got the watchers' object without them", name)
		}
	}
}
