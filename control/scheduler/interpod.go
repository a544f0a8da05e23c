package scheduler

import (
	"math"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// The reasons of inter-pod affinity, in kube-scheduler's words.
const (
	reasonPodAffinity          = "node(s) didn't match pod affinity rules"
	reasonPodAntiAffinity      = "node(s) didn't match pod anti-affinity rules"
	reasonExistingAntiAffinity = "node(s) didn't satisfy existing pods anti-affinity rules"
)

// hardPodAffinityWeight is what an existing pod's required affinity term
// that selects the incoming pod adds to the score of its domain, as
// kube-scheduler's default HardPodAffinityWeight.
const hardPodAffinityWeight = 1

// affinityTerm is one inter-pod affinity or anti-affinity term of a pod,
// parsed once: the pods it selects, by namespace and labels, and the node
// label whose values are its topology domains.
type affinityTerm struct {
	// namespaces are those the term names, or the pod's own when it names
	// none and has no namespace selector.
	namespaces  []string
	nsSelector  labels.Selector // nil: none
	selector    labels.Selector
	topologyKey string
	weight      int64 // a preferred term's
	// sig is the same for identical terms (termKey).
	sig string
}

// newAffinityTerm parses a term of pod. The API validated it: a selector
// that does not parse selects nothing. matchLabelKeys and
// mismatchLabelKeys are merged into the selector with the pod's values,
// as kube-apiserver merges them when the pod is created.
func newAffinityTerm(pod *corev1.Pod, t *corev1.PodAffinityTerm, weight int32) affinityTerm {
	at := affinityTerm{namespaces: t.Namespaces, topologyKey: t.TopologyKey, weight: int64(weight)}
	if t.NamespaceSelector != nil {
		at.nsSelector = selectorOrNothing(t.NamespaceSelector)
	} else if len(t.Namespaces) == 0 {
		at.namespaces = []string{pod.Namespace}
	}
	at.selector = selectorOrNothing(t.LabelSelector)
	if t.LabelSelector != nil {
		at.selector = withPodLabels(at.selector, pod, t.MatchLabelKeys, selection.In)
		at.selector = withPodLabels(at.selector, pod, t.MismatchLabelKeys, selection.NotIn)
	}
	ns := "<none>"
	if at.nsSelector != nil {
		ns = at.nsSelector.String()
	}
	at.sig = strings.Join(append([]string{at.topologyKey, strconv.FormatInt(at.weight, 10), at.selector.String(), ns}, at.namespaces...), "\x00")
	return at
}

// selectorOrNothing parses a label selector; nil and invalid ones select
// nothing.
func selectorOrNothing(s *metav1.LabelSelector) labels.Selector {
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return labels.Nothing()
	}
	return sel
}

// withPodLabels adds to sel a requirement (key op [value]) for each of
// keys the pod has a label of.
func withPodLabels(sel labels.Selector, pod *corev1.Pod, keys []string, op selection.Operator) labels.Selector {
	for _, k := range keys {
		v, ok := pod.Labels[k]
		if !ok {
			continue
		}
		if r, err := labels.NewRequirement(k, op, []string{v}); err == nil {
			sel = sel.Add(*r)
		}
	}
	return sel
}

// matches reports whether the term selects pod, whose namespace has the
// labels nsLabels.
func (t *affinityTerm) matches(pod *corev1.Pod, nsLabels labels.Set) bool {
	if !slices.Contains(t.namespaces, pod.Namespace) && (t.nsSelector == nil || !t.nsSelector.Matches(nsLabels)) {
		return false
	}
	return t.selector.Matches(labels.Set(pod.Labels))
}

// podAffinity is a pod's inter-pod affinity and anti-affinity, parsed.
type podAffinity struct {
	required, requiredAnti   []affinityTerm
	preferred, preferredAnti []affinityTerm
}

