package scheduler

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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

// scoreOf is one scoring function over the nodes of a cluster.
type scoreOf func(a *attempt, c *cache, nodes []*nodeInfo) []int64

func perNode(f func(a *attempt, n *nodeInfo) int64) scoreOf {
	return func(a *attempt, _ *cache, nodes []*nodeInfo) []int64 {
		var out []int64
		for _, n := range nodes {
			out = append(out, f(a, n))
		}
		return out
	}
}

var (
	leastAllocatedScore = perNode((*attempt).leastAllocated)
	balancedScore       = perNode((*attempt).balanced)
	imageScore          = scoreOf(func(a *attempt, c *cache, nodes []*nodeInfo) []int64 {
		return perNode(func(a *attempt, n *nodeInfo) int64 { return a.imageLocality(c, n) })(a, c, nodes)
	})
	taintsScore   = scoreOf(func(a *attempt, _ *cache, nodes []*nodeInfo) []int64 { return a.taintScore(nodes) })
	affinityScore = scoreOf(func(a *attempt, _ *cache, nodes []*nodeInfo) []int64 { return a.nodeAffinity(nodes) })
	spreadScore   = scoreOf((*attempt).spreadScore)
	interPodScore = scoreOf(func(a *attempt, _ *cache, nodes []*nodeInfo) []int64 { return a.interPodScore(nodes) })
	totalScore    = scoreOf((*attempt).score)
)

func images(sizes map[string]int64) func(*corev1.Node) {
	return func(n *corev1.Node) {
		for name, size := range sizes {
			n.Status.Images = append(n.Status.Images, corev1.ContainerImage{Names: []string{name}, SizeBytes: size})
		}
	}
}

func image(ref string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.Containers[0].Image = ref }
}

