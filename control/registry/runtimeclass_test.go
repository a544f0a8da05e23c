package registry_test

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/isle-cluster/isle/control/registry"
)

// A pod's RuntimeClass must exist; its overhead and scheduling are merged
// into the pod, as Kubernetes' RuntimeClass admission does.
func TestPodRuntimeClassAdmission(t *testing.T) {
	e := newEnv(t)
	pods := e.res(t, "", "v1", "pods")
	classes := e.res(t, "node.k8s.io", "v1", "runtimeclasses")
	overhead := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("1Mi")}
	if _, err := e.Create(e.ctx, classes, "", &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc",
		Overhead: &nodev1.Overhead{PodFixed: overhead},
		Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{"sandbox": "yes"},
			Tolerations: []corev1.Toleration{{Key: "sandbox", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}},
		registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := func(name, class string, mutate func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
		if class != "" {
			p.Spec.RuntimeClassName = &class
		}
		if mutate != nil {
			mutate(p)
		}
		return p
	}
	for _, tc := range []struct {
		pod  *corev1.Pod
		want string // part of the 403's message; "" to admit
	}{
		{pod("missing", "nope", nil), `pod rejected: RuntimeClass "nope" not found`},
		{pod("conflict", "gvisor", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"sandbox": "no"} }), "conflict: runtimeClass.scheduling.nodeSelector[sandbox]"},
		{pod("other-overhead", "gvisor", func(p *corev1.Pod) {
			p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		}), "doesn't match RuntimeClass's defined Overhead"},
		{pod("overhead-without-class", "", func(p *corev1.Pod) {
			p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		}), "Pod Overhead set without corresponding RuntimeClass"},
		{pod("sandboxed", "gvisor", nil), ""},
	} {
		_, err := e.Create(e.ctx, pods, "default", tc.pod, registry.WriteOptions{})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.pod.Name, err)
		case tc.want != "" && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want a 403 saying %q", tc.pod.Name, err, tc.want)
		}
	}
	got := e.get(t, pods, "default", "sandboxed").(*corev1.Pod)
	tolerated := slices.ContainsFunc(got.Spec.Tolerations, func(t corev1.Toleration) bool { return t.Key == "sandbox" })
	if !got.Spec.Overhead.Cpu().Equal(resource.MustParse("10m")) || got.Spec.NodeSelector["sandbox"] != "yes" || !tolerated {
		t.Fatalf("the class's overhead and scheduling not merged: overhead %v, nodeSelector %v, tolerations %v", got.Spec.Overhead, got.Spec.NodeSelector, got.Spec.Tolerations)
	}
}
