package registry_test

import (
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/isle-cluster/isle/control/registry"
)

func TestQuotaConcurrentCreates(t *testing.T) {
	e := newEnv(t)
	pods, quotas := e.pods(t), e.res(t, "", "v1", "resourcequotas")
	e.create(t, quotas, "default", &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "two"},
		Spec: corev1.ResourceQuotaSpec{Hard: list("pods", "2")}})
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range 5 {
		wg.Go(func() {
			_, errs[i] = e.Create(e.ctx, pods, "default", podWith(fmt.Sprintf("p%d", i), nil, nil), registry.WriteOptions{})
		})
	}
	wg.Wait()
	created := 0
	for _, err := range errs {
		if err == nil {
			created++
		} else {
			t.Log(err)
		}
	}
	if created != 2 {
		t.Errorf("%d pods created under a quota of 2", created)
	}
}
