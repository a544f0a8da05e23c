package kit

import (
	"slices"
	"testing"

	"github.com/isle-cluster/isle/control/registry"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

func pod(ns, name string, uid types.UID, controller types.UID) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid}}
	if controller != "" {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{UID: "other"}, {UID: controller, Controller: &yes}}
	}
	return p
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestCache(t *testing.T) {
	c := NewCache[*corev1.Pod]()
	c.apply(watch.Added, pod("a", "p1", "u1", "rs1"))
	c.apply(watch.Added, pod("a", "p2", "u2", "rs1"))
	c.apply(watch.Added, pod("b", "p3", "u3", ""))
	if p, ok := c.Get("a/p1"); !ok || p.UID != "u1" {
		t.Fatalf("Get a/p1: %v, %v", p, ok)
	}
	if k, ok := c.KeyOfUID("u3"); !ok || k != "b/p3" {
		t.Fatalf("KeyOfUID u3: %q, %v", k, ok)
	}
	if p, ok := c.ByUID("u2"); !ok || p.Name != "p2" {
		t.Fatalf("ByUID u2: %v, %v", p, ok)
	}
	if _, ok := c.ByUID("none"); ok {
		t.Fatal("ByUID of an unknown UID found an object")
	}
	if got := names(c.List("a")); !slices.Equal(got, []string{"p1", "p2"}) {
		t.Fatalf("List a: %v", got)
	}
	if got := names(c.Controlled("rs1")); !slices.Equal(got, []string{"p1", "p2"}) {
		t.Fatalf("Controlled rs1: %v", got)
	}
	if got := names(c.Controlled("other")); len(got) != 0 {
		t.Fatalf("Controlled by a non-controller owner: %v", got)
	}
	// A change of controller moves the object between the owner indexes,
	// and apply returns the object before.
	old := c.apply(watch.Modified, pod("a", "p2", "u2", "rs2"))
	if old == nil || metav1.GetControllerOf(old).UID != "rs1" {
		t.Fatalf("old object: %v", old)
	}
	if got := names(c.Controlled("rs1")); !slices.Equal(got, []string{"p1"}) {
		t.Fatalf("Controlled rs1 after the change: %v", got)
	}
	if got := names(c.Controlled("rs2")); !slices.Equal(got, []string{"p2"}) {
		t.Fatalf("Controlled rs2: %v", got)
	}
	if old := c.apply(watch.Deleted, pod("b", "p3", "u3", "")); old == nil {
		t.Fatal("delete returned no old object")
	}
	if _, ok := c.Get("b/p3"); ok {
		t.Fatal("deleted object still there")
	}
	if _, ok := c.KeyOfUID("u3"); ok {
		t.Fatal("deleted object's UID still there")
	}
	if got := c.List("b"); len(got) != 0 {
		t.Fatalf("List b after the delete: %v", names(got))
	}
	if got := names(c.All()); !slices.Equal(got, []string{"p1", "p2"}) {
		t.Fatalf("All: %v", got)
	}
	if got := c.Keys(); !slices.Equal(got, []string{"a/p1", "a/p2"}) {
		t.Fatalf("Keys: %v", got)
	}
	c.reset()
	if got := c.Keys(); len(got) != 0 {
		t.Fatalf("Keys after reset: %v", got)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	if k := Key(ns); k != "n" {
		t.Fatalf("Key of a cluster-scoped object: %q", k)
	}
}

func TestWatchMeta(t *testing.T) {
	c := NewMetaCache()
	type seen struct{ old, obj *metav1.PartialObjectMetadata }
	var got []seen
	w := WatchMeta(c, nil, nil, func(_ watch.EventType, old, obj *metav1.PartialObjectMetadata) { got = append(got, seen{old, obj}) })
	w.Opened()
	p := pod("a", "p1", "u1", "rs1")
	p.Labels = map[string]string{"app": "web"}
	p.Annotations = map[string]string{"big": "value"}
	p.Finalizers = []string{"batch.kubernetes.io/job-tracking"}
	p.Spec.NodeName = "pi4"
	w.Handle(registry.WatchEvent{Type: watch.Added, Object: p})
	kept, ok := c.Get("a/p1")
	if !ok {
		t.Fatal("Get a/p1: not found")
	}
	if kept.UID != "u1" || kept.Labels["app"] != "web" || len(kept.Finalizers) != 1 || kept.Annotations != nil {
		t.Fatalf("kept metadata: %+v", kept.ObjectMeta)
	}
	if got := c.Controlled("rs1"); len(got) != 1 || got[0].Name != "p1" {
		t.Fatalf("Controlled rs1: %v", got)
	}
	// The handler gets the metadata before and after; an ERROR event is
	// dropped; opening the watch again empties the cache.
	w.Handle(registry.WatchEvent{Type: watch.Modified, Object: pod("a", "p1", "u1", "rs2")})
	w.Handle(registry.WatchEvent{Type: watch.Error, Object: &metav1.Status{Status: metav1.StatusFailure}})
	if len(got) != 2 || got[0].old != nil || got[1].old == nil || metav1.GetControllerOf(got[1].old).UID != "rs1" ||
		metav1.GetControllerOf(got[1].obj).UID != "rs2" {
		t.Fatalf("handled: %+v", got)
	}
	w.Opened()
	if keys := c.Keys(); len(keys) != 0 {
		t.Fatalf("after the watch was opened again: %v", keys)
	}
}

// TestMetaViewsShared: the controllers that follow a kind's metadata keep
// one view of each change's decoded object between them.
func TestMetaViewsShared(t *testing.T) {
	a := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", Labels: map[string]string{"app": "x"}}}
	b := a.DeepCopy()
	va, vb := metaViews.of(a, a), metaViews.of(b, b)
	if metaViews.of(a, a) != va {
		t.Error("the same object got a second view")
	}
	if va == vb || va.Name != "a" || va.Labels["app"] != "x" {
		t.Errorf("views %p %p of two objects: %+v", va, vb, va.ObjectMeta)
	}
	for range metaViewsKept {
		p := a.DeepCopy()
		metaViews.of(p, p)
	}
	if metaViews.of(a, a) == va {
		t.Error("a view kept past the last metaViewsKept objects")
	}
}
