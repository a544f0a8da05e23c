package scheduler

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// The reasons of topology spread, in kube-scheduler's words.
const (
	reasonSpread        = "node(s) didn't match pod topology spread constraints"
	reasonSpreadNoLabel = reasonSpread + " (missing required label)"
)

// spreadConstraint is one topology spread constraint, parsed.
type spreadConstraint struct {
	maxSkew int64
	key     string
	// selector selects the pods counted, in the pod's namespace; nil
	// counts those of the default constraints (attempt.countDefault).
	selector   labels.Selector
	minDomains int
	// honorAffinity: only nodes that pass the pod's node affinity and
	// selector count (nodeAffinityPolicy Honor, the default);
	// honorTaints: only nodes whose taints the pod tolerates
	// (nodeTaintsPolicy Honor; the default is Ignore).
	honorAffinity, honorTaints bool
}

// defaultSpread are kube-scheduler's default constraints, for pods that
// have none of their own: at most 3 more on one node than on another and
// 5 more in one zone, as a preference, counting the pods that the
// Services and the controller selecting the pod select
// (cache.defaultSpreadSelector).
var defaultSpread = []spreadConstraint{
	{maxSkew: 3, key: corev1.LabelHostname, minDomains: 1, honorAffinity: true},
	{maxSkew: 5, key: corev1.LabelTopologyZone, minDomains: 1, honorAffinity: true},
}

// spreadConstraints parses the pod's constraints of one kind
// (DoNotSchedule or ScheduleAnyway). matchLabelKeys are merged into the
// selector with the pod's values, as kube-scheduler does.
func spreadConstraints(pod *corev1.Pod, when corev1.UnsatisfiableConstraintAction) []spreadConstraint {
	var out []spreadConstraint
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != when {
			continue
		}
		sc := spreadConstraint{maxSkew: int64(c.MaxSkew), key: c.TopologyKey, selector: selectorOrNothing(c.LabelSelector),
			minDomains: 1, honorAffinity: true}
		sc.selector = withPodLabels(sc.selector, pod, c.MatchLabelKeys, selection.In)
		if c.MinDomains != nil {
			sc.minDomains = int(*c.MinDomains)
		}
		if c.NodeAffinityPolicy != nil {
			sc.honorAffinity = *c.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor
		}
		if c.NodeTaintsPolicy != nil {
			sc.honorTaints = *c.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor
		}
		out = append(out, sc)
	}
	return out
}

// count is how many pods the constraint counts on node n.
func (c *spreadConstraint) count(a *attempt, n *nodeInfo) int {
	if c.selector == nil {
		return a.countDefault(n)
	}
	if c.selector.Empty() {
		return 0
	}
	count := 0
	for _, p := range n.pods {
		if p.pod.Namespace == a.info.pod.Namespace && p.pod.DeletionTimestamp == nil && c.selector.Matches(labels.Set(p.pod.Labels)) {
			count++
		}
	}
	return count
}

// countDefault is how many pods the default constraints count on node
// n (cache.defaultSpreadSelector).
func (a *attempt) countDefault(n *nodeInfo) int {
	svc, owner := a.spreadSvc, a.spreadOwner
	if len(svc) == 0 {
		return n.owners[owner]
	}
	sel := svc.AsSelectorPreValidated()
	count := 0
	for _, p := range n.pods {
		if p.pod.Namespace == a.info.pod.Namespace && p.pod.DeletionTimestamp == nil && (owner == "" || p.owner == owner) &&
			sel.Matches(labels.Set(p.pod.Labels)) {
			count++
		}
	}
	return count
}

// includes reports whether node n counts for the constraint under its
// node inclusion policies.
func (c *spreadConstraint) includes(a *attempt, n *nodeInfo) bool {
	if c.honorAffinity && !a.nodeAffinityMatches(n.node) {
		return false
	}
	if c.honorTaints {
		for i := range n.node.Spec.Taints {
			t := &n.node.Spec.Taints[i]
			if (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) && !a.tolerates(t) {
				return false
			}
		}
	}
	return true
}

// hasKeys reports whether the node has the topology label of every one
// of constraints.
func hasKeys(node *corev1.Node, constraints []spreadConstraint) bool {
	for i := range constraints {
		if _, ok := node.Labels[constraints[i].key]; !ok {
			return false
		}
	}
	return true
}

// spread is what one attempt computes of the pod's DoNotSchedule
// constraints over every node before it filters, as kube-scheduler's
// PodTopologySpread PreFilter: the pods counted in each domain, and the
// fewest in any.
type spread struct {
	constraints []spreadConstraint
	counts      []map[string]int
	fewest      []int
}

