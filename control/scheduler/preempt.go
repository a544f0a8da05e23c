package scheduler

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// Preemption's messages, kube-scheduler's.
const (
	msgNoVictims        = "No preemption victims found for incoming pod"
	msgNotHelpful       = "Preemption is not helpful for scheduling"
	msgNeverPreempts    = "not eligible due to preemptionPolicy=Never."
	msgVictimsDeparting = "not eligible due to a terminating pod on the nominated node."
)

// resolvable reports whether removing pods from a node could undo the
// reasons it failed for (kube-scheduler's Unschedulable, as against
// UnschedulableAndUnresolvable): a lack of resources or host ports, or
// pods whose anti-affinity or spread rule it out.
func resolvable(reasons []string) bool {
	for _, r := range reasons {
		switch {
		case r == reasonPorts, r == reasonTooManyPods, strings.HasPrefix(r, reasonInsufficient),
			r == reasonSpread, r == reasonPodAntiAffinity, r == reasonExistingAntiAffinity:
		default:
			return false
		}
	}
	return true
}

func priority(pod *corev1.Pod) int32 { return corev1helpers.PodPriority(pod) }

// startTime is when the pod started, or now if it has not.
func startTime(p *podInfo) time.Time {
	if t := p.pod.Status.StartTime; t != nil {
		return t.Time
	}
	return time.Now()
}

// moreImportant orders pods as kube-scheduler's MoreImportantPod: higher
// priority first, then the one that started earlier.
func moreImportant(a, b *podInfo) int {
	if pa, pb := priority(a.pod), priority(b.pod); pa != pb {
		return int(pb) - int(pa)
	}
	return startTime(a).Compare(startTime(b))
}

// candidate is a node where preemption would let the pod fit, and the
// pods it would take, most important first.
type candidate struct {
	node       *nodeInfo
	victims    []*podInfo
	violations int // of them, those whose disruption breaks a budget
}

// preemption is the outcome of preempting for a pod: the node it is
// nominated to ("" if none; a pod that may not preempt keeps its
// nomination) and what to tell the pod.
type preemption struct {
	node    string
	message string
}

// eligible says whether the pod may preempt others ("" if it may).
func (r *run) eligible(pod *corev1.Pod) string {
	if p := pod.Spec.PreemptionPolicy; p != nil && *p == corev1.PreemptNever {
		return msgNeverPreempts
	}
	// Victims of an earlier preemption still terminating on the node it
	// was nominated to: wait for them rather than take more.
	if name := pod.Status.NominatedNodeName; name != "" {
		if n, ok := r.cache.nodes[name]; ok {
			prio := priority(pod)
			for _, p := range n.pods {
				if priority(p.pod) < prio && terminatingByPreemption(p.pod) {
					return msgVictimsDeparting
				}
			}
		}
	}
	return ""
}

func terminatingByPreemption(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp == nil {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget {
			return c.Status == corev1.ConditionTrue && c.Reason == corev1.PodReasonPreemptionByScheduler
		}
	}
	return false
}

// preempt looks, as kube-scheduler's DefaultPreemption, for the nodes
// where taking lower-priority pods would let a pod fit that fits none,
// picks one, and evicts the pods it needs there: the pod is nominated to
// the node, to be scheduled there once they are gone.
func (r *run) preempt(ctx context.Context, pod *corev1.Pod, a *attempt, fit *fitError) preemption {
	if msg := r.eligible(pod); msg != "" {
		return preemption{node: pod.Status.NominatedNodeName, message: msg}
	}
	var budgets []*policyv1.PodDisruptionBudget
	if len(fit.potential) > 0 {
		budgets = r.budgets()
	}
	var candidates []candidate
	why := &fitError{nodes: len(r.cache.list), reasons: map[string]int{}}
	for _, n := range fit.potential {
		c, reasons := r.victimsOn(a, n, budgets)
		if reasons != nil {
			for _, reason := range reasons {
				why.reasons[reason]++
			}
			continue
		}
		candidates = append(candidates, c)
	}
	if len(candidates) == 0 {
		if absent := len(r.cache.list) - len(fit.potential); absent > 0 {
			why.reasons[msgNotHelpful] += absent
		}
		return preemption{message: why.Error()}
	}
	best := pickCandidate(candidates)
	r.evict(ctx, pod, best)
	return preemption{node: best.node.name}
}

