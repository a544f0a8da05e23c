package registry_test

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestScanMeta: the light read of every object's metadata gives what the
// garbage collector follows objects by, as a full read does, and nothing
// of their spec or managed fields.
func TestScanMeta(t *testing.T) {
	e := newEnv(t)
	pods := e.pods(t)
	owner := e.create(t, e.deploys(t), "default", newDeployment("web", 1, "app"))
	om, _ := owner.(metav1.Object)
	p := newPod("a", map[string]string{"app": "web"})
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: om.GetUID(), Controller: ptr(true)}}
	p.Finalizers = []string{"example.com/keep"}
	p.Annotations = map[string]string{"note": "big"}
	e.create(t, pods, "default", p)
	e.create(t, pods, "default", newPod("b", nil))

	var got []*metav1.PartialObjectMetadata
	if err := e.ScanMeta(e.ctx, pods, "default", func(m *metav1.PartialObjectMetadata) error {
		got = append(got, m)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "a" || got[1].Name != "b" {
		t.Fatalf("ScanMeta: %v, want pods a and b in key order", got)
	}
	full := e.get(t, pods, "default", "a").(metav1.Object)
	a := got[0]
	switch {
	case a.UID != full.GetUID() || a.Namespace != "default" || a.ResourceVersion != full.GetResourceVersion():
		t.Errorf("identity: uid %s ns %s rv %s, want %s default %s", a.UID, a.Namespace, a.ResourceVersion, full.GetUID(), full.GetResourceVersion())
	case a.Labels["app"] != "web" || !slices.Equal(a.Finalizers, p.Finalizers):
		t.Errorf("labels %v finalizers %v", a.Labels, a.Finalizers)
	case len(a.OwnerReferences) != 1 || a.OwnerReferences[0].UID != om.GetUID() || a.OwnerReferences[0].Controller == nil:
		t.Errorf("owners %v", a.OwnerReferences)
	case a.Annotations != nil || a.ManagedFields != nil:
		t.Errorf("decoded more than it needs: annotations %v, managed fields %v", a.Annotations, a.ManagedFields)
	}
	var all int
	if err := e.ScanMeta(e.ctx, pods, "", func(*metav1.PartialObjectMetadata) error { all++; return nil }); err != nil || all != 2 {
		t.Errorf("every namespace: %d objects, %v", all, err)
	}
}
