package ctltest

import (
	"context"
	"maps"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/registry"
)

// Workload is an Env for the tests of a controller of pods on nodes
// (DaemonSet, Job): no node agent runs; a Kubelet plays one where a test
// needs it, and the controller reports its syncs to Synced.
type Workload struct {
	*Env
	T           *testing.T
	Ctx         context.Context
	Pods, Nodes *registry.Resource

	mu     sync.Mutex
	synced map[string]int64 // by key: the highest revision a finished sync began at
}

// NewWorkload starts a Workload's Env.
func NewWorkload(t *testing.T) *Workload {
	t.Helper()
	env := New(t, nil)
	return &Workload{Env: env, T: t, Ctx: t.Context(), synced: map[string]int64{},
		Pods:  kit.MustLookup(env.Store, corev1.SchemeGroupVersion.WithResource("pods")),
		Nodes: kit.MustLookup(env.Store, corev1.SchemeGroupVersion.WithResource("nodes"))}
}

// Synced is the controller's report of a finished sync of key that began
// at store revision rev.
func (w *Workload) Synced(key string, rev int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.synced[key] = max(w.synced[key], rev)
}

// Eventually fails the test unless cond holds within Wait.
func (w *Workload) Eventually(what string, cond func() bool) {
	w.T.Helper()
	deadline := time.Now().Add(Wait)
	for !cond() {
		if time.Now().After(deadline) {
			w.T.Fatalf("%s: not true within %v", what, Wait)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Settle pokes the object name of res (a change of an annotation) and
// waits until the controller has synced key in a sync that began after
// the poke, so after every write of the test before it: what the test
// sees then is the controller's answer to all of them. (Writes of others
// after the poke, Events say, need no sync.)
func (w *Workload) Settle(key string, res *registry.Resource, name string) {
	w.T.Helper()
	var rev int64
	out, err := w.Store.Mutate(w.Ctx, res, "default", name, "", func(obj runtime.Object) error {
		m, _ := obj.(metav1.Object)
		a := maps.Clone(m.GetAnnotations())
		if a == nil {
			a = map[string]string{}
		}
		n, _ := strconv.Atoi(a["test.isle.dev/poke"])
		a["test.isle.dev/poke"] = strconv.Itoa(n + 1)
		m.SetAnnotations(a)
		return nil
	})
	if err == nil {
		m, _ := out.(metav1.Object)
		rev, err = strconv.ParseInt(m.GetResourceVersion(), 10, 64)
	}
	if err != nil {
		w.T.Fatalf("poke %s %s: %v", res, name, err)
	}
	w.Eventually("a sync of "+key+" after revision "+strconv.FormatInt(rev, 10), func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.synced[key] >= rev
	})
}

// HasEvent reports whether an Event about the object of kind and name
// has the reason and message.
func (w *Workload) HasEvent(kind, name, eventType, reason, message string) bool {
	w.T.Helper()
	list, err := w.Store.List(w.Ctx, kit.MustLookup(w.Store, corev1.SchemeGroupVersion.WithResource("events")), "default", metav1.ListOptions{})
	if err != nil {
		w.T.Fatal(err)
	}
	for _, ev := range list.(*corev1.EventList).Items {
		o := ev.InvolvedObject
		if o.Kind == kind && o.Name == name && ev.Type == eventType && ev.Reason == reason && ev.Message == message {
			return true
		}
	}
	return false
}

// Node creates a Node.
func (w *Workload) Node(name string, lbls map[string]string, taints ...corev1.Taint) {
	w.T.Helper()
	if _, err := w.Store.Create(w.Ctx, w.Nodes, "", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Spec: corev1.NodeSpec{Taints: taints}}, registry.WriteOptions{}); err != nil {
		w.T.Fatalf("create node %s: %v", name, err)
	}
}

// MutateNode changes a Node.
func (w *Workload) MutateNode(name string, change func(*corev1.Node)) {
	w.T.Helper()
	if _, err := w.Store.Mutate(w.Ctx, w.Nodes, "", name, "", func(o runtime.Object) error {
		change(o.(*corev1.Node))
		return nil
	}); err != nil {
		w.T.Fatalf("update node %s: %v", name, err)
	}
}

// PodList returns the pods of namespace default.
func (w *Workload) PodList() []*corev1.Pod {
	w.T.Helper()
	list, err := w.Store.List(w.Ctx, w.Pods, "default", metav1.ListOptions{})
	if err != nil {
		w.T.Fatal(err)
	}
	var out []*corev1.Pod
	for i := range list.(*corev1.PodList).Items {
		out = append(out, &list.(*corev1.PodList).Items[i])
	}
	return out
}

// PodStatus changes a pod's status.
func (w *Workload) PodStatus(p *corev1.Pod, change func(*corev1.Pod)) {
	w.T.Helper()
	if _, err := w.Store.Mutate(w.Ctx, w.Pods, p.Namespace, p.Name, "status", func(o runtime.Object) error {
		change(o.(*corev1.Pod))
		return nil
	}); err != nil {
		w.T.Fatalf("update status of pod %s: %v", p.Name, err)
	}
}

// Kubelet plays the node agent for pods bound to nodes: a pod starts
// Running, and is Ready when ready says so (nil: always); a pod being
// deleted is stopped at once (deleted with grace 0, as a kubelet does once
// its containers are gone). Stopped, it does nothing.
type Kubelet struct {
	w       *Workload
	mu      sync.Mutex
	ready   func(*corev1.Pod) bool
	stopped bool
}

// StartKubelet starts a Kubelet until the test ends.
func (w *Workload) StartKubelet() *Kubelet {
	k := &Kubelet{w: w}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	w.T.Cleanup(func() {
		cancel()
		<-done
	})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			events, err := w.Store.Watch(ctx, w.Pods, "", metav1.ListOptions{})
			if err != nil {
				kit.Sleep(ctx, 10*time.Millisecond)
				continue
			}
			for ev := range events {
				if pod, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Deleted {
					k.handle(ctx, pod)
				}
			}
		}
	}()
	return k
}