// victimsOn finds the fewest, least important pods of lower priority on
// node n whose removal lets the pod fit, sparing first the pods whose
// disruption would break a budget; or the reasons the pod would not fit
// even without them.
func (r *run) victimsOn(a *attempt, n *nodeInfo, budgets []*policyv1.PodDisruptionBudget) (candidate, []string) {
	prio := priority(a.info.pod)
	var potential []*podInfo
	for _, p := range n.pods {
		if priority(p.pod) < prio {
			potential = append(potential, p)
		}
	}
	if len(potential) == 0 {
		return candidate{}, []string{msgNoVictims}
	}
	what := n.clone()
	for _, p := range potential {
		what.removePod(p)
	}
	nodes := slices.Clone(r.cache.list)
	for i := range nodes {
		if nodes[i] == n {
			nodes[i] = what
		}
	}
	fits := func() []string {
		if a.interPod != nil || a.spread != nil {
			a.prepareOver(r.cache, nodes)
		}
		return a.filter(what)
	}
	defer a.prepareOver(r.cache, nil)
	if reasons := fits(); len(reasons) > 0 {
		return candidate{}, reasons
	}
	slices.SortFunc(potential, moreImportant)
	violating, spared := splitByBudgets(potential, budgets)
	c := candidate{node: n}
	reprieve := func(p *podInfo) bool {
		what.addPod(p)
		if len(fits()) == 0 {
			return true
		}
		what.removePod(p)
		c.victims = append(c.victims, p)
		return false
	}
	for _, p := range violating {
		if !reprieve(p) {
			c.violations++
		}
	}
	for _, p := range spared {
		reprieve(p)
	}
	if len(violating) > 0 && len(spared) > 0 {
		slices.SortFunc(c.victims, moreImportant)
	}
	return c, nil
}

// splitByBudgets parts pods into those whose disruption would break a
// PodDisruptionBudget (counted in order, as kube-scheduler counts them)
// and the others.
func splitByBudgets(pods []*podInfo, budgets []*policyv1.PodDisruptionBudget) (violating, spared []*podInfo) {
	allowed := make([]int32, len(budgets))
	for i, b := range budgets {
		allowed[i] = b.Status.DisruptionsAllowed
	}
	for _, p := range pods {
		breaks := false
		if len(p.pod.Labels) > 0 {
			for i, b := range budgets {
				if b.Namespace != p.pod.Namespace {
					continue
				}
				sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
				if err != nil || sel.Empty() || !sel.Matches(labels.Set(p.pod.Labels)) {
					continue
				}
				if _, disrupted := b.Status.DisruptedPods[p.pod.Name]; disrupted {
					continue
				}
				if allowed[i]--; allowed[i] < 0 {
					breaks = true
				}
			}
		}
		if breaks {
			violating = append(violating, p)
		} else {
			spared = append(spared, p)
		}
	}
	return violating, spared
}

