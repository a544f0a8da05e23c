package gc_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/isle-cluster/isle/control/controllers/internal/tabletest"
)

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
	e := tabletest.New(t)
	cms := e.Res(t, "", "v1", "configmaps")
	e.Namespace(t, "default")

	cm := func(name string, refs []metav1.OwnerReference, finalizers ...string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: refs, Finalizers: finalizers}}
	}
	gone := func(name string) func() bool {
		return func() bool { _, ok := e.Exists(t, cms, "default", name); return !ok }
	}

	t.Run("background", func(t *testing.T) {
		owner := e.MustCreate(t, cms, "default", cm("bg-owner", nil))
		e.MustCreate(t, cms, "default", cm("bg-dep-1", ownedBy(owner, "ConfigMap")))
		e.MustCreate(t, cms, "default", cm("bg-dep-2", ownedBy(owner, "ConfigMap")))
		other := e.MustCreate(t, cms, "default", cm("bg-other-owner", nil))
		// A dependent with a second, living owner stays.
		e.MustCreate(t, cms, "default", cm("bg-shared", append(ownedBy(owner, "ConfigMap"), ownedBy(other, "ConfigMap")...)))
		_, deleted, err := e.Delete(e.Ctx, cms, "default", "bg-owner", metav1.DeleteOptions{})
		if err != nil || !deleted {
			t.Fatalf("delete owner: deleted=%v err=%v", deleted, err)
		}
		tabletest.Eventually(t, "bg-dep-1 is deleted", gone("bg-dep-1"))
		tabletest.Eventually(t, "bg-dep-2 is deleted", gone("bg-dep-2"))
		if _, ok := e.Exists(t, cms, "default", "bg-shared"); !ok {
			t.Errorf("a dependent with a living owner was deleted")
		}
	})

	t.Run("owner already gone at creation", func(t *testing.T) {
		e.MustCreate(t, cms, "default", cm("orphaned-at-birth", []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "never", UID: types.UID("no-such-uid")}}))
		// No deletion happens to trigger a sweep; the next one finds it.
		if _, _, err := e.Delete(e.Ctx, cms, "default", "bg-other-owner", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		tabletest.Eventually(t, "orphaned-at-birth is deleted", gone("orphaned-at-birth"))
	})

	t.Run("foreground", func(t *testing.T) {
		owner := e.MustCreate(t, cms, "default", cm("fg-owner", nil))
		e.MustCreate(t, cms, "default", cm("fg-dep", blockedBy(owner, "ConfigMap"), "example.com/hold"))
		e.MustCreate(t, cms, "default", cm("fg-dep-free", blockedBy(owner, "ConfigMap")))
		// Deleted too, but its owner does not tabletest.Wait for it.
		e.MustCreate(t, cms, "default", cm("fg-dep-nonblocking", ownedBy(owner, "ConfigMap"), "example.com/hold"))
		fg := metav1.DeletePropagationForeground
		_, deleted, err := e.Delete(e.Ctx, cms, "default", "fg-owner", metav1.DeleteOptions{PropagationPolicy: &fg})
		if err != nil || deleted {
			t.Fatalf("delete owner: deleted=%v err=%v, want a pending deletion", deleted, err)
		}
		tabletest.Eventually(t, "the collector deletes the dependents", func() bool {
			m, ok := e.Exists(t, cms, "default", "fg-dep")
			_, free := e.Exists(t, cms, "default", "fg-dep-free")
			return ok && m.GetDeletionTimestamp() != nil && !free
		})
		o, ok := e.Exists(t, cms, "default", "fg-owner")
		if !ok {
			t.Fatal("owner removed while a dependent still exists")
		}
		if o.GetDeletionTimestamp() == nil || !slices.Contains(o.GetFinalizers(), metav1.FinalizerDeleteDependents) {
			t.Fatalf("owner deletionTimestamp %v finalizers %v", o.GetDeletionTimestamp(), o.GetFinalizers())
		}
		if _, err := e.Mutate(e.Ctx, cms, "default", "fg-dep", "", func(o runtime.Object) error {
			m, _ := meta.Accessor(o)
			m.SetFinalizers(slices.DeleteFunc(m.GetFinalizers(), func(f string) bool { return f == "example.com/hold" }))
			return nil
		}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		tabletest.Eventually(t, "fg-dep is removed", gone("fg-dep"))
		tabletest.Eventually(t, "fg-owner is removed after its blocking dependents", gone("fg-owner"))
		if m, ok := e.Exists(t, cms, "default", "fg-dep-nonblocking"); !ok || m.GetDeletionTimestamp() == nil {
			t.Errorf("the non-blocking dependent: present %v, being deleted %v; want both", ok, ok && m.GetDeletionTimestamp() != nil)
		}
	})

	t.Run("foreground, a dependent another owner keeps", func(t *testing.T) {
		// Upstream's "should not delete dependents that have both valid
		// owner and owner that's waiting for dependents to be deleted".
		owner := e.MustCreate(t, cms, "default", cm("fgk-owner", nil))
		keeper := e.MustCreate(t, cms, "default", cm("fgk-keeper", nil))
		e.MustCreate(t, cms, "default", cm("fgk-shared", append(blockedBy(owner, "ConfigMap"), ownedBy(keeper, "ConfigMap")...)))
		e.MustCreate(t, cms, "default", cm("fgk-own", blockedBy(owner, "ConfigMap")))
		fg := metav1.DeletePropagationForeground
		if _, _, err := e.Delete(e.Ctx, cms, "default", "fgk-owner", metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
			t.Fatal(err)
		}
		tabletest.Eventually(t, "fgk-owner is removed", gone("fgk-owner"))
		tabletest.Eventually(t, "fgk-own is removed", gone("fgk-own"))
		m, ok := e.Exists(t, cms, "default", "fgk-shared")
		if !ok || m.GetDeletionTimestamp() != nil || len(m.GetOwnerReferences()) != 1 || m.GetOwnerReferences()[0].UID != keeper.GetUID() {
			t.Fatalf("the shared dependent: present %v, want it kept with its keeper alone as owner (%+v)", ok, m)
		}
	})

	t.Run("a circle of owners", func(t *testing.T) {
		// c1 is owned by c3, c2 by c1, c3 by c2, all blocking: deleting
		// c1 in the foreground removes all three (upstream's "should not
		// be blocked by dependency circle").
		c := []metav1.Object{e.MustCreate(t, cms, "default", cm("circle-1", nil)), e.MustCreate(t, cms, "default", cm("circle-2", nil)),
			e.MustCreate(t, cms, "default", cm("circle-3", nil))}
		for i, owner := range []int{2, 0, 1} {
			if _, err := e.Mutate(e.Ctx, cms, "default", c[i].GetName(), "", func(o runtime.Object) error {
				m, _ := meta.Accessor(o)
				m.SetOwnerReferences(blockedBy(c[owner], "ConfigMap"))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		fg := metav1.DeletePropagationForeground
		if _, _, err := e.Delete(e.Ctx, cms, "default", "circle-1", metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"circle-1", "circle-2", "circle-3"} {
			tabletest.Eventually(t, n+" is removed", gone(n))
		}
	})

	t.Run("orphan", func(t *testing.T) {
		owner := e.MustCreate(t, cms, "default", cm("or-owner", nil))
		keep := e.MustCreate(t, cms, "default", cm("or-other", nil))
		e.MustCreate(t, cms, "default", cm("or-dep", append(ownedBy(owner, "ConfigMap"), ownedBy(keep, "ConfigMap")...)))
		orphan := metav1.DeletePropagationOrphan
		if _, _, err := e.Delete(e.Ctx, cms, "default", "or-owner", metav1.DeleteOptions{PropagationPolicy: &orphan}); err != nil {
			t.Fatal(err)
		}
		tabletest.Eventually(t, "or-owner is removed", gone("or-owner"))
		dep, ok := e.Exists(t, cms, "default", "or-dep")
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
		nsr := e.Res(t, "", "v1", "namespaces")
		e.Namespace(t, "owner-ns")
		ns, _ := e.Exists(t, nsr, "", "owner-ns")
		e.MustCreate(t, cms, "default", cm("ns-dep", ownedBy(ns, "Namespace")))
		// A sweep (which the sentinel's removal proves) leaves the dependent
		// of a living cluster-scoped owner alone.
		e.MustCreate(t, cms, "default", cm("ns-sentinel", []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "never", UID: types.UID("no-such-uid-2")}}))
		e.MustCreate(t, cms, "default", cm("ns-trigger", nil))
		if _, _, err := e.Delete(e.Ctx, cms, "default", "ns-trigger", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		tabletest.Eventually(t, "a sweep removes the sentinel", gone("ns-sentinel"))
		if _, ok := e.Exists(t, cms, "default", "ns-dep"); !ok {
			t.Fatal("the dependent of a living Namespace was deleted")
		}
		// Then the owner goes, and so does its dependent.
		if _, _, err := e.Delete(e.Ctx, nsr, "", "owner-ns", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		tabletest.Eventually(t, "ns-dep is deleted after its namespace owner", gone("ns-dep"))
	})
}
