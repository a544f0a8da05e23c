package scheduler

import (
	"fmt"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// ArchAnnotation on a pod lists the CPU architectures its images run on
// (GOARCH names, comma-separated, e.g. "arm64,arm"): the scheduler places
// the pod only on nodes whose kubernetes.io/arch label is one of them, as
// if its node affinity required it. Pods without it are placed by their
// nodeSelector and affinity alone, which may name kubernetes.io/arch and
// kubernetes.io/os like any other label; the scheduler does not look at
// image manifests (the node agent refuses an image it cannot run).
const ArchAnnotation = "isle.dev/arch"

// The reasons a node does not fit, in kube-scheduler's words (its filter
// plugins' messages), which kubectl users know.
const (
	reasonUnschedulable    = "node(s) were unschedulable"
	reasonTaintFormat      = "node(s) had untolerated taint {%s: %s}"
	reasonAffinity         = "node(s) didn't match Pod's node affinity/selector"
	reasonPorts            = "node(s) didn't have free ports for the requested pod ports"
	reasonTooManyPods      = "Too many pods"
	reasonInsufficient     = "Insufficient "
	reasonVolumeConflict   = "node(s) had volume node affinity conflict"
	reasonVolumeBind       = "node(s) didn't find available persistent volumes to bind"
	reasonVolumeMissingPV  = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
	msgNoNodes             = "no nodes available to schedule pods"
	msgUnboundImmediatePVC = "pod has unbound immediate PersistentVolumeClaims"
)

// attempt is what one scheduling attempt of a pod computes once and
// checks against every node.
type attempt struct {
	info        *podInfo
	required    nodeaffinity.RequiredNodeAffinity
	archs       []string // from ArchAnnotation; nil: any
	preferred   *nodeaffinity.PreferredSchedulingTerms
	tolerations []corev1.Toleration
	volumes     *podVolumes
	// interPod and spread are computed over every node by prepare; nil
	// when the pod and the cluster have none. ownLabels are the labels of
	// the pod's namespace.
	interPod  *interPod
	spread    *spread
	ownLabels labels.Set
	// images are the pod's containers' images, as nodes name them.
	images []string
	// spreadSvc and spreadOwner are what the default spread constraints
	// count, when the pod has none of its own (spreadScore).
	spreadSvc   labels.Set
	spreadOwner types.UID
}

func newAttempt(info *podInfo, volumes *podVolumes) *attempt {
	pod := info.pod
	a := &attempt{info: info, required: nodeaffinity.GetRequiredNodeAffinity(pod), tolerations: pod.Spec.Tolerations, volumes: volumes}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			a.images = append(a.images, normalizedImage(cs[i].Image))
		}
	}
	if v, ok := pod.Annotations[ArchAnnotation]; ok {
		for arch := range strings.SplitSeq(v, ",") {
			if arch = strings.TrimSpace(arch); arch != "" {
				a.archs = append(a.archs, arch)
			}
		}
		if a.archs == nil {
			a.archs = []string{} // an empty list: no node fits
		}
	}
	if aff := pod.Spec.Affinity; aff != nil && aff.NodeAffinity != nil && len(aff.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
		// Validation refused invalid terms: an error leaves no preference.
		a.preferred, _ = nodeaffinity.NewPreferredSchedulingTerms(aff.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	return a
}

// prepare computes what the inter-pod affinity and topology spread
// filters need to know of the whole cluster.
func (a *attempt) prepare(c *cache) { a.prepareOver(c, nil) }

// prepareOver computes them over the given nodes: the cluster as it
// would be with some pods taken (preemption), or, if nil, the cluster's.
func (a *attempt) prepareOver(c *cache, nodes []*nodeInfo) {
	a.prepareInterPod(c, nodes)
	if nodes == nil {
		nodes = c.list
	}
	a.prepareSpread(nodes)
}

// filter returns why the pod does not fit the node (nil: it fits): the
// reasons of the first check that fails, in kube-scheduler's order of
// filter plugins (NodeUnschedulable, TaintToleration, NodeAffinity,
// NodePorts, NodeResourcesFit, VolumeBinding, PodTopologySpread,
// InterPodAffinity).
func (a *attempt) filter(n *nodeInfo) []string {
	node := n.node
	if node.Spec.Unschedulable && !a.tolerates(&corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}) {
		return []string{reasonUnschedulable}
	}
	for i := range n.taints {
		if t := &n.taints[i]; !a.tolerates(t) {
			return []string{fmt.Sprintf(reasonTaintFormat, t.Key, t.Value)}
		}
	}
	if !a.nodeAffinityMatches(node) {
		return []string{reasonAffinity}
	}
	if a.portsConflict(n) {
		return []string{reasonPorts}
	}
	if reasons := a.insufficient(n); len(reasons) > 0 {
		return reasons
	}
	if reasons := a.volumes.filter(node); len(reasons) > 0 {
		return reasons
	}
	if reason := a.spreadFilter(n); reason != "" {
		return []string{reason}
	}
	if reason := a.interPodFilter(n); reason != "" {
		return []string{reason}
	}
	return nil
}

