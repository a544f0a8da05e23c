package scheduler

import (
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// clusterOf is a cache holding the nodes and their pods.
func clusterOf(nodes ...*nodeInfo) *cache {
	c := newCache()
	c.namespaces["default"] = labels.Set{"kubernetes.io/metadata.name": "default"}
	c.namespaces["team-a"] = labels.Set{"kubernetes.io/metadata.name": "team-a", "team": "a"}
	for _, n := range nodes {
		c.nodes[n.name] = n
		c.list = append(c.list, n)
		c.setImages(n, nodeImages(n.node))
	}
	for _, n := range nodes {
		for _, p := range n.pods {
			c.pods[p.key] = p
			if p.affinity != nil {
				c.affine++
			}
			c.indexPod(p, 1)
		}
	}
	return c
}

// prepared is an attempt prepared over the cache's indexes, checked
// against one prepared by looking at every pod.
func prepared(t *testing.T, c *cache, pod *corev1.Pod) *attempt {
	t.Helper()
	a := newAttempt(newPodInfo(pod), nil)
	a.prepareOver(c, slices.Clone(c.list))
	scanned := a.interPod
	a.prepare(c)
	if !reflect.DeepEqual(a.interPod, scanned) {
		t.Errorf("inter-pod affinity from the indexes:\n%+v\nfrom every pod:\n%+v", a.interPod, scanned)
	}
	return a
}

func podLabels(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		for i := 0; i < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func inNamespace(ns string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Namespace = ns }
}

// term selects pods labelled app=value in topology key.
func term(key, app string) corev1.PodAffinityTerm {
	return corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}
}

func podAffinityOf(change func(*corev1.PodAffinity, *corev1.PodAntiAffinity)) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &corev1.Affinity{}
		}
		if p.Spec.Affinity.PodAffinity == nil {
			p.Spec.Affinity.PodAffinity = &corev1.PodAffinity{}
			p.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{}
		}
		change(p.Spec.Affinity.PodAffinity, p.Spec.Affinity.PodAntiAffinity)
	}
}

func requiredPodAffinity(terms ...corev1.PodAffinityTerm) func(*corev1.Pod) {
	return podAffinityOf(func(a *corev1.PodAffinity, _ *corev1.PodAntiAffinity) {
		a.RequiredDuringSchedulingIgnoredDuringExecution = append(a.RequiredDuringSchedulingIgnoredDuringExecution, terms...)
	})
}

func requiredAntiAffinity(terms ...corev1.PodAffinityTerm) func(*corev1.Pod) {
	return podAffinityOf(func(_ *corev1.PodAffinity, a *corev1.PodAntiAffinity) {
		a.RequiredDuringSchedulingIgnoredDuringExecution = append(a.RequiredDuringSchedulingIgnoredDuringExecution, terms...)
	})
}

func preferredPodAffinity(weight int32, t corev1.PodAffinityTerm) func(*corev1.Pod) {
	return podAffinityOf(func(a *corev1.PodAffinity, _ *corev1.PodAntiAffinity) {
		a.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.WeightedPodAffinityTerm{Weight: weight, PodAffinityTerm: t})
	})
}

func preferredAntiAffinity(weight int32, t corev1.PodAffinityTerm) func(*corev1.Pod) {
	return podAffinityOf(func(_ *corev1.PodAffinity, a *corev1.PodAntiAffinity) {
		a.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.WeightedPodAffinityTerm{Weight: weight, PodAffinityTerm: t})
	})
}

func spreadOver(key string, maxSkew int32, when corev1.UnsatisfiableConstraintAction, app string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
			MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: when,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}})
	}
}

const zone = corev1.LabelTopologyZone

