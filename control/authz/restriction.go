package authz

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Labels whose value says what a board is: only a server board (a member
// of the control plane) may carry them, as isle's agent sets them.
const (
	labelRole         = "isle.dev/role"
	labelControlPlane = "node-role.kubernetes.io/control-plane"
	roleServer        = "server"
)

// kubeletLabels are the labels of the kubernetes.io and k8s.io namespaces
// a node may set on itself, as upstream's NodeRestriction allows them;
// kubeletLabelDomains are the namespaces whose every label it may set.
var (
	kubeletLabels = []string{
		corev1.LabelHostname, corev1.LabelArchStable, corev1.LabelOSStable,
		"beta.kubernetes.io/arch", "beta.kubernetes.io/os", corev1.LabelInstanceType, corev1.LabelInstanceTypeStable,
		corev1.LabelFailureDomainBetaRegion, corev1.LabelFailureDomainBetaZone, corev1.LabelTopologyRegion, corev1.LabelTopologyZone,
	}
	kubeletLabelDomains = []string{"kubelet.kubernetes.io", "node.kubernetes.io"}
)

// AdmitNode is NodeRestriction for a node's write of its own Node (old is
// nil for a create): it never sets labels of node-restriction.kubernetes.io
// or the kubernetes.io and k8s.io labels a kubelet may not set; its
// kubernetes.io/hostname is its own name; only a server board says it is
// one (isle.dev/role=server, node-role.kubernetes.io/control-plane); it
// sets no pod CIDR (the control plane assigns it) and changes no taints.
func (n *NodeAuthorizer) AdmitNode(u *User, obj, old *corev1.Node) error {
	node := NodeName(u)
	if node == "" {
		return nil
	}
	deny := func(format string, args ...any) error {
		return apierrors.NewForbidden(corev1.Resource("nodes"), obj.Name, fmt.Errorf(format, args...))
	}
	var oldLabels map[string]string
	if old != nil {
		oldLabels = old.Labels
	}
	var bad []string
	for _, k := range modifiedLabels(obj.Labels, oldLabels) {
		if !kubeletMaySet(k) {
			bad = append(bad, k)
		}
	}
	if len(bad) > 0 {
		if old == nil {
			return deny("node %q is not allowed to set the following labels: %s", node, strings.Join(bad, ", "))
		}
		return deny("node %q is not allowed to modify labels: %s", node, strings.Join(bad, ", "))
	}
	if h, ok := obj.Labels[corev1.LabelHostname]; ok && h != node {
		return deny("node %q may only set %s to its own name, not %q", node, corev1.LabelHostname, h)
	}
	if n.IsServer == nil || !n.IsServer(node) {
		claims := obj.Labels[labelRole] == roleServer && oldLabels[labelRole] != roleServer ||
			hasKey(obj.Labels, labelControlPlane) && !hasKey(oldLabels, labelControlPlane)
		if claims {
			return deny("node %q is not a server of the control plane: it may not set %s=%s or %s", node, labelRole, roleServer, labelControlPlane)
		}
	}
	if old == nil {
		if obj.Spec.PodCIDR != "" || len(obj.Spec.PodCIDRs) > 0 {
			return deny("node %q is not allowed to set its pod CIDR: the control plane assigns it", node)
		}
		return nil
	}
	if obj.Spec.PodCIDR != old.Spec.PodCIDR || !slices.Equal(obj.Spec.PodCIDRs, old.Spec.PodCIDRs) {
		return deny("node %q is not allowed to modify its pod CIDR", node)
	}
	if !equality.Semantic.DeepEqual(obj.Spec.Taints, old.Spec.Taints) {
		return deny("node %q is not allowed to modify taints", node)
	}
	return nil
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// modifiedLabels are the keys added, removed or changed, sorted.
func modifiedLabels(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// kubeletMaySet reports whether a node may set the label key on itself.
func kubeletMaySet(key string) bool {
	if slices.Contains(kubeletLabels, key) {
		return true
	}
	domain, _, ok := strings.Cut(key, "/")
	if !ok {
		return true
	}
	if domain == "node-restriction.kubernetes.io" || strings.HasSuffix(domain, ".node-restriction.kubernetes.io") {
		return false
	}
	if key == labelControlPlane {
		return true // checked against the board's role
	}
	for _, d := range kubeletLabelDomains {
		if domain == d || strings.HasSuffix(domain, "."+d) {
			return true
		}
	}
	for _, d := range []string{"kubernetes.io", "k8s.io"} {
		if domain == d || strings.HasSuffix(domain, "."+d) {
			return false
		}
	}
	return true
}