// newPodAffinity parses pod's inter-pod affinity; nil if it has none.
func newPodAffinity(pod *corev1.Pod) *podAffinity {
	aff := pod.Spec.Affinity
	if aff == nil || aff.PodAffinity == nil && aff.PodAntiAffinity == nil {
		return nil
	}
	parse := func(required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm) (req, pref []affinityTerm) {
		for i := range required {
			req = append(req, newAffinityTerm(pod, &required[i], 0))
		}
		for i := range preferred {
			pref = append(pref, newAffinityTerm(pod, &preferred[i].PodAffinityTerm, preferred[i].Weight))
		}
		return req, pref
	}
	pa := &podAffinity{}
	if a := aff.PodAffinity; a != nil {
		pa.required, pa.preferred = parse(a.RequiredDuringSchedulingIgnoredDuringExecution, a.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	if a := aff.PodAntiAffinity; a != nil {
		pa.requiredAnti, pa.preferredAnti = parse(a.RequiredDuringSchedulingIgnoredDuringExecution, a.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	if len(pa.required)+len(pa.requiredAnti)+len(pa.preferred)+len(pa.preferredAnti) == 0 {
		return nil
	}
	return pa
}

// matchesAll reports whether every one of terms (at least one) selects pod.
func matchesAll(terms []affinityTerm, pod *corev1.Pod, nsLabels labels.Set) bool {
	if len(terms) == 0 {
		return false
	}
	for i := range terms {
		if !terms[i].matches(pod, nsLabels) {
			return false
		}
	}
	return true
}

// topologyPair is one topology domain: a node label and its value.
type topologyPair struct{ key, value string }

// interPod is what one attempt computes of inter-pod affinity, over every
// node, before it filters and scores, as kube-scheduler's InterPodAffinity
// PreFilter and PreScore do.
type interPod struct {
	// existingAnti counts, per domain, the required anti-affinity terms of
	// pods there that select the incoming pod.
	existingAnti map[topologyPair]int
	// affinity counts, per domain of each of the pod's required affinity
	// terms, the pods there that all its terms select; anti the pods its
	// required anti-affinity terms select.
	affinity, anti map[topologyPair]int
	// score is the preferred weight each domain gets: the pod's preferred
	// terms over the pods there, and the terms of the pods there over it.
	score map[string]map[string]int64
}

// addScore adds weight to the domain (key, value).
func (ip *interPod) addScore(key, value string, weight int64) {
	m := ip.score[key]
	if m == nil {
		m = map[string]int64{}
		ip.score[key] = m
	}
	m[value] += weight
}

// count counts one more pod in m in the node's domain of key.
func (ip *interPod) count(m map[topologyPair]int, key string, node *corev1.Node) {
	if v, ok := node.Labels[key]; ok {
		m[topologyPair{key, v}]++
	}
}

// prepareInterPod computes a.interPod over the nodes; nil when neither
// the pod nor any placed pod has inter-pod affinity. Over the cluster's
// own nodes (nodes nil) it reads the cache's indexes; over others
// (preemption's what-ifs) it looks at every pod.
func (a *attempt) prepareInterPod(c *cache, nodes []*nodeInfo) {
	if a.info.affinity == nil && c.affine == 0 {
		return
	}
	pod, pa := a.info.pod, a.info.affinity
	if pa == nil {
		pa = &podAffinity{}
	}
	own := c.namespaceLabels(pod.Namespace)
	ip := &interPod{existingAnti: map[topologyPair]int{}, affinity: map[topologyPair]int{}, anti: map[topologyPair]int{},
		score: map[string]map[string]int64{}}
	a.interPod, a.ownLabels = ip, own
	if nodes == nil {
		a.interPodIndexed(c, ip, pa, own)
		return
	}
	add := func(t *affinityTerm, node *corev1.Node, weight int64) {
		if v, ok := node.Labels[t.topologyKey]; ok {
			ip.addScore(t.topologyKey, v, weight)
		}
	}
	count := ip.count
	incoming := a.info.affinity != nil
	for _, n := range nodes {
		node := n.node
		if incoming {
			for _, p := range n.pods {
				ns := c.namespaceLabels(p.pod.Namespace)
				if matchesAll(pa.required, p.pod, ns) {
					for i := range pa.required {
						count(ip.affinity, pa.required[i].topologyKey, node)
					}
				}
				for i := range pa.requiredAnti {
					if t := &pa.requiredAnti[i]; t.matches(p.pod, ns) {
						count(ip.anti, t.topologyKey, node)
					}
				}
				for i := range pa.preferred {
					if t := &pa.preferred[i]; t.matches(p.pod, ns) {
						add(t, node, t.weight)
					}
				}
				for i := range pa.preferredAnti {
					if t := &pa.preferredAnti[i]; t.matches(p.pod, ns) {
						add(t, node, -t.weight)
					}
				}
			}
		}
		for _, p := range n.affine {
			ea := p.affinity
			for i := range ea.requiredAnti {
				if t := &ea.requiredAnti[i]; t.matches(pod, own) {
					count(ip.existingAnti, t.topologyKey, node)
				}
			}
			for i := range ea.required {
				if t := &ea.required[i]; t.matches(pod, own) {
					add(t, node, hardPodAffinityWeight)
				}
			}
			for i := range ea.preferred {
				if t := &ea.preferred[i]; t.matches(pod, own) {
					add(t, node, t.weight)
				}
			}
			for i := range ea.preferredAnti {
				if t := &ea.preferredAnti[i]; t.matches(pod, own) {
					add(t, node, -t.weight)
				}
			}
		}
	}
}

// interPodFilter returns why the node breaks inter-pod affinity ("": it
// does not), in kube-scheduler's order: the pod's affinity, its
// anti-affinity, then the anti-affinity of the pods placed.
func (a *attempt) interPodFilter(n *nodeInfo) string {
	ip := a.interPod
	if ip == nil {
		return ""
	}
	nodeLabels := n.node.Labels
	if pa := a.info.affinity; pa != nil {
		exist := true
		for i := range pa.required {
			key := pa.required[i].topologyKey
			v, ok := nodeLabels[key]
			if !ok {
				return reasonPodAffinity
			}
			if ip.affinity[topologyPair{key, v}] <= 0 {
				exist = false
			}
		}
		// No pod matches anywhere: the first pod of a group that is
		// affine to itself may go anywhere.
		if !exist && (len(ip.affinity) > 0 || !matchesAll(pa.required, a.info.pod, a.ownLabels)) {
			return reasonPodAffinity
		}
		for i := range pa.requiredAnti {
			key := pa.requiredAnti[i].topologyKey
			if v, ok := nodeLabels[key]; ok && ip.anti[topologyPair{key, v}] > 0 {
				return reasonPodAntiAffinity
			}
		}
	}
	for pair, count := range ip.existingAnti {
		if v, ok := nodeLabels[pair.key]; ok && v == pair.value && count > 0 {
			return reasonExistingAntiAffinity
		}
	}
	return ""
}

// interPodScore scores each node by the preferred weights of its domains,
// scaled from the lowest (0) to the highest (maxScore).
func (a *attempt) interPodScore(nodes []*nodeInfo) []int64 {
	scores := make([]int64, len(nodes))
	if a.interPod == nil || len(a.interPod.score) == 0 {
		return scores
	}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for i, n := range nodes {
		for key, values := range a.interPod.score {
			if v, ok := n.node.Labels[key]; ok {
				scores[i] += values[v]
			}
		}
		lo, hi = min(lo, scores[i]), max(hi, scores[i])
	}
	for i := range scores {
		if hi > lo {
			scores[i] = int64(float64(maxScore) * float64(scores[i]-lo) / float64(hi-lo))
		} else {
			scores[i] = 0
		}
	}
	return scores
}
