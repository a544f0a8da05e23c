package scheduler

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// benchCluster is make bench-scheduler's cluster in memory: 100 nodes,
// half arm64 with 8 GiB and half arm with 1 GiB, and pods placed on them,
// each with anti-affinity to its group of 50 if anti.
func benchCluster(pods int, anti bool) *cache {
	c := newCache()
	for i := range 100 {
		arch, mem := "arm64", "8Gi"
		if i%2 == 1 {
			arch, mem = "arm", "1Gi"
		}
		name := fmt.Sprintf("pi-%03d", i)
		c.setNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			corev1.LabelHostname: name, corev1.LabelArchStable: arch, corev1.LabelOSStable: "linux"}},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"),
				corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse("110")},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}})
	}
	for i := range pods {
		p := benchPod(i, anti)
		p.Spec.NodeName = fmt.Sprintf("pi-%03d", (i%50)*2+(i/50)%2)
		c.addPod(newPodInfo(p))
	}
	return c
}

func benchPod(i int, anti bool) *corev1.Pod {
	group := fmt.Sprintf("g%03d", i/50)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%05d", i), Namespace: "default", UID: types.UID(fmt.Sprint(i)),
		Labels: map[string]string{"app": "bench", "group": group}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/bench/app:1.0",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("4Mi")}}}}}}
	if anti {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "bench", "group": group}}}}}}
	}
	return p
}

// BenchmarkDecide times one decision on a cluster of 100 nodes and 5,000
// pods: with no affinity anywhere, and with anti-affinity on every pod.
func BenchmarkDecide(b *testing.B) {
	for _, anti := range []bool{false, true} {
		b.Run(fmt.Sprintf("anti=%v", anti), func(b *testing.B) {
			r := &run{cache: benchCluster(5000, anti)}
			info := newPodInfo(benchPod(5000, anti))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := r.decide(b.Context(), info); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
