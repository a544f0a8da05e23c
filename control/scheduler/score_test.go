package scheduler

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func ownedBy(uid types.UID) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: uid, Controller: &yes}}
	}
}

func preferred(weight int32, key, value string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}
		}
		na := p.Spec.Affinity.NodeAffinity
		na.PreferredDuringSchedulingIgnoredDuringExecution = append(na.PreferredDuringSchedulingIgnoredDuringExecution, corev1.PreferredSchedulingTerm{
			Weight: weight, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}}}})
	}
}

func TestScores(t *testing.T) {
	tests := []struct {
		name  string
		pod   *corev1.Pod
		nodes []*nodeInfo
		// want is each node's total: 1×least allocated + 2×spread + 2×affinity.
		want []int64
	}{
		{"least allocated: cpu and memory left, averaged", testPod("p", requests("cpu", "1", "memory", "2Gi")),
			[]*nodeInfo{
				testNode("empty"),
				withPods(testNode("half"), testPod("q", requests("cpu", "1", "memory", "2Gi"))),
				withPods(testNode("full"), testPod("q", requests("cpu", "3", "memory", "6Gi"))),
			},
			// (4-1)/4 → 75 for both; (4-2)/4 → 50; (4-4)/4 → 0.
			[]int64{75, 50, 0}},
		{"pods without requests count as 0.1 CPU and 200 MiB", testPod("p"),
			[]*nodeInfo{testNode("a"), withPods(testNode("b"), testPod("q"), testPod("r"))},
			// cpu: (4000-100)*100/4000 = 97, (4000-300)*100/4000 = 92;
			// memory: (8192-200)*100/8192 = 97, (8192-600)*100/8192 = 92.
			[]int64{97, 92}},
		{"requests beyond the node score 0", testPod("p", requests("cpu", "8", "memory", "16Gi")),
			[]*nodeInfo{testNode("a")}, []int64{0}},
		{"spread over the owner's nodes", testPod("p", ownedBy("rs-1")),
			[]*nodeInfo{
				withPods(testNode("two"), testPod("a", ownedBy("rs-1")), testPod("b", ownedBy("rs-1"))),
				withPods(testNode("one"), testPod("c", ownedBy("rs-1")), testPod("x", ownedBy("rs-2")), testPod("y", ownedBy("rs-2"))),
				withPods(testNode("none"), testPod("z", ownedBy("rs-2"))),
			},
			// least allocated: 92, 90, 95 (3, 4 and 2 pods of 100m/200Mi);
			// spread: (2-2)/2, (2-1)/2, (2-0)/2 → 0, 50, 100, doubled.
			[]int64{92 + 0, 90 + 100, 95 + 200}},
		{"no owner: no spreading", testPod("p"),
			[]*nodeInfo{withPods(testNode("a"), testPod("q", ownedBy("rs-1"))), testNode("b")},
			[]int64{95, 97}},
		{"the owner's first pod: every node the same", testPod("p", ownedBy("rs-1")),
			[]*nodeInfo{testNode("a"), testNode("b")},
			[]int64{97 + 200, 97 + 200}},
		{"preferred affinity: weights scaled to the best node", testPod("p", preferred(20, "disk", "ssd"), preferred(60, "zone", "shed")),
			[]*nodeInfo{
				testNode("both", label("disk", "ssd"), label("zone", "shed")),
				testNode("zone", label("zone", "shed")),
				testNode("disk", label("disk", "ssd")),
				testNode("neither"),
			},
			// 80, 60, 20, 0 of 80 → 100, 75, 25, 0, doubled.
			[]int64{97 + 200, 97 + 150, 97 + 50, 97}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := newAttempt(newPodInfo(tc.pod), nil).score(tc.nodes)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPick(t *testing.T) {
	if got := pick([]int64{10, 30, 20}); got != 1 {
		t.Errorf("pick chose %d, want the highest score (1)", got)
	}
	// Ties are broken at random: both tied nodes are chosen over many
	// tries (a chance of 2^-199 to fail by bad luck), the others never.
	chosen := map[int]int{}
	for range 200 {
		chosen[pick([]int64{5, 40, 10, 40})]++
	}
	if len(chosen) != 2 || chosen[1] == 0 || chosen[3] == 0 {
		t.Errorf("ties chosen %v, want both 1 and 3 and nothing else", chosen)
	}
}
