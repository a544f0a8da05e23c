package namespace_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/isle-cluster/isle/control/controllers/internal/tabletest"
	"github.com/isle-cluster/isle/control/controllers/rootca"
	"github.com/isle-cluster/isle/control/registry"
)

func TestNamespaceDefaultServiceAccount(t *testing.T) {
	e := tabletest.New(t)
	sas := e.Res(t, "", "v1", "serviceaccounts")
	for _, ns := range []string{"default", "team-a", "team-b"} {
		e.Namespace(t, ns)
	}
	for _, ns := range []string{"default", "team-a", "team-b"} {
		tabletest.Eventually(t, "ServiceAccount "+ns+"/default exists", func() bool {
			_, ok := e.Exists(t, sas, ns, "default")
			return ok
		})
	}
	// A namespace created while the controller runs gets one too, once.
	e.Namespace(t, "late")
	tabletest.Eventually(t, "ServiceAccount late/default exists", func() bool {
		_, ok := e.Exists(t, sas, "late", "default")
		return ok
	})
	list, err := e.List(e.Ctx, sas, "team-a", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(list.(*corev1.ServiceAccountList).Items); n != 1 {
		t.Errorf("team-a has %d ServiceAccounts, want 1", n)
	}
}

func TestNamespaceDeletion(t *testing.T) {
	e := tabletest.New(t)
	nsr := e.Res(t, "", "v1", "namespaces")
	cms := e.Res(t, "", "v1", "configmaps")
	pods := e.Res(t, "", "v1", "pods")
	deploys := e.Res(t, "apps", "v1", "deployments")
	sas := e.Res(t, "", "v1", "serviceaccounts")
	e.Namespace(t, "doomed")
	e.Namespace(t, "bystander")
	tabletest.Eventually(t, "ServiceAccount doomed/default exists", func() bool {
		_, ok := e.Exists(t, sas, "doomed", "default")
		return ok
	})

	for _, ns := range []string{"doomed", "bystander"} {
		e.MustCreate(t, cms, ns, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}})
		e.MustCreate(t, pods, ns, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}})
		replicas := int32(0) // the test counts objects it made itself; no pods from the Deployment
		e.MustCreate(t, deploys, ns, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d"}, Spec: appsv1.DeploymentSpec{
			Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}})
	}

	_, deleted, err := e.Delete(e.Ctx, nsr, "", "doomed", metav1.DeleteOptions{})
	if err != nil || deleted {
		t.Fatalf("delete namespace: deleted=%v err=%v, want a pending deletion", deleted, err)
	}
	tabletest.Eventually(t, "namespace doomed is removed", func() bool {
		_, ok := e.Exists(t, nsr, "", "doomed")
		return !ok
	})
	tabletest.Eventually(t, "bystander has kube-root-ca.crt", func() bool {
		_, ok := e.Exists(t, cms, "bystander", rootca.ConfigMap)
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
	e.Namespace(t, "doomed")
	tabletest.Eventually(t, "the recreated namespace gets its ServiceAccount", func() bool {
		_, ok := e.Exists(t, sas, "doomed", "default")
		return ok
	})
}

func TestNamespaceDeletionWaitsForFinalizers(t *testing.T) {
	e := tabletest.New(t)
	nsr := e.Res(t, "", "v1", "namespaces")
	cms := e.Res(t, "", "v1", "configmaps")
	e.Namespace(t, "held")
	e.MustCreate(t, cms, "held", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Finalizers: []string{"example.com/hold"}}})
	if _, _, err := e.Delete(e.Ctx, nsr, "", "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	tabletest.Eventually(t, "the controller starts deleting the held object", func() bool {
		m, ok := e.Exists(t, cms, "held", "cm")
		return ok && m.GetDeletionTimestamp() != nil
	})
	ns, ok := e.Exists(t, nsr, "", "held")
	if !ok {
		t.Fatal("namespace removed while an object in it is still held by a finalizer")
	}
	if ph := ns.(*corev1.Namespace).Status.Phase; ph != corev1.NamespaceTerminating {
		t.Errorf("phase %s, want Terminating", ph)
	}
	if _, err := e.Mutate(e.Ctx, cms, "held", "cm", "", func(o runtime.Object) error {
		o.(*corev1.ConfigMap).Finalizers = nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The controller looks at terminating namespaces again every few
	// seconds; within the deadline the namespace goes.
	tabletest.Eventually(t, "namespace held is removed", func() bool {
		_, ok := e.Exists(t, nsr, "", "held")
		return !ok
	})
}