// pickCandidate chooses among the nodes as kube-scheduler does: fewest
// budgets broken, then the lowest highest priority taken, the lowest sum
// of priorities, the fewest pods, and the latest start of the most
// important pods taken; a node needing no victim at once.
func pickCandidate(candidates []candidate) candidate {
	for _, c := range candidates {
		if len(c.victims) == 0 {
			return c
		}
	}
	for _, score := range []func(c *candidate) int64{
		func(c *candidate) int64 { return -int64(c.violations) },
		func(c *candidate) int64 { return -int64(priority(c.victims[0].pod)) },
		func(c *candidate) int64 {
			var sum int64
			for _, v := range c.victims {
				sum += int64(priority(v.pod)) + math.MaxInt32 + 1
			}
			return -sum
		},
		func(c *candidate) int64 { return -int64(len(c.victims)) },
		func(c *candidate) int64 {
			// The earliest start among the victims of the highest priority.
			top, earliest := priority(c.victims[0].pod), startTime(c.victims[0])
			for _, v := range c.victims {
				if priority(v.pod) == top && startTime(v).Before(earliest) {
					earliest = startTime(v)
				}
			}
			return earliest.UnixNano()
		},
	} {
		best := int64(math.MinInt64)
		var kept []candidate
		for i := range candidates {
			s := score(&candidates[i])
			if s > best {
				best, kept = s, kept[:0]
			}
			if s == best {
				kept = append(kept, candidates[i])
			}
		}
		if len(kept) == 1 {
			return kept[0]
		}
		candidates = kept
	}
	return candidates[0]
}

// evict takes the candidate's victims, each marked as a disruption target
// first, and withdraws the node from lower-priority pods nominated to it,
// which no longer fit there.
func (r *run) evict(ctx context.Context, preemptor *corev1.Pod, c candidate) {
	message := fmt.Sprintf("%s: preempting to accommodate a higher priority pod", Name)
	now := metav1.NewTime(r.cfg.Now().UTC().Truncate(time.Second))
	for _, v := range c.victims {
		victim := v.pod
		r.cfg.Events.Eventf(victim, corev1.EventTypeNormal, "Preempted", "Preempted by pod %v on node %v", preemptor.UID, c.node.name)
		r.async(ctx, func(ctx context.Context) {
			_, err := r.store.Mutate(ctx, r.pods, victim.Namespace, victim.Name, "status", func(obj runtime.Object) error {
				cur := obj.(*corev1.Pod)
				if cur.UID != victim.UID {
					return errUnchanged
				}
				setCondition(&cur.Status, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
					Reason: corev1.PodReasonPreemptionByScheduler, Message: message, LastTransitionTime: now})
				return nil
			})
			if err == nil {
				uid := victim.UID
				_, _, err = r.store.Delete(ctx, r.pods, victim.Namespace, victim.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
			}
			if err != nil && !errors.Is(err, errUnchanged) && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
				r.log.Warn("scheduler: preempting pod failed", "pod", victim.Namespace+"/"+victim.Name, "err", err)
			}
		})
	}
	prio := priority(preemptor)
	for key, p := range c.node.nominated {
		if key != podKey(preemptor) && priority(p.pod) < prio {
			r.cache.unnominate(key)
			r.writeNomination(ctx, p.pod, "")
		}
	}
}

// writeNomination sets the pod's status.nominatedNodeName.
func (r *run) writeNomination(ctx context.Context, pod *corev1.Pod, node string) {
	r.async(ctx, func(ctx context.Context) {
		_, err := r.store.Mutate(ctx, r.pods, pod.Namespace, pod.Name, "status", func(obj runtime.Object) error {
			cur := obj.(*corev1.Pod)
			if cur.UID != pod.UID || cur.Spec.NodeName != "" || cur.Status.NominatedNodeName == node {
				return errUnchanged
			}
			cur.Status.NominatedNodeName = node
			return nil
		})
		if err != nil && !errors.Is(err, errUnchanged) && !apierrors.IsNotFound(err) && ctx.Err() == nil {
			r.log.Warn("scheduler: write nominated node failed", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		}
	})
}

// setCondition sets or replaces a condition of the pod's status, keeping
// its transition time when its status does not change.
func setCondition(st *corev1.PodStatus, c corev1.PodCondition) {
	for i := range st.Conditions {
		if st.Conditions[i].Type == c.Type {
			if st.Conditions[i].Status == c.Status {
				c.LastTransitionTime = st.Conditions[i].LastTransitionTime
			}
			st.Conditions[i] = c
			return
		}
	}
	st.Conditions = append(st.Conditions, c)
}
