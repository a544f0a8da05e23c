package main

import (
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The objects the benchmark creates.
const (
	namespace = "default"
	// services is how many Services the pods are spread over (app label
	// web-0 … web-4); the first is behind the Ingress.
	services = 5
	// podsPerNode is each board's pod capacity, Kubernetes' default.
	podsPerNode = 110
	// benchNodeLabel marks the benchmark's Nodes.
	benchNodeLabel = "bench.isle.dev/node"
	// ledReady is the annotation of a board's ready LED (node/agent).
	ledReady = "isle.dev/led-ready"
)

func nodeName(i int) string { return fmt.Sprintf("pi-%03d", i) }
func podName(i int) string  { return fmt.Sprintf("app-%04d", i) }
func podKey(i int) string   { return namespace + "/" + podName(i) }

// podNode is the board pod i is bound to.
func podNode(i, boards int) int { return i % boards }

// benchNode is board i as its agent would register it: Ready, an arm64
// board with 4 CPUs and 8 GiB (a Pi 5), its ready LED solid.
func benchNode(i int) *corev1.Node {
	name := nodeName(i)
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("28Gi"), corev1.ResourcePods: *resource.NewQuantity(podsPerNode, resource.DecimalSI),
	}
	now := metav1.NewTime(time.Now())
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels:      map[string]string{corev1.LabelHostname: name, corev1.LabelArchStable: "arm64", corev1.LabelOSStable: "linux", benchNodeLabel: "true"},
			Annotations: map[string]string{ledReady: "solid"}},
		Status: corev1.NodeStatus{
			Capacity: capacity, Allocatable: capacity,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				Message: "kubelet is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: nodeIP(i)}, {Type: corev1.NodeHostName, Address: name}},
			NodeInfo: corev1.NodeSystemInfo{Architecture: "arm64", OperatingSystem: "linux", ContainerRuntimeVersion: "containerd://1.7.24",
				KubeletVersion: "v1.31.0-isle", OSImage: "Debian GNU/Linux 13 (trixie)"},
		},
	}
}

func nodeIP(i int) string { return fmt.Sprintf("192.168.%d.%d", 50+i/250, 1+i%250) }
func podIP(i int) string  { return fmt.Sprintf("10.42.%d.%d", i/250, 1+i%250) }

// benchPod is pod i, bound to its board (no scheduler involved), in
// Service web-(i mod 5). Its status is set apart (podStatus). It
// tolerates its board's NotReady and unreachable taints for ever: the
// boards have no agents, and the node lifecycle controller marks them.
func benchPod(i, boards int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName(i), Namespace: namespace, Labels: map[string]string{"app": fmt.Sprintf("web-%d", i%services)}},
		Spec: corev1.PodSpec{
			NodeName: nodeName(podNode(i, boards)),
			Containers: []corev1.Container{{
				Name: "web", Image: "registry.example.com/bench/web:1.0",
				Ports: []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}},
			}},
			Tolerations: []corev1.Toleration{
				{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
				{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
			},
		},
	}
}

// podStatus is pod i's status as its board's agent would post it:
// Running since started, Ready or not.
func podStatus(i, boards int, ready bool, started time.Time) corev1.PodStatus {
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	now, at := metav1.NewTime(time.Now()), metav1.NewTime(started)
	return corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: at},
			{Type: corev1.ContainersReady, Status: cond, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: cond, LastTransitionTime: now},
		},
		HostIP: nodeIP(podNode(i, boards)), HostIPs: []corev1.HostIP{{IP: nodeIP(podNode(i, boards))}},
		PodIP: podIP(i), PodIPs: []corev1.PodIP{{IP: podIP(i)}},
		StartTime: &at,
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "web", Ready: ready, Started: ptr(true), RestartCount: 0,
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at}},
			Image:       "registry.example.com/bench/web:1.0",
			ImageID:     "registry.example.com/bench/web@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			ContainerID: fmt.Sprintf("containerd://%064x", i+1),
		}},
	}
}

// statusPatch is the JSON merge patch of the status subresource that sets
// the whole status (a merge patch replaces lists whole).
func statusPatch(st corev1.PodStatus) []byte {
	b, err := json.Marshal(map[string]any{"status": st})
	if err != nil {
		panic(err) // a PodStatus always marshals
	}
	return b
}

func benchService(i int) *corev1.Service {
	name := fmt.Sprintf("web-%d", i)
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}},
	}
}

// benchIngress routes / to Service web-0.
func benchIngress() *networkingv1.Ingress {
	prefix := networkingv1.PathTypePrefix
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: namespace},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "web.isle.local",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: &prefix,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web-0",
					Port: networkingv1.ServiceBackendPort{Number: 80}}},
			}}}}}}},
	}
}

func ptr[T any](v T) *T { return &v }
