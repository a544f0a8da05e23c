package openapi_test

import (
	"runtime"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"testing"
	"time"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/isle-cluster/isle/control/registry"
)

func TestExpSSA(t *testing.T) {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	start := time.Now()
	models := servedModels(t)
	tc, err := managedfields.NewTypeConverter(models, false)
	if err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	models = nil
	runtime.GC()
	runtime.ReadMemStats(&m1)
	t.Logf("type converter: %v, heap +%d KiB", el, (int64(m1.HeapAlloc)-int64(m0.HeapAlloc))>>10)
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	fm, err := managedfields.NewDefaultFieldManager(tc, registry.Scheme, nopDefaulter{}, registry.Scheme, gvk, gvk.GroupVersion(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Labels: map[string]string{"app": "x"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox", Ports: []corev1.ContainerPort{{ContainerPort: 80, Protocol: "TCP"}}, ImagePullPolicy: "Always", TerminationMessagePath: "/dev/termination-log"}},
			RestartPolicy: "Always", DNSPolicy: "ClusterFirst", SchedulerName: "default-scheduler"}}
	live := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}}
	start = time.Now()
	n := 200
	var out *corev1.Pod
	for i := 0; i < n; i++ {
		o := fm.UpdateNoErrors(live, pod.DeepCopy(), "kube-controller-manager")
		out = o.(*corev1.Pod)
	}
	t.Logf("UpdateNoErrors: %v each", time.Since(start)/time.Duration(n))
	b, _ := json.Marshal(out.ManagedFields)
	t.Logf("managedFields %d bytes: %s", len(b), b)
}

type nopDefaulter struct{}

func (nopDefaulter) Default(kruntime.Object) {}
