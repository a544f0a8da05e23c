package wire

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// What the control plane and the boards agree on about Nodes' parts.
const (
	// IngressController is the spec.controller of the IngressClasses the
	// boards' ingress serves.
	IngressController = "isle.dev/ingress"
	// LabelLocalPathNode is on each local-path PersistentVolume: the node
	// that holds its directory. A board lists the volumes labelled with its
	// own name (the only volumes it may list) to clean up deleted ones.
	LabelLocalPathNode = "isle.dev/local-path-node"
)

// VolumeOnlyOn reports whether pv's required node affinity admits only
// node (kubernetes.io/hostname In [node] in every term): a local-path
// volume of that node, whose board removes its data.
func VolumeOnlyOn(pv *corev1.PersistentVolume, node string) bool {
	na := pv.Spec.NodeAffinity
	if na == nil || na.Required == nil || len(na.Required.NodeSelectorTerms) == 0 {
		return false
	}
	for _, term := range na.Required.NodeSelectorTerms {
		if !slices.ContainsFunc(term.MatchExpressions, func(e corev1.NodeSelectorRequirement) bool {
			return e.Key == corev1.LabelHostname && e.Operator == corev1.NodeSelectorOpIn && len(e.Values) == 1 && e.Values[0] == node
		}) {
			return false
		}
	}
	return true
}
