package controllers_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/isle-cluster/isle/control/controllers"
	"github.com/isle-cluster/isle/control/controllers/deployment"
	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/controllers/nodelifecycle"
	"github.com/isle-cluster/isle/control/controllers/rootca"
	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/raft/rafttest"
)

const wait = 15 * time.Second

type env struct {
	*registry.Store
	ctx context.Context
}

// newEnv starts a store and every controller of the table on it; the
// controllers are stopped, and must return, when the test ends.
func newEnv(t *testing.T) *env {
	t.Helper()
	c := rafttest.NewCluster(t, rafttest.Options{Size: 1})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := registry.New(registry.Config{Node: c.Node(c.IDs()[0]), Logger: log})
	e := &env{Store: s, ctx: t.Context()}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	table := controllers.Table(s, log, controllers.WithRootCA([]byte(testCAPEM)))
	if len(table) == 0 {
		t.Fatal("empty controller table")
	}
	go func() {
		defer close(done)
		controllers.RunAll(ctx, table, log)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(wait):
			t.Errorf("controllers did not stop within %v of their context's end", wait)
		}
	})
	return e
}

func (e *env) res(t *testing.T, group, version, resource string) *registry.Resource {
	t.Helper()
	r, ok := e.Resources().Lookup(schema.GroupVersionResource{Group: group, Version: version, Resource: resource})
	if !ok {
		t.Fatalf("%s/%s %s not served", group, version, resource)
	}
	return r
}

func (e *env) create(t *testing.T, r *registry.Resource, ns string, obj runtime.Object) metav1.Object {
	t.Helper()
	out, err := e.Create(e.ctx, r, ns, obj, registry.WriteOptions{})
	if err != nil {
		t.Fatalf("create %s: %v", r, err)
	}
	m, _ := meta.Accessor(out)
	return m
}

func (e *env) namespace(t *testing.T, name string) {
	t.Helper()
	e.create(t, e.res(t, "", "v1", "namespaces"), "", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// exists reports whether an object is stored (and returns it).
func (e *env) exists(t *testing.T, r *registry.Resource, ns, name string) (metav1.Object, bool) {
	t.Helper()
	obj, err := e.Get(e.ctx, r, ns, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatalf("get %s %s/%s: %v", r, ns, name, err)
	}
	m, _ := meta.Accessor(obj)
	return m, true
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

func TestNamespaceDefaultServiceAccount(t *testing.T) {
	e := newEnv(t)
	sas := e.res(t, "", "v1", "serviceaccounts")
	for _, ns := range []string{"default", "team-a", "team-b"} {
		e.namespace(t, ns)
	}
	for _, ns := range []string{"default", "team-a", "team-b"} {
		eventually(t, "ServiceAccount "+ns+"/default exists", func() bool {
			_, ok := e.exists(t, sas, ns, "default")
			return ok
		})
	}
	// A namespace created while the controller runs gets one too, once.
	e.namespace(t, "late")
	eventually(t, "ServiceAccount late/default exists", func() bool {
		_, ok := e.exists(t, sas, "late", "default")
		return ok
	})
	list, err := e.List(e.ctx, sas, "team-a", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(list.(*corev1.ServiceAccountList).Items); n != 1 {
		t.Errorf("team-a has %d ServiceAccounts, want 1", n)
	}
}

func TestNamespaceDeletion(t *testing.T) {
	e := newEnv(t)
	nsr := e.res(t, "", "v1", "namespaces")
	cms := e.res(t, "", "v1", "configmaps")
	pods := e.res(t, "", "v1", "pods")
	deploys := e.res(t, "apps", "v1", "deployments")
	sas := e.res(t, "", "v1", "serviceaccounts")
	e.namespace(t, "doomed")
	e.namespace(t, "bystander")
	eventually(t, "ServiceAccount doomed/default exists", func() bool {
		_, ok := e.exists(t, sas, "doomed", "default")
		return ok
	})

	for _, ns := range []string{"doomed", "bystander"} {
		e.create(t, cms, ns, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}})
		e.create(t, pods, ns, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}})
		replicas := int32(0) // the test counts objects it made itself; no pods from the Deployment
		e.create(t, deploys, ns, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d"}, Spec: appsv1.DeploymentSpec{
			Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}})
	}

	_, deleted, err := e.Delete(e.ctx, nsr, "", "doomed", metav1.DeleteOptions{})
	if err != nil || deleted {
		t.Fatalf("delete namespace: deleted=%v err=%v, want a pending deletion", deleted, err)
	}
	eventually(t, "namespace doomed is removed", func() bool {
		_, ok := e.exists(t, nsr, "", "doomed")
		return !ok
	})
	eventually(t, "bystander has kube-root-ca.crt", func() bool {
		_, ok := e.exists(t, cms, "bystander", rootca.ConfigMap)
		return ok
	})
	for _, r := range []*registry.Resource{cms, pods, deploys, sas} {
		if n := e.Count(r, "doomed"); n != 0 {
			t.Errorf("%d %s left in the removed namespace", n, r)
		}
		want := 1
		if r == cms {
			want = 2 // cm and kube-root-ca.crt
		}
		if n := e.Count(r, "bystander"); n != want {
			t.Errorf("%d %s in namespace bystander, want %d", n, r, want)
		}
	}

	// The name can be used again, and the new namespace is served normally.
	e.namespace(t, "doomed")
	eventually(t, "the recreated namespace gets its ServiceAccount", func() bool {
		_, ok := e.exists(t, sas, "doomed", "default")
		return ok
	})
}

