package scheduler

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func started(t time.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Status.StartTime = &metav1.Time{Time: t} }
}

func victims(pods ...*corev1.Pod) []*podInfo {
	var out []*podInfo
	for _, p := range pods {
		out = append(out, newPodInfo(p))
	}
	return out
}

// TestPickCandidate: kube-scheduler's order of preference among the
// nodes where preemption would work.
func TestPickCandidate(t *testing.T) {
	early, late := time.Unix(1000, 0), time.Unix(2000, 0)
	tests := []struct {
		name       string
		candidates []candidate
		want       string
	}{
		{"a node needing no victim", []candidate{
			{node: testNode("a"), victims: victims(testPod("x", withPriority(1)))},
			{node: testNode("b")},
		}, "b"},
		{"fewest budgets broken", []candidate{
			{node: testNode("a"), victims: victims(testPod("x", withPriority(1))), violations: 1},
			{node: testNode("b"), victims: victims(testPod("y", withPriority(5)), testPod("z", withPriority(5)))},
		}, "b"},
		{"lowest highest priority", []candidate{
			{node: testNode("a"), victims: victims(testPod("x", withPriority(50)))},
			{node: testNode("b"), victims: victims(testPod("y", withPriority(10)), testPod("z", withPriority(10)))},
		}, "b"},
		{"lowest sum of priorities", []candidate{
			{node: testNode("a"), victims: victims(testPod("x", withPriority(10)), testPod("y", withPriority(10)))},
			{node: testNode("b"), victims: victims(testPod("z", withPriority(10)), testPod("w", withPriority(-5)))},
		}, "b"},
		{"latest start of the most important victims", []candidate{
			{node: testNode("a"), victims: victims(testPod("x", withPriority(10), started(early)))},
			{node: testNode("b"), victims: victims(testPod("y", withPriority(10), started(late)))},
		}, "b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := pickCandidate(tc.candidates); got.node.name != tc.want {
				t.Errorf("picked %s, want %s", got.node.name, tc.want)
			}
		})
	}
}

func TestSplitByBudgets(t *testing.T) {
	pdb := func(name string, allowed int32, app string, disrupted ...string) *policyv1.PodDisruptionBudget {
		b := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
			Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed, DisruptedPods: map[string]metav1.Time{}}}
		for _, d := range disrupted {
			b.Status.DisruptedPods[d] = metav1.Now()
		}
		return b
	}
	web := podLabels("app", "web")
	pods := victims(
		testPod("w1", web), testPod("w2", web), testPod("w3", web), // one disruption allowed: w2 and w3 break it
		testPod("gone", web),                    // already disrupted: not counted again
		testPod("db", podLabels("app", "db")),   // no budget
		testPod("other", web, inNamespace("x")), // another namespace
		testPod("bare"),                         // no labels
	)
	violating, spared := splitByBudgets(pods, []*policyv1.PodDisruptionBudget{pdb("web", 1, "web", "gone")})
	names := func(ps []*podInfo) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.pod.Name)
		}
		return out
	}
	if got := names(violating); len(got) != 2 || got[0] != "w2" || got[1] != "w3" {
		t.Errorf("violating %v, want [w2 w3]", got)
	}
	if got := names(spared); len(got) != 5 {
		t.Errorf("spared %v, want w1 gone db other bare", got)
	}
}

// TestNominatedPodsHoldTheirRoom: a pod nominated to a node counts there
// for pods of lower or equal priority, not for higher ones or itself.
func TestNominatedPodsHoldTheirRoom(t *testing.T) {
	n := withPods(testNode("n"), testPod("q", requests("cpu", "2")))
	c := clusterOf(n)
	nominee := newPodInfo(testPod("nominee", withPriority(100), requests("cpu", "2")))
	c.nominate(nominee, "n")
	for _, tc := range []struct {
		pod  *corev1.Pod
		want int
	}{
		{testPod("lower", withPriority(10), requests("cpu", "1")), 1},
		{testPod("equal", withPriority(100), requests("cpu", "1")), 1},
		{testPod("higher", withPriority(1000), requests("cpu", "1")), 0},
		{testPod("nominee", withPriority(100), requests("cpu", "2")), 0},
	} {
		if got := len(newAttempt(newPodInfo(tc.pod), nil).insufficient(n)); got != tc.want {
			t.Errorf("pod %s: %d reasons, want %d", tc.pod.Name, got, tc.want)
		}
	}
	c.unnominate(nominee.key)
	if len(n.nominated) != 0 {
		t.Errorf("nominated %v after unnominate", n.nominated)
	}
}
