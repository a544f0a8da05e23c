package scheduler

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// testNode is a Ready arm64 node with 4 CPUs, 8 GiB, 32 GiB of disk and
// room for 110 pods, changed by the options.
func testNode(name string, opts ...func(*corev1.Node)) *nodeInfo {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			corev1.LabelHostname: name, corev1.LabelArchStable: "arm64", corev1.LabelOSStable: "linux"}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"),
				corev1.ResourceEphemeralStorage: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, o := range opts {
		o(node)
	}
	n := newNodeInfo(name)
	n.setNode(node)
	return n
}

func testPod(name string, opts ...func(*corev1.Pod)) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	for _, o := range opts {
		o(pod)
	}
	return pod
}

// requests sets the first container's requests ("cpu", "500m", ...).
func requests(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests = resourceList(kv...) }
}

func resourceList(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

// withPods places pods on the node.
func withPods(n *nodeInfo, pods ...*corev1.Pod) *nodeInfo {
	for _, p := range pods {
		p.Spec.NodeName = n.name
		n.addPod(newPodInfo(p))
	}
	return n
}

func ready(status corev1.ConditionStatus) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Status.Conditions[0].Status = status }
}

func taint(key, value string, effect corev1.TaintEffect) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	}
}

func label(key, value string) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Labels[key] = value }
}

func tolerate(t corev1.Toleration) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.Tolerations = append(p.Spec.Tolerations, t) }
}

func hostPortOn(ip string, proto corev1.Protocol, port int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports,
			corev1.ContainerPort{ContainerPort: 8080, HostPort: port, HostIP: ip, Protocol: proto})
	}
}

func requiredAffinity(reqs ...corev1.NodeSelectorRequirement) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: reqs}}}}}
	}
}

