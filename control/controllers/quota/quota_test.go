package quota_test

import (
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/isle-cluster/isle/control/controllers/internal/tabletest"
	"github.com/isle-cluster/isle/control/quota"
	"github.com/isle-cluster/isle/control/registry"
)

// TestQuotaStatus: the controller counts a quota's use from the objects
// of its namespace, and counts again as they come and go.
func TestQuotaStatus(t *testing.T) {
	e := tabletest.New(t)
	e.Namespace(t, "class")
	pods, quotas, cms := e.Res(t, "", "v1", "pods"), e.Res(t, "", "v1", "resourcequotas"), e.Res(t, "", "v1", "configmaps")
	pod := func(name, cpu string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}}
	}
	// Objects from before the quota count.
	e.MustCreate(t, pods, "class", pod("a", "200m"))
	e.MustCreate(t, cms, "class", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "one"}})
	e.MustCreate(t, quotas, "class", &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "student"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"pods": resource.MustParse("5"), "requests.cpu": resource.MustParse("2"),
			"count/configmaps": resource.MustParse("4"), "services": resource.MustParse("2")}}})
	used := func(want string) {
		t.Helper()
		var got string
		tabletest.Eventually(t, "used "+want, func() bool {
			obj, err := e.Get(e.Ctx, quotas, "class", "student", metav1.GetOptions{})
			if err != nil {
				return false
			}
			q := obj.(*corev1.ResourceQuota)
			got = quota.String(q.Status.Used)
			return got == want && quota.String(q.Status.Hard) == quota.String(q.Spec.Hard)
		})
	}
	// The namespace's kube-root-ca.crt is a config map too.
	used("count/configmaps=2,pods=1,requests.cpu=200m,services=0")
	e.MustCreate(t, pods, "class", pod("b", "300m"))
	used("count/configmaps=2,pods=2,requests.cpu=500m,services=0")
	// A pod that finished no longer counts.
	if _, err := e.Mutate(e.Ctx, pods, "class", "a", "status", func(o runtime.Object) error {
		o.(*corev1.Pod).Status.Phase = corev1.PodSucceeded
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	used("count/configmaps=2,pods=1,requests.cpu=300m,services=0")
	if _, _, err := e.Delete(e.Ctx, cms, "class", "one", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	used("count/configmaps=1,pods=1,requests.cpu=300m,services=0")
}

// TestQuotaHoldsUnderConcurrentCreates: creates racing each other and the
// controller's recounts never pass a quota.
func TestQuotaHoldsUnderConcurrentCreates(t *testing.T) {
	e := tabletest.New(t)
	e.Namespace(t, "class")
	pods, quotas := e.Res(t, "", "v1", "pods"), e.Res(t, "", "v1", "resourcequotas")
	for round := range 3 {
		name := fmt.Sprintf("two-%d", round)
		ns := fmt.Sprintf("class-%d", round)
		e.Namespace(t, ns)
		e.MustCreate(t, quotas, ns, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"pods": resource.MustParse("2")}}})
		var wg sync.WaitGroup
		var mu sync.Mutex
		created := 0
		for i := range 6 {
			wg.Go(func() {
				_, err := e.Create(e.Ctx, pods, ns, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i)},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}}}, registry.WriteOptions{})
				if err == nil {
					mu.Lock()
					created++
					mu.Unlock()
				} else if !apierrors.IsForbidden(err) {
					t.Errorf("create: %v", err)
				}
			})
		}
		wg.Wait()
		if created != 2 {
			t.Errorf("round %d: %d pods created under a quota of 2", round, created)
		}
	}
}