func TestNamespaceDeletionWaitsForFinalizers(t *testing.T) {
	e := newEnv(t)
	nsr := e.res(t, "", "v1", "namespaces")
	cms := e.res(t, "", "v1", "configmaps")
	e.namespace(t, "held")
	e.create(t, cms, "held", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Finalizers: []string{"example.com/hold"}}})
	if _, _, err := e.Delete(e.ctx, nsr, "", "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the controller starts deleting the held object", func() bool {
		m, ok := e.exists(t, cms, "held", "cm")
		return ok && m.GetDeletionTimestamp() != nil
	})
	ns, ok := e.exists(t, nsr, "", "held")
	if !ok {
		t.Fatal("namespace removed while an object in it is still held by a finalizer")
	}
	if ph := ns.(*corev1.Namespace).Status.Phase; ph != corev1.NamespaceTerminating {
		t.Errorf("phase %s, want Terminating", ph)
	}
	if _, err := e.Mutate(e.ctx, cms, "held", "cm", "", func(o runtime.Object) error {
		o.(*corev1.ConfigMap).Finalizers = nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The controller looks at terminating namespaces again every few
	// seconds; within the deadline the namespace goes.
	eventually(t, "namespace held is removed", func() bool {
		_, ok := e.exists(t, nsr, "", "held")
		return !ok
	})
}

func ownedBy(owner metav1.Object, kind string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "v1", Kind: kind, Name: owner.GetName(), UID: owner.GetUID()}}
}

// blockedBy is ownedBy with blockOwnerDeletion: the owner's foreground
// deletion waits for the dependent.
func blockedBy(owner metav1.Object, kind string) []metav1.OwnerReference {
	refs := ownedBy(owner, kind)
	yes := true
	refs[0].BlockOwnerDeletion = &yes
	return refs
}

