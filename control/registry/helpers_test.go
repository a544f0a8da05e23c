package registry_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/rafttest"
)

// wait is how long any condition in these tests may take.
const wait = 10 * time.Second

// env is a Store on a one-member in-process store with the namespace
// "default" created.
type env struct {
	*registry.Store
	node *raft.Node
	ctx  context.Context
}

type envOption func(*raft.Config, *registry.Config)

func newEnv(t *testing.T, opts ...envOption) *env {
	t.Helper()
	var rcfg registry.Config
	c := rafttest.NewCluster(t, rafttest.Options{Size: 1, Tune: func(cfg *raft.Config) {
		for _, o := range opts {
			o(cfg, &rcfg)
		}
	}})
	n := c.Node(c.IDs()[0])
	rcfg.Node = n
	e := &env{Store: registry.New(rcfg), node: n, ctx: t.Context()}
	if _, err := e.Create(e.ctx, e.res(t, "", "v1", "namespaces"), "", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, registry.WriteOptions{}); err != nil {
		t.Fatalf("create namespace default: %v", err)
	}
	return e
}

// res looks a served resource up.
func (e *env) res(t *testing.T, group, version, resource string) *registry.Resource {
	t.Helper()
	r, ok := e.Resources().Lookup(schema.GroupVersionResource{Group: group, Version: version, Resource: resource})
	if !ok {
		t.Fatalf("resource %s/%s %s is not served", group, version, resource)
	}
	return r
}

func (e *env) pods(t *testing.T) *registry.Resource { return e.res(t, "", "v1", "pods") }
func (e *env) cms(t *testing.T) *registry.Resource  { return e.res(t, "", "v1", "configmaps") }
func (e *env) deploys(t *testing.T) *registry.Resource {
	return e.res(t, "apps", "v1", "deployments")
}

// create creates obj in namespace ns and fails the test on an error.
func (e *env) create(t *testing.T, r *registry.Resource, ns string, obj runtime.Object) runtime.Object {
	t.Helper()
	out, err := e.Create(e.ctx, r, ns, obj, registry.WriteOptions{})
	if err != nil {
		t.Fatalf("create %s %s: %v", r, nameOf(obj), err)
	}
	return out
}

func (e *env) get(t *testing.T, r *registry.Resource, ns, name string) runtime.Object {
	t.Helper()
	obj, err := e.Get(e.ctx, r, ns, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get %s %s/%s: %v", r, ns, name, err)
	}
	return obj
}

func nameOf(obj runtime.Object) string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return fmt.Sprintf("%T", obj)
	}
	return m.GetName()
}

func rvOf(obj runtime.Object) string {
	m, _ := meta.Accessor(obj)
	return m.GetResourceVersion()
}

func newPod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
}

func newConfigMap(name string, labels map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Data: map[string]string{"k": "v"}}
}

func newDeployment(name string, replicas int32, containers ...string) *appsv1.Deployment {
	if len(containers) == 0 {
		containers = []string{"app"}
	}
	var cs []corev1.Container
	for _, c := range containers {
		cs = append(cs, corev1.Container{Name: c, Image: c + ":1"})
	}
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: cs},
			},
		},
	}
}

// watcher is an open registry watch whose goroutine is ended and drained
// when the test ends.
type watcher struct {
	t  *testing.T
	ch <-chan registry.WatchEvent
}

func (e *env) watch(t *testing.T, r *registry.Resource, ns string, opts metav1.ListOptions, with ...registry.ScanOption) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(e.ctx)
	ch, err := e.Watch(ctx, r, ns, opts, with...)
	if err != nil {
		cancel()
		t.Fatalf("watch %s: %v", r, err)
	}
	t.Cleanup(func() {
		cancel()
		for range ch { // the pump goroutine closes the channel when it ends
		}
	})
	return &watcher{t: t, ch: ch}
}

// next returns the next event, failing the test if none comes in time.
func (w *watcher) next() registry.WatchEvent {
	w.t.Helper()
	select {
	case ev, ok := <-w.ch:
		if !ok {
			w.t.Fatalf("watch ended while an event was expected")
		}
		return ev
	case <-time.After(wait):
		w.t.Fatalf("no watch event within %v", wait)
	}
	return registry.WatchEvent{}
}

// nextNonBookmark skips bookmarks.
func (w *watcher) nextNonBookmark() registry.WatchEvent {
	w.t.Helper()
	for {
		if ev := w.next(); ev.Type != watch.Bookmark {
			return ev
		}
	}
}

// expect checks the next non-bookmark event's type and object name.
func (w *watcher) expect(typ watch.EventType, name string) registry.WatchEvent {
	w.t.Helper()
	ev := w.nextNonBookmark()
	if ev.Type != typ || nameOf(ev.Object) != name {
		w.t.Fatalf("got event %s %s (rv %s), want %s %s", ev.Type, nameOf(ev.Object), rvOf(ev.Object), typ, name)
	}
	return ev
}

func ptr[T any](v T) *T { return &v }
