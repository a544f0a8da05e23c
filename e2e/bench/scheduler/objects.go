package main

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The objects the benchmark creates.
const (
	namespace   = "default"
	placeLabel  = "bench-place"  // app label of the pending pods
	deployLabel = "bench-deploy" // app label of the Deployment's pods
	antiLabel   = "bench-anti"   // app label of the pods with anti-affinity
	// antiGroup labels each anti-affinity pod with its group: no two
	// pods of a group may share a node.
	antiGroup = "bench-group"
	// antiNodeLabel marks the Nodes the anti-affinity pods may use, which
	// the benchmark creates once those pods wait.
	antiNodeLabel = "bench.isle.dev/anti"
	// podsPerNode is each node's pod capacity, Kubernetes' default.
	podsPerNode = 110
	// benchNodeLabel marks the benchmark's Nodes, and every pod selects
	// it: the server is a node too (its own agent registers it), which the
	// benchmark's pods must not use.
	benchNodeLabel = "bench.isle.dev/node"
)

// benchNode is node i, as a board's agent would register it: Ready, with
// its capacity; even ones are arm64 boards with 8 GiB (a Pi 5), odd ones
// arm boards with 1 GiB (a Pi 2).
func benchNode(i int) *corev1.Node {
	arch, mem := "arm64", "8Gi"
	if i%2 == 1 {
		arch, mem = "arm", "1Gi"
	}
	name := fmt.Sprintf("pi-%03d", i)
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse(mem),
		corev1.ResourceEphemeralStorage: resource.MustParse("28Gi"), corev1.ResourcePods: *resource.NewQuantity(podsPerNode, resource.DecimalSI),
	}
	now := metav1.NewTime(time.Now())
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			corev1.LabelHostname: name, corev1.LabelArchStable: arch, corev1.LabelOSStable: "linux", benchNodeLabel: "true"}},
		Status: corev1.NodeStatus{
			Capacity: capacity, Allocatable: capacity,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				Message: "kubelet is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now}},
			NodeInfo: corev1.NodeSystemInfo{Architecture: arch, OperatingSystem: "linux"},
		},
	}
}

// benchPodSpec is what every pod runs: a small web server, on one of the
// benchmark's nodes.
func benchPodSpec() corev1.PodSpec {
	return corev1.PodSpec{NodeSelector: map[string]string{benchNodeLabel: "true"}, Containers: []corev1.Container{{
		Name: "app", Image: "registry.example.com/bench/app:1.0",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}},
	}}}
}

// pendingPod is pending pod i; every other one selects arm64 nodes.
func pendingPod(i int) *corev1.Pod {
	spec := benchPodSpec()
	if i%2 == 0 {
		spec.NodeSelector[corev1.LabelArchStable] = "arm64"
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("place-%05d", i), Labels: map[string]string{"app": placeLabel}}, Spec: spec}
}

func benchDeployment(replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": deployLabel}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: deployLabel},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: benchPodSpec()},
		},
	}
}

// antiPod is anti-affinity pod i of groups of groupSize: it requires a
// node without another pod of its group (kubernetes.io/hostname), and a
// node labelled antiNodeLabel; it requests 4 MiB.
func antiPod(i, groupSize int) *corev1.Pod {
	group := fmt.Sprintf("g%03d", i/groupSize)
	spec := benchPodSpec()
	spec.NodeSelector[antiNodeLabel] = "true"
	// Less memory than the others: the arm nodes' 1 GiB is mostly taken.
	spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("4Mi")
	spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey:   corev1.LabelHostname,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": antiLabel, antiGroup: group}},
		}}}}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("anti-%05d", i), Labels: map[string]string{"app": antiLabel, antiGroup: group}},
		Spec: spec}
}