func TestGarbageCollector(t *testing.T) {
	e := newEnv(t)
	cms := e.res(t, "", "v1", "configmaps")
	e.namespace(t, "default")

	cm := func(name string, refs []metav1.OwnerReference, finalizers ...string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: refs, Finalizers: finalizers}}
	}
	gone := func(name string) func() bool {
		return func() bool { _, ok := e.exists(t, cms, "default", name); return !ok }
	}

	t.Run("background", func(t *testing.T) {
		owner := e.create(t, cms, "default", cm("bg-owner", nil))
		e.create(t, cms, "default", cm("bg-dep-1", ownedBy(owner, "ConfigMap")))
		e.create(t, cms, "default", cm("bg-dep-2", ownedBy(owner, "ConfigMap")))
		other := e.create(t, cms, "default", cm("bg-other-owner", nil))
		// A dependent with a second, living owner stays.
		e.create(t, cms, "default", cm("bg-shared", append(ownedBy(owner, "ConfigMap"), ownedBy(other, "ConfigMap")...)))
		_, deleted, err := e.Delete(e.ctx, cms, "default", "bg-owner", metav1.DeleteOptions{})
		if err != nil || !deleted {
			t.Fatalf("delete owner: deleted=%v err=%v", deleted, err)
		}
		eventually(t, "bg-dep-1 is deleted", gone("bg-dep-1"))
		eventually(t, "bg-dep-2 is deleted", gone("bg-dep-2"))
		if _, ok := e.exists(t, cms, "default", "bg-shared"); !ok {
			t.Errorf("a dependent with a living owner was deleted")
		}
	})

	t.Run("owner already gone at creation", func(t *testing.T) {
		e.create(t, cms, "default", cm("orphaned-at-birth", []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "never", UID: types.UID("no-such-uid")}}))
		// No deletion happens to trigger a sweep; the next one finds it.
		if _, _, err := e.Delete(e.ctx, cms, "default", "bg-other-owner", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "orphaned-at-birth is deleted", gone("orphaned-at-birth"))
	})

	t.Run("foreground", func(t *testing.T) {
		owner := e.create(t, cms, "default", cm("fg-owner", nil))
		e.create(t, cms, "default", cm("fg-dep", blockedBy(owner, "ConfigMap"), "example.com/hold"))
		e.create(t, cms, "default", cm("fg-dep-free", blockedBy(owner, "ConfigMap")))
		// Deleted too, but its owner does not wait for it.
		e.create(t, cms, "default", cm("fg-dep-nonblocking", ownedBy(owner, "ConfigMap"), "example.com/hold"))
		fg := metav1.DeletePropagationForeground
		_, deleted, err := e.Delete(e.ctx, cms, "default", "fg-owner", metav1.DeleteOptions{PropagationPolicy: &fg})
		if err != nil || deleted {
			t.Fatalf("delete owner: deleted=%v err=%v, want a pending deletion", deleted, err)
		}
		eventually(t, "the collector deletes the dependents", func() bool {
			m, ok := e.exists(t, cms, "default", "fg-dep")
			_, free := e.exists(t, cms, "default", "fg-dep-free")
			return ok && m.GetDeletionTimestamp() != nil && !free
		})
		o, ok := e.exists(t, cms, "default", "fg-owner")
		if !ok {
			t.Fatal("owner removed while a dependent still exists")
		}
		if o.GetDeletionTimestamp() == nil || !slices.Contains(o.GetFinalizers(), metav1.FinalizerDeleteDependents) {
			t.Fatalf("owner deletionTimestamp %v finalizers %v", o.GetDeletionTimestamp(), o.GetFinalizers())
		}
		if _, err := e.Mutate(e.ctx, cms, "default", "fg-dep", "", func(o runtime.Object) error {
			m, _ := meta.Accessor(o)
			m.SetFinalizers(slices.DeleteFunc(m.GetFinalizers(), func(f string) bool { return f == "example.com/hold" }))
			return nil
		}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		eventually(t, "fg-dep is removed", gone("fg-dep"))
		eventually(t, "fg-owner is removed after its blocking dependents", gone("fg-owner"))
		if m, ok := e.exists(t, cms, "default", "fg-dep-nonblocking"); !ok || m.GetDeletionTimestamp() == nil {
			t.Errorf("the non-blocking dependent: present %v, being deleted %v; want both", ok, ok && m.GetDeletionTimestamp() != nil)
		}
	})

	t.Run("a circle of owners", func(t *testing.T) {
		// c1 is owned by c3, c2 by c1, c3 by c2, all blocking: deleting
		// c1 in the foreground removes all three (upstream's "should not
		// be blocked by dependency circle").
		c := []metav1.Object{e.create(t, cms, "default", cm("circle-1", nil)), e.create(t, cms, "default", cm("circle-2", nil)),
			e.create(t, cms, "default", cm("circle-3", nil))}
		for i, owner := range []int{2, 0, 1} {
			if _, err := e.Mutate(e.ctx, cms, "default", c[i].GetName(), "", func(o runtime.Object) error {
				m, _ := meta.Accessor(o)
				m.SetOwnerReferences(blockedBy(c[owner], "ConfigMap"))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		fg := metav1.DeletePropagationForeground
		if _, _, err := e.Delete(e.ctx, cms, "default", "circle-1", metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"circle-1", "circle-2", "circle-3"} {
			eventually(t, n+" is removed", gone(n))
		}
	})

	t.Run("orphan", func(t *testing.T) {
		owner := e.create(t, cms, "default", cm("or-owner", nil))
		keep := e.create(t, cms, "default", cm("or-other", nil))
		e.create(t, cms, "default", cm("or-dep", append(ownedBy(owner, "ConfigMap"), ownedBy(keep, "ConfigMap")...)))
		orphan := metav1.DeletePropagationOrphan
		if _, _, err := e.Delete(e.ctx, cms, "default", "or-owner", metav1.DeleteOptions{PropagationPolicy: &orphan}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "or-owner is removed", gone("or-owner"))
		dep, ok := e.exists(t, cms, "default", "or-dep")
		if !ok {
			t.Fatal("orphan deletion deleted the dependent")
		}
		refs := dep.GetOwnerReferences()
		if len(refs) != 1 || refs[0].UID != keep.GetUID() {
			t.Fatalf("dependent's ownerReferences %+v, want only the one to or-other", refs)
		}
		if dep.GetDeletionTimestamp() != nil {
			t.Fatalf("orphaned dependent is being deleted")
		}
	})

	t.Run("cluster-scoped owner", func(t *testing.T) {
		nsr := e.res(t, "", "v1", "namespaces")
		e.namespace(t, "owner-ns")
		ns, _ := e.exists(t, nsr, "", "owner-ns")
		e.create(t, cms, "default", cm("ns-dep", ownedBy(ns, "Namespace")))
		// A sweep (which the sentinel's removal proves) leaves the dependent
		// of a living cluster-scoped owner alone.
		e.create(t, cms, "default", cm("ns-sentinel", []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "never", UID: types.UID("no-such-uid-2")}}))
		e.create(t, cms, "default", cm("ns-trigger", nil))
		if _, _, err := e.Delete(e.ctx, cms, "default", "ns-trigger", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "a sweep removes the sentinel", gone("ns-sentinel"))
		if _, ok := e.exists(t, cms, "default", "ns-dep"); !ok {
			t.Fatal("the dependent of a living Namespace was deleted")
		}
		// Then the owner goes, and so does its dependent.
		if _, _, err := e.Delete(e.ctx, nsr, "", "owner-ns", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "ns-dep is deleted after its namespace owner", gone("ns-dep"))
	})
}

func TestDeploymentInTable(t *testing.T) {
	c := rafttest.NewCluster(t, rafttest.Options{Size: 1})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := registry.New(registry.Config{Node: c.Node(c.IDs()[0]), Logger: log})
	for _, ctrl := range controllers.Table(s, log) {
		if ctrl.Name() == "deployment" {
			if _, ok := ctrl.(*deployment.Controller); !ok {
				t.Fatalf("the table's deployment controller is a %T", ctrl)
			}
			return
		}
	}
	t.Fatal("no deployment controller in the table")
}

// TestTableNodeLifecycle: the node lifecycle controller is in the table,
// last, when the table is given the boards' liveness, and not otherwise.
func TestTableNodeLifecycle(t *testing.T) {
	c := rafttest.NewCluster(t, rafttest.Options{Size: 1})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := registry.New(registry.Config{Node: c.Node(c.IDs()[0]), Logger: log})
	names := func(table []kit.Controller) []string {
		var out []string
		for _, c := range table {
			out = append(out, c.Name())
		}
		return out
	}
	if got := names(controllers.Table(s, log)); slices.Contains(got, "nodelifecycle") {
		t.Fatalf("node lifecycle controller in a table without liveness: %v", got)
	}
	got := names(controllers.Table(s, log, controllers.WithNodeLifecycle(&fakeLiveness{}, nodelifecycle.Config{})))
	if got[len(got)-1] != "nodelifecycle" {
		t.Fatalf("table %v; want the node lifecycle controller last", got)
	}
}