func (a *attempt) prepareSpread(nodes []*nodeInfo) {
	constraints := spreadConstraints(a.info.pod, corev1.DoNotSchedule)
	if len(constraints) == 0 {
		return
	}
	s := &spread{constraints: constraints, counts: make([]map[string]int, len(constraints)), fewest: make([]int, len(constraints))}
	for i := range s.counts {
		s.counts[i] = map[string]int{}
	}
	for _, n := range nodes {
		if !hasKeys(n.node, constraints) {
			continue
		}
		for i := range constraints {
			if sc := &constraints[i]; sc.includes(a, n) {
				s.counts[i][n.node.Labels[sc.key]] += sc.count(a, n)
			}
		}
	}
	for i, counts := range s.counts {
		s.fewest[i] = math.MaxInt
		for _, n := range counts {
			s.fewest[i] = min(s.fewest[i], n)
		}
		if len(counts) < constraints[i].minDomains {
			s.fewest[i] = 0 // fewer domains than asked: the missing ones have none
		}
	}
	a.spread = s
}

// spreadFilter returns why placing the pod on the node would skew a
// DoNotSchedule constraint beyond its maxSkew ("": it would not).
func (a *attempt) spreadFilter(n *nodeInfo) string {
	s := a.spread
	if s == nil {
		return ""
	}
	podLabels := labels.Set(a.info.pod.Labels)
	for i := range s.constraints {
		sc := &s.constraints[i]
		v, ok := n.node.Labels[sc.key]
		if !ok {
			return reasonSpreadNoLabel
		}
		self := 0
		if sc.selector.Matches(podLabels) {
			self = 1
		}
		if int64(s.counts[i][v]+self-s.fewest[i]) > sc.maxSkew {
			return reasonSpread
		}
	}
	return ""
}

// spreadScore favours the nodes whose domains have fewer of the pods the
// pod's ScheduleAnyway constraints count (the default constraints when it
// has none at all), as kube-scheduler's PodTopologySpread score: each
// constraint adds its count weighted by the log of its number of domains,
// and the totals are reversed onto 0..maxScore. Nodes without a
// constraint's label score 0, unless the constraints are the defaults.
func (a *attempt) spreadScore(c *cache, nodes []*nodeInfo) []int64 {
	scores := make([]int64, len(nodes))
	constraints, defaulted := spreadConstraints(a.info.pod, corev1.ScheduleAnyway), false
	if len(a.info.pod.Spec.TopologySpreadConstraints) == 0 {
		var ok bool
		if a.spreadSvc, a.spreadOwner, ok = c.defaultSpreadSelector(a.info); !ok {
			return scores
		}
		constraints, defaulted = defaultSpread, true
	}
	if len(constraints) == 0 {
		return scores
	}
	ignored := make([]bool, len(nodes))
	domains := make([]map[string]int, len(constraints))
	for i := range domains {
		domains[i] = map[string]int{}
	}
	considered := 0
	for j, n := range nodes {
		if !defaulted && !hasKeys(n.node, constraints) {
			ignored[j] = true
			continue
		}
		considered++
		for i := range constraints {
			if constraints[i].key != corev1.LabelHostname {
				domains[i][n.node.Labels[constraints[i].key]] = 0
			}
		}
	}
	weights := make([]float64, len(constraints))
	for i := range constraints {
		size := len(domains[i])
		if constraints[i].key == corev1.LabelHostname {
			size = considered
		}
		weights[i] = math.Log(float64(size + 2))
	}
	// The pods in each domain, over every node (not only those that fit).
	for _, n := range c.list {
		if !defaulted && !hasKeys(n.node, constraints) {
			continue
		}
		for i := range constraints {
			sc := &constraints[i]
			if sc.key == corev1.LabelHostname || !sc.includes(a, n) {
				continue
			}
			v := n.node.Labels[sc.key]
			if _, ok := domains[i][v]; ok {
				domains[i][v] += sc.count(a, n)
			}
		}
	}
	lo, hi := int64(math.MaxInt64), int64(0)
	for j, n := range nodes {
		if ignored[j] {
			continue
		}
		var score float64
		for i := range constraints {
			sc := &constraints[i]
			v, ok := n.node.Labels[sc.key]
			if !ok {
				continue
			}
			count := domains[i][v]
			if sc.key == corev1.LabelHostname {
				count = sc.count(a, n)
			}
			score += float64(count)*weights[i] + float64(sc.maxSkew-1)
		}
		scores[j] = int64(math.Round(score))
		lo, hi = min(lo, scores[j]), max(hi, scores[j])
	}
	for j := range scores {
		switch {
		case ignored[j]:
			scores[j] = 0
		case hi == 0:
			scores[j] = maxScore
		default:
			scores[j] = maxScore * (hi + lo - scores[j]) / hi
		}
	}
	return scores
}