// SetReady changes which pods are ready and applies it to every pod.
func (k *Kubelet) SetReady(ready func(*corev1.Pod) bool) {
	k.mu.Lock()
	k.ready = ready
	k.mu.Unlock()
	for _, pod := range k.w.PodList() {
		k.handle(k.w.Ctx, pod)
	}
}

// Stop makes the Kubelet do nothing from now on.
func (k *Kubelet) Stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopped = true
}

func (k *Kubelet) handle(ctx context.Context, pod *corev1.Pod) {
	k.mu.Lock()
	ready, stopped := k.ready, k.stopped
	k.mu.Unlock()
	if stopped || pod.Spec.NodeName == "" || kit.PodFinished(pod) {
		return
	}
	// Errors are left alone: the pod changed or went meanwhile, and its
	// next event brings it back here.
	s := k.w.Store
	if pod.DeletionTimestamp != nil {
		zero, uid := int64(0), pod.UID
		s.Delete(ctx, k.w.Pods, pod.Namespace, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
		return
	}
	want := ready == nil || ready(pod)
	if pod.Status.Phase == corev1.PodRunning && kit.PodReady(pod) == want {
		return
	}
	s.Mutate(ctx, k.w.Pods, pod.Namespace, pod.Name, "status", func(o runtime.Object) error {
		p := o.(*corev1.Pod)
		if p.UID != pod.UID || kit.PodFinished(p) {
			return kit.ErrClaimSkip
		}
		p.Status.Phase = corev1.PodRunning
		SetReady(p, want, time.Now())
		return nil
	})
}

// Ptr is a pointer to a copy of v.
func Ptr[T any](v T) *T { return &v }
