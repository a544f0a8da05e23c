package scheduler

import (
	"math"
	"math/rand/v2"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
)

// maxScore is the score of the best node for one scoring function, as
// kube-scheduler's MaxNodeScore.
const maxScore = 100

// The weights of the scores, kube-scheduler's default plugin weights.
const (
	weightTaints         = 3 // TaintToleration
	weightNodeAffinity   = 2 // NodeAffinity
	weightLeastAllocated = 1 // NodeResourcesFit
	weightSpread         = 2 // PodTopologySpread
	weightInterPod       = 2 // InterPodAffinity
	weightBalanced       = 1 // NodeResourcesBalancedAllocation
	weightImages         = 1 // ImageLocality
)

// score returns the total score of each feasible node for the pod, as
// kube-scheduler's default plugins score, each from 0 to maxScore and
// weighted: fewest untolerated PreferNoSchedule taints, preferred node
// affinity, most CPU and memory left, topology spread, preferred
// inter-pod affinity, CPU and memory used in balance, and the pod's
// images already there.
func (a *attempt) score(c *cache, nodes []*nodeInfo) []int64 {
	total := make([]int64, len(nodes))
	for i, n := range nodes {
		total[i] = weightLeastAllocated*a.leastAllocated(n) + weightBalanced*a.balanced(n) + weightImages*a.imageLocality(c, n)
	}
	for _, part := range []struct {
		weight int64
		scores []int64
	}{
		{weightTaints, a.taintScore(nodes)},
		{weightNodeAffinity, a.nodeAffinity(nodes)},
		{weightSpread, a.spreadScore(c, nodes)},
		{weightInterPod, a.interPodScore(nodes)},
	} {
		for i, s := range part.scores {
			total[i] += part.weight * s
		}
	}
	return total
}

// leastAllocated favours nodes with more CPU and memory left after the
// pod, as kube-scheduler's LeastAllocated strategy: each resource scores
// its unrequested fraction, the two are averaged. Containers without
// requests count at the scoring defaults.
func (a *attempt) leastAllocated(n *nodeInfo) int64 {
	cpu := unrequested(n.nonZeroCPU+a.info.nonZeroCPU, n.allocatable.milliCPU)
	mem := unrequested(n.nonZeroMem+a.info.nonZeroMem, n.allocatable.memory)
	return (cpu + mem) / 2
}

func unrequested(requested, capacity int64) int64 {
	if capacity == 0 || requested > capacity {
		return 0
	}
	return (capacity - requested) * maxScore / capacity
}

// balanced favours nodes whose CPU and memory would be used in equal
// shares with the pod, as kube-scheduler's BalancedAllocation: maxScore
// less the standard deviation of the two shares. A pod that requests
// neither scores 0 everywhere.
func (a *attempt) balanced(n *nodeInfo) int64 {
	req := a.info.requests
	if req.milliCPU == 0 && req.memory == 0 {
		return 0
	}
	var shares []float64
	for _, r := range [][2]int64{
		{n.requested.milliCPU + req.milliCPU, n.allocatable.milliCPU},
		{n.requested.memory + req.memory, n.allocatable.memory},
	} {
		if r[1] > 0 {
			shares = append(shares, min(1, float64(r[0])/float64(r[1])))
		}
	}
	std := 0.0
	if len(shares) == 2 {
		std = math.Abs(shares[0]-shares[1]) / 2
	}
	return int64((1 - std) * maxScore)
}

// taintScore favours nodes with fewer PreferNoSchedule taints the pod
// does not tolerate: the node with the most scores 0, none maxScore.
func (a *attempt) taintScore(nodes []*nodeInfo) []int64 {
	scores := make([]int64, len(nodes))
	var most int64
	for i, n := range nodes {
		for j := range n.node.Spec.Taints {
			if t := &n.node.Spec.Taints[j]; t.Effect == corev1.TaintEffectPreferNoSchedule && !a.toleratesPreferred(t) {
				scores[i]++
			}
		}
		most = max(most, scores[i])
	}
	for i := range scores {
		if most == 0 {
			scores[i] = maxScore
		} else {
			scores[i] = maxScore - scores[i]*maxScore/most
		}
	}
	return scores
}

// toleratesPreferred: a toleration for PreferNoSchedule or for every
// effect tolerates t.
func (a *attempt) toleratesPreferred(t *corev1.Taint) bool {
	for i := range a.tolerations {
		if tol := &a.tolerations[i]; (tol.Effect == "" || tol.Effect == corev1.TaintEffectPreferNoSchedule) && tol.ToleratesTaint(logr.Discard(), t, false) {
			return true
		}
	}
	return false
}

// Image locality bounds, kube-scheduler's: images smaller than
// minImageBytes in all count as none; maxImageBytes per container is
// the most that counts.
const (
	minImageBytes = 23 << 20
	maxImageBytes = 1000 << 20
)

// imageLocality favours nodes that have the pod's images already (from
// their status.images), as kube-scheduler's ImageLocality: the sizes of
// the images there, each scaled by the share of nodes that have it (an
// image everywhere says little), between the bounds.
func (a *attempt) imageLocality(c *cache, n *nodeInfo) int64 {
	if len(n.images) == 0 {
		return 0
	}
	var sum int64
	for _, image := range a.images {
		if size, ok := n.images[image]; ok {
			sum += int64(float64(size) * float64(c.imageNodes[image]) / float64(len(c.list)))
		}
	}
	most := int64(maxImageBytes) * int64(len(a.images))
	sum = min(max(sum, minImageBytes), most)
	return maxScore * (sum - minImageBytes) / (most - minImageBytes)
}

// nodeAffinity scores the weights of the preferred node affinity terms a
// node matches, scaled so that the best node has maxScore.
func (a *attempt) nodeAffinity(nodes []*nodeInfo) []int64 {
	scores := make([]int64, len(nodes))
	if a.preferred == nil {
		return scores
	}
	var best int64
	for i, n := range nodes {
		scores[i] = a.preferred.Score(n.node)
		best = max(best, scores[i])
	}
	if best == 0 {
		return scores
	}
	for i := range scores {
		scores[i] = scores[i] * maxScore / best
	}
	return scores
}

// pick returns the index of a highest score, one at random among equals.
func pick(scores []int64) int {
	best, ties := 0, 0
	for i, s := range scores {
		switch {
		case i == 0 || s > scores[best]:
			best, ties = i, 1
		case s == scores[best]:
			// Reservoir sampling: each of the ties wins with equal chance.
			ties++
			if rand.IntN(ties) == 0 {
				best = i
			}
		}
	}
	return best
}
