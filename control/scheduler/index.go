package scheduler

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// The scheduler's indexes over the pods placed, which spare a decision a
// pass over every pod when pods have inter-pod affinity: the pods by
// label, for the incoming pod's terms, and the placed pods' terms grouped
// where they are the same (the replicas of one controller), for their
// terms against the incoming pod.

// labelPair is one label of a pod.
type labelPair struct{ key, value string }

// termKind is what an existing pod's term means to an incoming pod.
type termKind uint8

const (
	kindRequiredAnti  termKind = iota // it keeps the pod out of its domains
	kindRequired                      // it draws the pod, with the hard affinity weight
	kindPreferred                     // it draws the pod, with its weight
	kindPreferredAnti                 // it pushes the pod away, with its weight
)

// termGroup is the identical terms of some placed pods: one of them, and
// how many of those pods are in each domain of its topology key.
type termGroup struct {
	kind    termKind
	term    *affinityTerm
	domains map[string]int
	pods    int
}

// termKey identifies a term among identical ones: its kind, selectors,
// namespaces, topology key and weight.
func termKey(kind termKind, t *affinityTerm) string {
	return string(rune('0'+kind)) + t.sig
}

// indexPod adds (sign 1) or removes (-1) a placed pod in the indexes.
func (c *cache) indexPod(p *podInfo, sign int) {
	for k, v := range p.pod.Labels {
		pair := labelPair{k, v}
		if sign > 0 {
			if c.byLabel[pair] == nil {
				c.byLabel[pair] = map[string]*podInfo{}
			}
			c.byLabel[pair][p.key] = p
		} else if set := c.byLabel[pair]; set != nil {
			delete(set, p.key)
			if len(set) == 0 {
				delete(c.byLabel, pair)
			}
		}
	}
	c.groupTerms(p, sign)
}

// groupTerms counts the pod's terms in their groups, by the labels its
// node has now (a pod whose node is not known counts nowhere, as in
// kube-scheduler's snapshot).
func (c *cache) groupTerms(p *podInfo, sign int) {
	n := c.nodes[p.node]
	if p.affinity == nil || n == nil || n.node == nil {
		return
	}
	for kind, terms := range [][]affinityTerm{kindRequiredAnti: p.affinity.requiredAnti, kindRequired: p.affinity.required,
		kindPreferred: p.affinity.preferred, kindPreferredAnti: p.affinity.preferredAnti} {
		for i := range terms {
			t := &terms[i]
			v, ok := n.node.Labels[t.topologyKey]
			if !ok {
				continue
			}
			key := termKey(termKind(kind), t)
			g := c.groups[key]
			if g == nil {
				if sign < 0 {
					continue
				}
				g = &termGroup{kind: termKind(kind), term: t, domains: map[string]int{}}
				c.groups[key] = g
			}
			g.pods += sign
			if g.domains[v] += sign; g.domains[v] <= 0 {
				delete(g.domains, v)
			}
			if g.pods <= 0 {
				delete(c.groups, key)
			}
		}
	}
}

// regroup counts every placed pod's terms again: a node came, went or
// changed its labels.
func (c *cache) regroup() {
	clear(c.groups)
	for _, n := range c.list {
		for _, p := range n.affine {
			c.groupTerms(p, 1)
		}
	}
}

// candidates are the placed pods a selector may select: those with the
// label of one of its equality requirements (the requirement with the
// fewest); ok is false if it has none and every pod must be looked at.
func (c *cache) candidates(sel labels.Selector) (sets []map[string]*podInfo, ok bool) {
	reqs, selectable := sel.Requirements()
	if !selectable {
		return nil, true // selects nothing
	}
	best := -1
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
		default:
			continue
		}
		var these []map[string]*podInfo
		count := 0
		for v := range r.Values() {
			if set := c.byLabel[labelPair{r.Key(), v}]; len(set) > 0 {
				these = append(these, set)
				count += len(set)
			}
		}
		if best < 0 || count < best {
			best, sets = count, these
		}
	}
	return sets, best >= 0
}

// interPodIndexed computes the inter-pod affinity counts from the
// indexes: what prepareInterPod computes by looking at every pod.
func (a *attempt) interPodIndexed(c *cache, ip *interPod, pa *podAffinity, own labels.Set) {
	pod := a.info.pod
	for _, g := range c.groups {
		if !g.term.matches(pod, own) {
			continue
		}
		key := g.term.topologyKey
		for v, n := range g.domains {
			switch g.kind {
			case kindRequiredAnti:
				ip.existingAnti[topologyPair{key, v}] += n
			case kindRequired:
				ip.addScore(key, v, int64(n)*hardPodAffinityWeight)
			case kindPreferred:
				ip.addScore(key, v, int64(n)*g.term.weight)
			case kindPreferredAnti:
				ip.addScore(key, v, -int64(n)*g.term.weight)
			}
		}
	}
	// The pod's own terms over the pods they may select.
	each := func(t *affinityTerm, visit func(p *podInfo, node *corev1.Node)) {
		sets, ok := c.candidates(t.selector)
		if !ok {
			sets = nil
			for _, n := range c.list {
				sets = append(sets, n.pods)
			}
		}
		seen := map[string]bool{}
		for _, set := range sets {
			for key, p := range set {
				n := c.nodes[p.node]
				if n == nil || n.node == nil || seen[key] {
					continue
				}
				seen[key] = true
				visit(p, n.node)
			}
		}
	}
	if len(pa.required) > 0 {
		each(&pa.required[0], func(p *podInfo, node *corev1.Node) {
			if matchesAll(pa.required, p.pod, c.namespaceLabels(p.pod.Namespace)) {
				for i := range pa.required {
					ip.count(ip.affinity, pa.required[i].topologyKey, node)
				}
			}
		})
	}
	for i := range pa.requiredAnti {
		t := &pa.requiredAnti[i]
		each(t, func(p *podInfo, node *corev1.Node) {
			if t.matches(p.pod, c.namespaceLabels(p.pod.Namespace)) {
				ip.count(ip.anti, t.topologyKey, node)
			}
		})
	}
	for _, weighted := range []struct {
		terms []affinityTerm
		sign  int64
	}{{pa.preferred, 1}, {pa.preferredAnti, -1}} {
		for i := range weighted.terms {
			t := &weighted.terms[i]
			each(t, func(p *podInfo, node *corev1.Node) {
				if t.matches(p.pod, c.namespaceLabels(p.pod.Namespace)) {
					if v, ok := node.Labels[t.topologyKey]; ok {
						ip.addScore(t.topologyKey, v, weighted.sign*t.weight)
					}
				}
			})
		}
	}
}
