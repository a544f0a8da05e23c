package registry_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/isle-cluster/isle/control/registry"
)

// TestWatchChanges: every stored object's changes after the watch opened
// come with the metadata parsed from the object, a deletion with the
// object's metadata as last stored.
func TestWatchChanges(t *testing.T) {
	e := newEnv(t)
	cms := e.res(t, "", "v1", "configmaps")
	before := e.Revision()
	if _, err := e.Create(e.ctx, cms, "default", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "old"}}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if e.Revision() <= before {
		t.Fatalf("revision %d after a create, %d before", e.Revision(), before)
	}
	changes, err := e.WatchChanges(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := func() registry.Change {
		t.Helper()
		select {
		case batch, ok := <-changes:
			if !ok || len(batch) != 1 {
				t.Fatalf("batch %v, open %v; want one change", batch, ok)
			}
			return batch[0]
		case <-time.After(wait):
			t.Fatal("no change")
		}
		return registry.Change{}
	}
	yes := true
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "old", UID: "owner-uid", Controller: &yes}
	out, err := e.Create(e.ctx, cms, "default", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "new",
		OwnerReferences: []metav1.OwnerReference{owner}, Finalizers: []string{"test.isle.dev/hold"}}}, registry.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	uid := out.(*corev1.ConfigMap).UID
	c := next()
	if c.Deleted || c.Meta.Name != "new" || c.Meta.Namespace != "default" || c.Meta.UID != uid ||
		len(c.Meta.OwnerReferences) != 1 || c.Meta.OwnerReferences[0].UID != "owner-uid" || c.Meta.DeletionTimestamp != nil {
		t.Fatalf("create: %+v", c)
	}
	if _, _, err := e.Delete(e.ctx, cms, "default", "new", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if c := next(); c.Deleted || c.Meta.DeletionTimestamp == nil {
		t.Fatalf("delete held by a finalizer: %+v; want a deletionTimestamp", c)
	}
	if _, err := e.Mutate(e.ctx, cms, "default", "new", "", func(obj runtime.Object) error {
		obj.(*corev1.ConfigMap).Finalizers = nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if c := next(); !c.Deleted || c.Meta.UID != uid || c.Meta.DeletionTimestamp == nil {
		t.Fatalf("finalizer removed: %+v; want the deletion, with the object as last stored", c)
	}
}
