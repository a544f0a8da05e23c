package rootca_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/isle-cluster/isle/control/controllers/internal/tabletest"
	"github.com/isle-cluster/isle/control/controllers/rootca"
)

func TestRootCAPublished(t *testing.T) {
	e := tabletest.New(t)
	cms := e.Res(t, "", "v1", "configmaps")
	published := func(ns string) func() bool {
		return func() bool {
			obj, err := e.Get(e.Ctx, cms, ns, rootca.ConfigMap, metav1.GetOptions{})
			if err != nil {
				return false
			}
			cm := obj.(*corev1.ConfigMap)
			return len(cm.Data) == 1 && cm.Data["ca.crt"] == tabletest.TestCAPEM
		}
	}
	e.Namespace(t, "team-a")
	tabletest.Eventually(t, "team-a has kube-root-ca.crt", published("team-a"))

	// Changed by someone: put back.
	if _, err := e.Mutate(e.Ctx, cms, "team-a", rootca.ConfigMap, "", func(o runtime.Object) error {
		o.(*corev1.ConfigMap).Data = map[string]string{"ca.crt": "mine", "extra": "x"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	tabletest.Eventually(t, "team-a's kube-root-ca.crt is restored", published("team-a"))

	// Deleted: made again.
	if _, _, err := e.Delete(e.Ctx, cms, "team-a", rootca.ConfigMap, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	tabletest.Eventually(t, "team-a's kube-root-ca.crt is made again", published("team-a"))

	// Other ConfigMaps are left alone.
	e.MustCreate(t, cms, "team-a", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Data: map[string]string{"ca.crt": "not ours"}})
	obj, err := e.Get(e.Ctx, cms, "team-a", "app", metav1.GetOptions{})
	if err != nil || obj.(*corev1.ConfigMap).Data["ca.crt"] != "not ours" {
		t.Fatalf("app ConfigMap changed: %v %v", obj, err)
	}
}
