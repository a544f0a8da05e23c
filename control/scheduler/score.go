package scheduler

import "math/rand/v2"

// maxScore is the score of the best node for one scoring function, as
// kube-scheduler's MaxNodeScore.
const maxScore = 100

// The weights of the scores, kube-scheduler's default plugin weights:
// NodeResourcesFit 1, NodeAffinity 2, PodTopologySpread 2 (whose place
// the owner spreading takes).
const (
	weightLeastAllocated = 1
	weightNodeAffinity   = 2
	weightSpread         = 2
)

// score returns the total score of each feasible node for the pod: how
// little of its CPU and memory would be requested, how few pods of the
// pod's owner it has, and how well it matches the pod's preferred node
// affinity, each from 0 to maxScore and weighted.
func (a *attempt) score(nodes []*nodeInfo) []int64 {
	total := make([]int64, len(nodes))
	for i, n := range nodes {
		total[i] = weightLeastAllocated * a.leastAllocated(n)
	}
	for i, s := range a.spread(nodes) {
		total[i] += weightSpread * s
	}
	for i, s := range a.nodeAffinity(nodes) {
		total[i] += weightNodeAffinity * s
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

// spread favours nodes with fewer pods of the pod's controller (its
// ReplicaSet, say), so that losing one board loses few replicas: each node
// scores maxScore times the share by which it has fewer than the fullest
// node, as kube-scheduler's SelectorSpread did.
func (a *attempt) spread(nodes []*nodeInfo) []int64 {
	scores := make([]int64, len(nodes))
	if a.info.owner == "" {
		return scores
	}
	most := 0
	for _, n := range nodes {
		most = max(most, n.owners[a.info.owner])
	}
	for i, n := range nodes {
		scores[i] = maxScore
		if most > 0 {
			scores[i] = int64(most-n.owners[a.info.owner]) * maxScore / int64(most)
		}
	}
	return scores
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