func TestFilter(t *testing.T) {
	cordoned := func(n *corev1.Node) { n.Spec.Unschedulable = true }
	arm := label(corev1.LabelArchStable, "arm")
	always := corev1.ContainerRestartPolicyAlways
	pv := func(terms ...corev1.NodeSelectorTerm) *nodeaffinity.LazyErrorNodeSelector {
		return nodeaffinity.NewLazyErrorNodeSelector(&corev1.NodeSelector{NodeSelectorTerms: terms})
	}
	onHost := func(h string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{h}}}}
	}
	tests := []struct {
		name    string
		node    *nodeInfo
		pod     *corev1.Pod
		volumes *podVolumes
		want    []string
	}{
		{"fits", testNode("n"), testPod("p"), nil, nil},

		{"cordoned", testNode("n", cordoned), testPod("p"), nil, []string{"node(s) were unschedulable"}},
		{"cordoned, tolerated", testNode("n", cordoned),
			testPod("p", tolerate(corev1.Toleration{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})), nil, nil},

		{"NoSchedule taint", testNode("n", taint("dedicated", "db", corev1.TaintEffectNoSchedule)), testPod("p"), nil,
			[]string{"node(s) had untolerated taint {dedicated: db}"}},
		{"NoExecute taint", testNode("n", taint("dedicated", "db", corev1.TaintEffectNoExecute)), testPod("p"), nil,
			[]string{"node(s) had untolerated taint {dedicated: db}"}},
		{"PreferNoSchedule taint is only a preference", testNode("n", taint("dedicated", "db", corev1.TaintEffectPreferNoSchedule)), testPod("p"), nil, nil},
		{"taint tolerated by value", testNode("n", taint("dedicated", "db", corev1.TaintEffectNoSchedule)),
			testPod("p", tolerate(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "db", Effect: corev1.TaintEffectNoSchedule})), nil, nil},
		{"taint tolerated for another value", testNode("n", taint("dedicated", "db", corev1.TaintEffectNoSchedule)),
			testPod("p", tolerate(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "web", Effect: corev1.TaintEffectNoSchedule})), nil,
			[]string{"node(s) had untolerated taint {dedicated: db}"}},
		{"first untolerated taint named", testNode("n", taint("a", "1", corev1.TaintEffectNoSchedule), taint("b", "2", corev1.TaintEffectNoSchedule)),
			testPod("p", tolerate(corev1.Toleration{Key: "a", Operator: corev1.TolerationOpExists})), nil,
			[]string{"node(s) had untolerated taint {b: 2}"}},

		{"not ready", testNode("n", ready(corev1.ConditionFalse)), testPod("p"), nil,
			[]string{"node(s) had untolerated taint {node.kubernetes.io/not-ready: }"}},
		{"readiness unknown", testNode("n", ready(corev1.ConditionUnknown)), testPod("p"), nil,
			[]string{"node(s) had untolerated taint {node.kubernetes.io/unreachable: }"}},
		{"no Ready condition", testNode("n", func(n *corev1.Node) { n.Status.Conditions = nil }), testPod("p"), nil,
			[]string{"node(s) had untolerated taint {node.kubernetes.io/unreachable: }"}},
		{"not ready: the default NoExecute tolerations do not cover it", testNode("n", ready(corev1.ConditionFalse)),
			testPod("p", tolerate(corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})), nil,
			[]string{"node(s) had untolerated taint {node.kubernetes.io/not-ready: }"}},
		{"not ready, tolerated (a DaemonSet's pod)", testNode("n", ready(corev1.ConditionFalse)),
			testPod("p", tolerate(corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})), nil, nil},
		{"not ready and already tainted so: one taint", testNode("n", ready(corev1.ConditionFalse), taint(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoExecute)),
			testPod("p", tolerate(corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists})), nil, nil},

		{"nodeSelector matches", testNode("n", label("disk", "ssd")), testPod("p", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} }), nil, nil},
		{"nodeSelector does not", testNode("n"), testPod("p", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} }), nil,
			[]string{"node(s) didn't match Pod's node affinity/selector"}},
		{"arch by nodeSelector", testNode("n", arm), testPod("p", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{corev1.LabelArchStable: "arm64"} }), nil,
			[]string{"node(s) didn't match Pod's node affinity/selector"}},
		{"required affinity", testNode("n", arm),
			testPod("p", requiredAffinity(corev1.NodeSelectorRequirement{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}})), nil,
			[]string{"node(s) didn't match Pod's node affinity/selector"}},
		{"required affinity NotIn", testNode("n"),
			testPod("p", requiredAffinity(corev1.NodeSelectorRequirement{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"arm"}})), nil, nil},
		{"nodeSelector and affinity both apply", testNode("n", label("disk", "ssd")),
			testPod("p", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} },
				requiredAffinity(corev1.NodeSelectorRequirement{Key: "zone", Operator: corev1.NodeSelectorOpExists})), nil,
			[]string{"node(s) didn't match Pod's node affinity/selector"}},
		{"arch annotation", testNode("n", arm), testPod("p", func(p *corev1.Pod) { p.Annotations = map[string]string{ArchAnnotation: "arm64"} }), nil,
			[]string{"node(s) didn't match Pod's node affinity/selector"}},
		{"arch annotation lists several", testNode("n", arm), testPod("p", func(p *corev1.Pod) { p.Annotations = map[string]string{ArchAnnotation: "arm64, arm"} }), nil, nil},

		{"host port taken", withPods(testNode("n"), testPod("q", hostPortOn("", "", 80))), testPod("p", hostPortOn("", corev1.ProtocolTCP, 80)), nil,
			[]string{"node(s) didn't have free ports for the requested pod ports"}},
		{"host port taken on all addresses", withPods(testNode("n"), testPod("q", hostPortOn("0.0.0.0", "", 80))), testPod("p", hostPortOn("10.0.0.1", "", 80)), nil,
			[]string{"node(s) didn't have free ports for the requested pod ports"}},
		{"host port on another address", withPods(testNode("n"), testPod("q", hostPortOn("10.0.0.2", "", 80))), testPod("p", hostPortOn("10.0.0.1", "", 80)), nil, nil},
		{"host port of another protocol", withPods(testNode("n"), testPod("q", hostPortOn("", corev1.ProtocolUDP, 53))), testPod("p", hostPortOn("", corev1.ProtocolTCP, 53)), nil, nil},

		{"cpu", withPods(testNode("n"), testPod("q", requests("cpu", "3"))), testPod("p", requests("cpu", "1500m")), nil, []string{"Insufficient cpu"}},
		{"cpu exactly", withPods(testNode("n"), testPod("q", requests("cpu", "3"))), testPod("p", requests("cpu", "1")), nil, nil},
		{"cpu and memory", withPods(testNode("n"), testPod("q", requests("cpu", "3", "memory", "7Gi"))), testPod("p", requests("cpu", "2", "memory", "2Gi")), nil,
			[]string{"Insufficient cpu", "Insufficient memory"}},
		{"ephemeral storage", testNode("n"), testPod("p", requests("ephemeral-storage", "40Gi")), nil, []string{"Insufficient ephemeral-storage"}},
		{"extended resource the node lacks", testNode("n"), testPod("p", requests("example.com/tpu", "1")), nil, []string{"Insufficient example.com/tpu"}},
		{"extended resource the node has", testNode("n", func(n *corev1.Node) { n.Status.Allocatable["example.com/tpu"] = resource.MustParse("2") }),
			testPod("p", requests("example.com/tpu", "2")), nil, nil},
		{"too many pods", withPods(testNode("n", func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("1") }), testPod("q")),
			testPod("p"), nil, []string{"Too many pods"}},
		{"no requests fit a full node", withPods(testNode("n"), testPod("q", requests("cpu", "4", "memory", "8Gi"))), testPod("p"), nil, nil},
		{"init container larger than the containers", withPods(testNode("n"), testPod("q", requests("cpu", "1500m"))),
			testPod("p", requests("cpu", "1"), func(p *corev1.Pod) {
				p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: resourceList("cpu", "3")}}}
			}), nil, []string{"Insufficient cpu"}},
		{"sidecars add to the containers", withPods(testNode("n"), testPod("q", requests("cpu", "2"))),
			testPod("p", requests("cpu", "1500m"), func(p *corev1.Pod) {
				p.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: resourceList("cpu", "1")}}}
			}), nil, []string{"Insufficient cpu"}},
		{"overhead counts", withPods(testNode("n"), testPod("q", requests("memory", "7Gi"))),
			testPod("p", requests("memory", "768Mi"), func(p *corev1.Pod) { p.Spec.Overhead = resourceList("memory", "512Mi") }), nil, []string{"Insufficient memory"}},

		{"volume pinned here", testNode("n"), testPod("p"), &podVolumes{affinity: []*nodeaffinity.LazyErrorNodeSelector{pv(onHost("n"))}}, nil},
		{"volume pinned elsewhere", testNode("n"), testPod("p"), &podVolumes{affinity: []*nodeaffinity.LazyErrorNodeSelector{pv(onHost("m"))}},
			[]string{"node(s) had volume node affinity conflict"}},
		{"volume missing", testNode("n"), testPod("p"), &podVolumes{missingPV: true},
			[]string{"node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"}},
		{"claim waiting for its first pod", testNode("n"), testPod("p"), &podVolumes{delayed: []delayedClaim{{key: "default/data"}}}, nil},
		{"claim being provisioned elsewhere", testNode("n"), testPod("p"), &podVolumes{delayed: []delayedClaim{{key: "default/data", selectedNode: "m"}}},
			[]string{"node(s) didn't find available persistent volumes to bind"}},
		{"claim being provisioned here", testNode("n"), testPod("p"), &podVolumes{delayed: []delayedClaim{{key: "default/data", selectedNode: "n"}}}, nil},

		{"first failing filter only: cordoned before resources", withPods(testNode("n", cordoned), testPod("q", requests("cpu", "4"))),
			testPod("p", requests("cpu", "1")), nil, []string{"node(s) were unschedulable"}},
		{"taint before affinity", testNode("n", arm, taint("dedicated", "db", corev1.TaintEffectNoSchedule)),
			testPod("p", func(p *corev1.Pod) { p.Annotations = map[string]string{ArchAnnotation: "arm64"} }), nil,
			[]string{"node(s) had untolerated taint {dedicated: db}"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := newAttempt(newPodInfo(tc.pod), tc.volumes).filter(tc.node)
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFitErrorMessage(t *testing.T) {
	tests := []struct {
		name string
		err  *fitError
		want string
	}{
		{"kubectl's example", &fitError{nodes: 5, reasons: map[string]int{
			"Insufficient memory": 3, "node(s) had untolerated taint {node.kubernetes.io/unreachable: }": 2}},
			"0/5 nodes are available: 2 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, 3 Insufficient memory."},
		// Sorted as strings, as kube-scheduler does: 10 before 2.
		{"counts sorted as strings", &fitError{nodes: 12, reasons: map[string]int{
			"node(s) didn't match Pod's node affinity/selector": 2, "Insufficient cpu": 10, "Insufficient memory": 10}},
			"0/12 nodes are available: 10 Insufficient cpu, 10 Insufficient memory, 2 node(s) didn't match Pod's node affinity/selector."},
		{"one reason for every node", &fitError{nodes: 3, preFilter: `persistentvolumeclaim "data" not found`},
			`0/3 nodes are available: persistentvolumeclaim "data" not found.`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