// nodeAffinityMatches reports whether the node passes the pod's
// nodeSelector, required node affinity and ArchAnnotation.
func (a *attempt) nodeAffinityMatches(node *corev1.Node) bool {
	ok, err := a.required.Match(node)
	return ok && err == nil && (a.archs == nil || slices.Contains(a.archs, node.Labels[corev1.LabelArchStable]))
}

func (a *attempt) tolerates(t *corev1.Taint) bool {
	// false: isle serves only the Equal and Exists operators, not the Gt
	// and Lt of Kubernetes' TaintTolerationComparisonOperators feature.
	return corev1helpers.TolerationsTolerateTaint(logr.Discard(), a.tolerations, t, false)
}

// portsConflict: a host port the pod asks for is taken on the node, on the
// same address or on all addresses.
func (a *attempt) portsConflict(n *nodeInfo) bool {
	for _, want := range a.info.ports {
		for used := range n.ports {
			if used.port == want.port && used.protocol == want.protocol &&
				(used.ip == want.ip || used.ip == "0.0.0.0" || want.ip == "0.0.0.0") {
				return true
			}
		}
	}
	return false
}

// insufficient lists the resources the node lacks for the pod: requests
// against allocatable minus what the node's pods request, and one more pod
// against the node's pod capacity.
func (a *attempt) insufficient(n *nodeInfo) []string {
	var out []string
	req, alloc, used := a.info.requests, n.allocatable, n.requested
	pods := int64(len(n.pods))
	// Pods nominated to the node that weigh at least as much as this one
	// count as if there: the room preemption made is theirs.
	if len(n.nominated) > 0 {
		used = resources{}
		used.add(n.requested, 1)
		prio := priority(a.info.pod)
		for key, p := range n.nominated {
			if key != a.info.key && priority(p.pod) >= prio {
				used.add(p.requests, 1)
				pods++
			}
		}
	}
	if pods+1 > n.allowedPods {
		out = append(out, reasonTooManyPods)
	}
	if req.milliCPU > 0 && req.milliCPU > alloc.milliCPU-used.milliCPU {
		out = append(out, reasonInsufficient+string(corev1.ResourceCPU))
	}
	if req.memory > 0 && req.memory > alloc.memory-used.memory {
		out = append(out, reasonInsufficient+string(corev1.ResourceMemory))
	}
	if req.ephemeral > 0 && req.ephemeral > alloc.ephemeral-used.ephemeral {
		out = append(out, reasonInsufficient+string(corev1.ResourceEphemeralStorage))
	}
	for name, v := range req.scalar {
		if v > 0 && v > alloc.scalar[name]-used.scalar[name] {
			out = append(out, reasonInsufficient+string(name))
		}
	}
	return out
}

// fitError says why no node fits a pod, as kube-scheduler's FitError:
// "0/5 nodes are available: 3 Insufficient memory, 2 node(s) had
// untolerated taint {node.kubernetes.io/unreachable: }." The counts of
// nodes per reason are sorted as strings, as kube-scheduler sorts them.
// What preemption found follows: " preemption: 0/5 nodes are available:
// 3 No preemption victims found for incoming pod, 2 Preemption is not
// helpful for scheduling."
type fitError struct {
	nodes int
	// preFilter is a reason that holds for every node (a missing claim):
	// no node was looked at.
	preFilter string
	reasons   map[string]int
	// potential are the nodes that failed for reasons preemption may
	// undo; preemption is what it said.
	potential  []*nodeInfo
	preemption string
}

// waitsForPods reports whether some node was ruled out for want of
// other pods there (inter-pod affinity, topology spread): a pod placed
// may change that.
func (e *fitError) waitsForPods() bool {
	return e.reasons[reasonPodAffinity] > 0 || e.reasons[reasonSpread] > 0
}

func (e *fitError) Error() string {
	msg := fmt.Sprintf("0/%d nodes are available: ", e.nodes)
	if e.preFilter != "" {
		msg += e.preFilter + "."
	} else {
		counts := make([]string, 0, len(e.reasons))
		for reason, n := range e.reasons {
			counts = append(counts, fmt.Sprintf("%d %s", n, reason))
		}
		slices.Sort(counts)
		msg += strings.Join(counts, ", ") + "."
	}
	if e.preemption != "" {
		msg += " preemption: " + e.preemption
	}
	return msg
}
