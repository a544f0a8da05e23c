package kit

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/raft/rafttest"
)

// TestLoopCache: a Cache's watch, run by a Loop, holds the current objects
// and follows their changes; a ChangesOnly watch sees only what changes
// after it opened.
func TestLoopCache(t *testing.T) {
	c := rafttest.NewCluster(t, rafttest.Options{Size: 1})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := registry.New(registry.Config{Node: c.Node(c.IDs()[0]), Logger: log})
	cms := MustLookup(s, corev1.SchemeGroupVersion.WithResource("configmaps"))
	ctx := t.Context()
	nsRes := MustLookup(s, corev1.SchemeGroupVersion.WithResource("namespaces"))
	if _, err := s.Create(ctx, nsRes, "", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	create := func(name string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := s.Create(ctx, cms, "default", cm, registry.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("before")

	cache := NewCache[*corev1.ConfigMap]()
	events := make(chan string, 16)
	changes := make(chan string, 16)
	loopCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l := Loop{Store: s, Log: log, Name: "test"}
		l.Run(loopCtx,
			cache.Watch(cms, nil, func(typ watch.EventType, _, cm *corev1.ConfigMap) { events <- string(typ) + " " + cm.Name }),
			Watch{Res: cms, ChangesOnly: true, Handle: func(ev registry.WatchEvent) {
				if cm, ok := ev.Object.(*corev1.ConfigMap); ok {
					changes <- string(ev.Type) + " " + cm.Name
				}
			}})
	}()
	next := func(ch <-chan string, want string) {
		t.Helper()
		select {
		case got := <-ch:
			if got != want {
				t.Fatalf("event %q, want %q", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no event; want %q", want)
		}
	}
	next(events, "ADDED before")
	if _, ok := cache.Get("default/before"); !ok {
		t.Fatal("cache lacks default/before")
	}
	create("after")
	next(events, "ADDED after")
	next(changes, "ADDED after")
	if got := len(cache.List("default")); got != 2 {
		t.Fatalf("%d objects cached in default, want 2", got)
	}
	if _, _, err := s.Delete(ctx, cms, "default", "before", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	next(events, "DELETED before")
	if _, ok := cache.Get("default/before"); ok {
		t.Fatal("cache still holds the deleted default/before")
	}
	cancel()
	<-done
}