// TestScores: each of kube-scheduler's default scores, on 0..100, as its
// plugins compute them.
func TestScores(t *testing.T) {
	web := podLabels("app", "web")
	const mb = 1 << 20
	tests := []struct {
		name  string
		score scoreOf
		pod   *corev1.Pod
		nodes []*nodeInfo
		want  []int64
	}{
		{"least allocated: cpu and memory left, averaged", leastAllocatedScore, testPod("p", requests("cpu", "1", "memory", "2Gi")),
			[]*nodeInfo{
				testNode("empty"),
				withPods(testNode("half"), testPod("q", requests("cpu", "1", "memory", "2Gi"))),
				withPods(testNode("full"), testPod("q", requests("cpu", "3", "memory", "6Gi"))),
			},
			// (4-1)/4 → 75 for both; (4-2)/4 → 50; (4-4)/4 → 0.
			[]int64{75, 50, 0}},
		{"least allocated: pods without requests count as 0.1 CPU and 200 MiB", leastAllocatedScore, testPod("p"),
			[]*nodeInfo{testNode("a"), withPods(testNode("b"), testPod("q"), testPod("r"))},
			// cpu: (4000-100)*100/4000 = 97, (4000-300)*100/4000 = 92;
			// memory: (8192-200)*100/8192 = 97, (8192-600)*100/8192 = 92.
			[]int64{97, 92}},
		{"least allocated: requests beyond the node score 0", leastAllocatedScore, testPod("p", requests("cpu", "8", "memory", "16Gi")),
			[]*nodeInfo{testNode("a")}, []int64{0}},

		{"balanced: equal shares score 100, 1 and 1/4 score 62", balancedScore, testPod("p", requests("cpu", "1", "memory", "2Gi")),
			[]*nodeInfo{testNode("even"), withPods(testNode("cpu-heavy"), testPod("q", requests("cpu", "3")))},
			// (1 - |4/4 - 2/8| / 2) × 100 = 62.5.
			[]int64{100, 62}},
		{"balanced: a pod without requests scores 0", balancedScore, testPod("p"),
			[]*nodeInfo{testNode("a")}, []int64{0}},

		{"taints: PreferNoSchedule ones not tolerated count against", taintsScore,
			testPod("p", tolerate(corev1.Toleration{Key: "tolerated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectPreferNoSchedule})),
			[]*nodeInfo{
				testNode("none"),
				testNode("one", taint("a", "", corev1.TaintEffectPreferNoSchedule)),
				testNode("two", taint("a", "", corev1.TaintEffectPreferNoSchedule), taint("b", "", corev1.TaintEffectPreferNoSchedule)),
				testNode("tolerated", taint("tolerated", "", corev1.TaintEffectPreferNoSchedule), taint("x", "", corev1.TaintEffectNoSchedule)),
			},
			[]int64{100, 50, 0, 100}},

		{"node affinity: weights scaled to the best node", affinityScore, testPod("p", preferred(20, "disk", "ssd"), preferred(60, "zone", "shed")),
			[]*nodeInfo{
				testNode("both", label("disk", "ssd"), label("zone", "shed")),
				testNode("zone", label("zone", "shed")),
				testNode("disk", label("disk", "ssd")),
				testNode("neither"),
			},
			// 80, 60, 20, 0 of 80.
			[]int64{100, 75, 25, 0}},

		{"spread: the default constraints over the owner's pods", spreadScore, testPod("p", ownedBy("rs-1")),
			[]*nodeInfo{
				withPods(testNode("two"), testPod("a", ownedBy("rs-1")), testPod("b", ownedBy("rs-1"))),
				withPods(testNode("one"), testPod("c", ownedBy("rs-1")), testPod("x", ownedBy("rs-2")), testPod("y", ownedBy("rs-2"))),
				withPods(testNode("none"), testPod("z", ownedBy("rs-2"))),
			},
			// count × ln(3+2) + (3-1), rounded: 5, 4, 2; reversed:
			// 100 × (5+2-s) / 5.
			[]int64{40, 60, 100}},
		{"spread: no owner and no constraints, no spreading", spreadScore, testPod("p"),
			[]*nodeInfo{withPods(testNode("a"), testPod("q", ownedBy("rs-1"))), testNode("b")},
			[]int64{0, 0}},
		{"spread: ScheduleAnyway by zone; a node without a zone scores 0", spreadScore,
			testPod("p", web, spreadOver(zone, 1, corev1.ScheduleAnyway, "web")),
			[]*nodeInfo{
				withPods(testNode("a", label(zone, "z1")), testPod("w1", web)),
				withPods(testNode("b", label(zone, "z1")), testPod("w2", web)),
				testNode("c", label(zone, "z2")),
				testNode("d"),
			},
			// z1: 2 × ln(2+2) + 0 = 2.77 → 3; z2: 0; reversed: 100 × (3+0-s) / 3.
			[]int64{0, 0, 100, 0}},

		{"inter-pod: preferred affinity and anti-affinity, scaled lowest to highest", interPodScore,
			testPod("p", web, preferredPodAffinity(10, term(corev1.LabelHostname, "cache")), preferredAntiAffinity(5, term(corev1.LabelHostname, "web"))),
			[]*nodeInfo{
				withPods(testNode("cache"), testPod("c1", podLabels("app", "cache"))),
				withPods(testNode("web"), testPod("w1", web)),
				testNode("empty"),
				withPods(testNode("both"), testPod("c2", podLabels("app", "cache")), testPod("w2", web)),
			},
			// 10, -5, 0, 5: from -5 to 10.
			[]int64{100, 0, 33, 66}},
		{"inter-pod: terms of the pods placed count for the incoming one", interPodScore,
			testPod("p", web),
			[]*nodeInfo{
				withPods(testNode("likes"), testPod("a", preferredPodAffinity(30, term(corev1.LabelHostname, "web")))),
				withPods(testNode("requires"), testPod("b", requiredPodAffinity(term(corev1.LabelHostname, "web")))),
				withPods(testNode("dislikes"), testPod("c", preferredAntiAffinity(30, term(corev1.LabelHostname, "web")))),
			},
			// 30, 1 (the hard affinity weight), -30.
			[]int64{100, 51, 0}},
		{"inter-pod: nothing preferred anywhere, all 0", interPodScore, testPod("p", web),
			[]*nodeInfo{testNode("a"), testNode("b")}, []int64{0, 0}},

		{"images: sizes there, scaled by how many nodes have them", imageScore, testPod("p", image("registry.local/app")),
			[]*nodeInfo{
				testNode("big", images(map[string]int64{"registry.local/app:latest": 500 * mb})),
				testNode("small", images(map[string]int64{"registry.local/app:latest": 20 * mb})),
				testNode("other", images(map[string]int64{"registry.local/db:1": 500 * mb})),
				testNode("none"),
			},
			// 500 MB × 2/4 = 250 MB: 100 × (250-23) / (1000-23) = 23;
			// 20 × 2/4 = 10 MB, below the 23 MB that count: 0.
			[]int64{23, 0, 0, 0}},
		{"images: short names match the full names nodes report", imageScore, testPod("p", image("nginx")),
			[]*nodeInfo{testNode("a", images(map[string]int64{"docker.io/library/nginx:latest": 1000 * mb})), testNode("b")},
			// 1000 MB × 1/2 = 500 MB: 100 × (500-23) / (1000-23) = 48.
			[]int64{48, 0}},

		{"total: weighted as kube-scheduler's defaults", totalScore, testPod("p", ownedBy("rs-1"), requests("cpu", "1", "memory", "2Gi")),
			[]*nodeInfo{
				withPods(testNode("a"), testPod("q", ownedBy("rs-1"), requests("cpu", "1", "memory", "2Gi"))),
				testNode("b", taint("soft", "", corev1.TaintEffectPreferNoSchedule)),
			},
			// a: least allocated 50, balanced 100, taints 100×3, spread
			// (1 × ln(2+2) + 2 → 3 against 2: 100 × (3+2-3)/3 = 66)×2;
			// b: 75, 100, 0×3, 100×2.
			[]int64{50 + 100 + 300 + 2*66, 75 + 100 + 0 + 200}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := clusterOf(tc.nodes...)
			a := prepared(t, c, tc.pod)
			if got := tc.score(a, c, tc.nodes); !slices.Equal(got, tc.want) {
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

// The default spread constraints count what kube-scheduler's do: the
// pods the Services selecting the pod select, intersected with its
// controller's when that is a ReplicaSet, StatefulSet or
// ReplicationController; nothing for a pod neither selects.
func TestDefaultSpreadSelectors(t *testing.T) {
	web, db := podLabels("app", "web"), podLabels("app", "db")
	jobOf := func(p *corev1.Pod) {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: "job-1", Controller: &yes}}
	}
	tests := []struct {
		name     string
		services map[string]string // name → its selector's app label
		pod      *corev1.Pod
		nodes    []*nodeInfo
		want     []int64
	}{
		{"bare pods a Service selects", map[string]string{"web": "web"}, testPod("p", web),
			[]*nodeInfo{
				withPods(testNode("two"), testPod("a", web), testPod("b", web)),
				withPods(testNode("one"), testPod("c", web), testPod("x", db), testPod("y", db)),
				withPods(testNode("none"), testPod("z", db)),
			},
			[]int64{40, 60, 100}},
		{"a Job's pods no Service selects: none", nil, testPod("p", web, jobOf),
			[]*nodeInfo{withPods(testNode("a"), testPod("q", web, jobOf)), testNode("b")},
			[]int64{0, 0}},
		{"a Job's pods a Service selects", map[string]string{"web": "web"}, testPod("p", web, jobOf),
			[]*nodeInfo{withPods(testNode("a"), testPod("q", web, jobOf)), testNode("b")},
			// 1 × ln(2+2) + 2 → 3 against 2: 100 × (3+2-3)/3.
			[]int64{66, 100}},
		{"a ReplicaSet's pods behind a Service: both must select", map[string]string{"web": "web", "other": "other"},
			testPod("p", web, ownedBy("rs-1")),
			[]*nodeInfo{
				withPods(testNode("two"), testPod("a", web, ownedBy("rs-1")), testPod("b", web, ownedBy("rs-1"))),
				withPods(testNode("one"), testPod("c", web, ownedBy("rs-1")), testPod("x", web), testPod("y", db, ownedBy("rs-1"))),
				withPods(testNode("none"), testPod("z", web, ownedBy("rs-2"))),
			},
			[]int64{40, 60, 100}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := clusterOf(tc.nodes...)
			for name, app := range tc.services {
				c.setService("default", name, labels.Set{"app": app})
			}
			a := prepared(t, c, tc.pod)
			if got := spreadScore(a, c, tc.nodes); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