// TestInterPodAndSpreadFilters: what each node of a small cluster says
// to an incoming pod, filter by filter.
func TestInterPodAndSpreadFilters(t *testing.T) {
	web := podLabels("app", "web")
	db := podLabels("app", "db")
	// a and b in zone 1, c in zone 2, d without a zone.
	cluster := func(pods map[string][]*corev1.Pod) []*nodeInfo {
		var out []*nodeInfo
		for _, n := range []struct{ name, zone string }{{"a", "z1"}, {"b", "z1"}, {"c", "z2"}, {"d", ""}} {
			var opts []func(*corev1.Node)
			if n.zone != "" {
				opts = append(opts, label(zone, n.zone))
			}
			out = append(out, withPods(testNode(n.name, opts...), pods[n.name]...))
		}
		return out
	}
	tests := []struct {
		name string
		pods map[string][]*corev1.Pod
		pod  *corev1.Pod
		want []string // per node a, b, c, d: "" fits
	}{
		{"anti-affinity by host: not beside a web pod",
			map[string][]*corev1.Pod{"a": {testPod("w1", web)}, "c": {testPod("d1", db)}},
			testPod("p", web, requiredAntiAffinity(term(corev1.LabelHostname, "web"))),
			[]string{reasonPodAntiAffinity, "", "", ""}},
		{"anti-affinity by zone: the whole zone, and a node without the label is free",
			map[string][]*corev1.Pod{"a": {testPod("w1", web)}},
			testPod("p", web, requiredAntiAffinity(term(zone, "web"))),
			[]string{reasonPodAntiAffinity, reasonPodAntiAffinity, "", ""}},
		{"anti-affinity counts only its namespace",
			map[string][]*corev1.Pod{"a": {testPod("w1", web, inNamespace("team-a"))}},
			testPod("p", web, requiredAntiAffinity(term(corev1.LabelHostname, "web"))),
			[]string{"", "", "", ""}},
		{"anti-affinity by namespace selector",
			map[string][]*corev1.Pod{"a": {testPod("w1", web, inNamespace("team-a"))}},
			testPod("p", web, requiredAntiAffinity(func() corev1.PodAffinityTerm {
				t := term(corev1.LabelHostname, "web")
				t.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
				return t
			}())),
			[]string{reasonPodAntiAffinity, "", "", ""}},
		{"an existing pod's anti-affinity keeps the pod away (symmetry)",
			map[string][]*corev1.Pod{"b": {testPod("d1", db, requiredAntiAffinity(term(zone, "web")))}},
			testPod("p", web),
			[]string{reasonExistingAntiAffinity, reasonExistingAntiAffinity, "", ""}},
		{"affinity: with a db pod's zone only",
			map[string][]*corev1.Pod{"c": {testPod("d1", db)}},
			testPod("p", web, requiredPodAffinity(term(zone, "db"))),
			[]string{reasonPodAffinity, reasonPodAffinity, "", reasonPodAffinity}},
		{"affinity with no matching pod anywhere: none fits",
			nil,
			testPod("p", web, requiredPodAffinity(term(zone, "db"))),
			[]string{reasonPodAffinity, reasonPodAffinity, reasonPodAffinity, reasonPodAffinity}},
		{"affinity to its own kind: the first pod goes anywhere with the label",
			nil,
			testPod("p", web, requiredPodAffinity(term(zone, "web"))),
			[]string{"", "", "", reasonPodAffinity}},
		{"matchLabelKeys narrow the selector to the pod's value",
			map[string][]*corev1.Pod{"a": {testPod("w1", web, podLabels("rev", "1"))}, "b": {testPod("w2", web, podLabels("rev", "2"))}},
			testPod("p", web, podLabels("rev", "2"), requiredAntiAffinity(func() corev1.PodAffinityTerm {
				t := term(corev1.LabelHostname, "web")
				t.MatchLabelKeys = []string{"rev"}
				return t
			}())),
			[]string{"", reasonPodAntiAffinity, "", ""}},
		{"spread DoNotSchedule by zone, maxSkew 1",
			map[string][]*corev1.Pod{"a": {testPod("w1", web)}, "b": {testPod("w2", web)}, "c": {testPod("w3", web)}},
			testPod("p", web, spreadOver(zone, 1, corev1.DoNotSchedule, "web")),
			// z1 has 2, z2 1: z1 would be 3-1 = 2 > 1; d has no zone.
			[]string{reasonSpread, reasonSpread, "", reasonSpreadNoLabel}},
		{"spread DoNotSchedule by host, maxSkew 1",
			map[string][]*corev1.Pod{"a": {testPod("w1", web)}, "b": {testPod("w2", web)}, "c": {testPod("w3", web)}},
			testPod("p", web, spreadOver(corev1.LabelHostname, 1, corev1.DoNotSchedule, "web")),
			[]string{reasonSpread, reasonSpread, reasonSpread, ""}},
		{"spread: a pod its selector does not select adds nothing",
			map[string][]*corev1.Pod{"a": {testPod("w1", web)}},
			testPod("p", db, spreadOver(corev1.LabelHostname, 1, corev1.DoNotSchedule, "web")),
			[]string{"", "", "", ""}},
		{"spread: ScheduleAnyway never filters",
			map[string][]*corev1.Pod{"a": {testPod("w1", web), testPod("w2", web)}},
			testPod("p", web, spreadOver(corev1.LabelHostname, 1, corev1.ScheduleAnyway, "web")),
			[]string{"", "", "", ""}},
		{"spread: minDomains beyond the domains makes the fewest 0",
			map[string][]*corev1.Pod{"a": {testPod("w1", web)}, "c": {testPod("w2", web)}},
			testPod("p", web, func(p *corev1.Pod) {
				spreadOver(zone, 1, corev1.DoNotSchedule, "web")(p)
				three := int32(3)
				p.Spec.TopologySpreadConstraints[0].MinDomains = &three
			}),
			// z1 and z2 have 1 each; with 3 domains wanted, the fewest is 0:
			// 1+1-0 = 2 > 1 everywhere.
			[]string{reasonSpread, reasonSpread, reasonSpread, reasonSpreadNoLabel}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nodes := cluster(tc.pods)
			c := clusterOf(nodes...)
			a := prepared(t, c, tc.pod)
			var got []string
			for _, n := range nodes {
				reasons := a.filter(n)
				if len(reasons) > 1 {
					t.Fatalf("node %s: %q, want one reason", n.name, reasons)
				}
				got = append(got, append(reasons, "")[0])
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
