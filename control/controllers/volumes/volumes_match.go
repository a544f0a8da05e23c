package volumes

import (
	"cmp"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	schedulinghelper "k8s.io/component-helpers/scheduling/corev1"

	"github.com/isle-cluster/isle/control/controllers/kit"
)

// Which volume fits a claim, by the rules of Kubernetes' persistentvolume
// controller (and, for a claim the scheduler has placed, of its volume
// binder). Pure functions of the objects.

// Annotations of the binding protocol, as Kubernetes names them.
const (
	// annBindCompleted marks a claim whose binding has completed once; a
	// claim without it is unbound, whatever else it says.
	annBindCompleted = "pv.kubernetes.io/bind-completed"
	// annBoundByController marks a binding the controller made (its
	// absence: the user pre-bound the objects).
	annBoundByController = "pv.kubernetes.io/bound-by-controller"
	// annSelectedNode is set on a claim of a WaitForFirstConsumer class by
	// the scheduler: the node of the first pod that uses it.
	annSelectedNode = "volume.kubernetes.io/selected-node"
	// annProvisionedBy names the provisioner of a provisioned volume.
	annProvisionedBy = "pv.kubernetes.io/provisioned-by"
	// annStorageProvisioner (and its beta form) name, on a claim, the
	// provisioner asked to provision its volume.
	annStorageProvisioner     = "volume.kubernetes.io/storage-provisioner"
	annBetaStorageProvisioner = "volume.beta.kubernetes.io/storage-provisioner"
)

// pvcHasClass reports whether a claim names a class, even the empty one
// (which asks for volumes without a class and no provisioning).
func pvcHasClass(c *corev1.PersistentVolumeClaim) bool {
	_, ok := c.Annotations[corev1.BetaStorageClassAnnotation]
	return ok || c.Spec.StorageClassName != nil
}

// pvcClass is a claim's class; the beta annotation wins over the field.
func pvcClass(c *corev1.PersistentVolumeClaim) string {
	if class, ok := c.Annotations[corev1.BetaStorageClassAnnotation]; ok {
		return class
	}
	if c.Spec.StorageClassName != nil {
		return *c.Spec.StorageClassName
	}
	return ""
}

// pvClass is a volume's class; the beta annotation wins over the field.
func pvClass(v *corev1.PersistentVolume) string {
	if class, ok := v.Annotations[corev1.BetaStorageClassAnnotation]; ok {
		return class
	}
	return v.Spec.StorageClassName
}

// pvcKey is a claim's work queue key.
func pvcKey(ns, name string) string { return ns + "/" + name }

// pvBoundTo reports whether a volume's claimRef names the claim: the same
// namespace and name, and the claim's UID unless the volume is only
// pre-bound (no UID yet).
func pvBoundTo(v *corev1.PersistentVolume, c *corev1.PersistentVolumeClaim) bool {
	ref := v.Spec.ClaimRef
	return ref != nil && ref.Namespace == c.Namespace && ref.Name == c.Name && (ref.UID == "" || ref.UID == c.UID)
}

// pvClaimRef is the claimRef that binds a volume to c.
func pvClaimRef(c *corev1.PersistentVolumeClaim) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: c.Namespace, Name: c.Name,
		UID: c.UID, ResourceVersion: c.ResourceVersion}
}

// pvModeMismatch reports whether a claim and a volume disagree on the
// volume mode (unset is Filesystem).
func pvModeMismatch(c *corev1.PersistentVolumeClaimSpec, v *corev1.PersistentVolumeSpec) bool {
	mode := func(m *corev1.PersistentVolumeMode) corev1.PersistentVolumeMode {
		if m == nil {
			return corev1.PersistentVolumeFilesystem
		}
		return *m
	}
	return mode(c.VolumeMode) != mode(v.VolumeMode)
}

// pvOffersModes reports whether a volume offers every access mode the
// claim asks for.
func pvOffersModes(v *corev1.PersistentVolume, c *corev1.PersistentVolumeClaim) bool {
	offered := map[corev1.PersistentVolumeAccessMode]bool{}
	for _, m := range v.Spec.AccessModes {
		offered[m] = true
	}
	for _, m := range c.Spec.AccessModes {
		if !offered[m] {
			return false
		}
	}
	return true
}

// pvSatisfies checks a volume the claim asked for by name, as Kubernetes'
// checkVolumeSatisfyClaim: its error is the event's wording.
func pvSatisfies(v *corev1.PersistentVolume, c *corev1.PersistentVolumeClaim) error {
	if v.DeletionTimestamp != nil {
		return fmt.Errorf("the volume is marked for deletion %q", v.Name)
	}
	want, have := c.Spec.Resources.Requests[corev1.ResourceStorage], v.Spec.Capacity[corev1.ResourceStorage]
	switch {
	case have.Cmp(want) < 0:
		return errors.New("requested PV is too small")
	case pvClass(v) != pvcClass(c):
		return errors.New("storageClassName does not match")
	case pvModeMismatch(&c.Spec, &v.Spec):
		return errors.New("incompatible volumeMode")
	case !pvOffersModes(v, c):
		return errors.New("incompatible accessMode")
	}
	return nil
}

// pvFitsNode reports whether a volume's required node affinity admits the
// node.
func pvFitsNode(v *corev1.PersistentVolume, node *corev1.Node) bool {
	if v.Spec.NodeAffinity == nil || v.Spec.NodeAffinity.Required == nil {
		return true
	}
	ok, err := schedulinghelper.MatchNodeSelectorTerms(node, v.Spec.NodeAffinity.Required)
	return err == nil && ok
}

// pvFindMatch picks the volume to bind a claim to, or nil:
//   - a volume pre-bound to the claim (its claimRef names it) wins, even
//     of another class or outside the claim's selector, as long as it is
//     big enough, of the claim's volume mode and access modes and not
//     being deleted;
//   - otherwise an Available volume of the claim's class, access modes
//     (it may offer more) and volume mode, at least as big as the request,
//     matching the claim's selector and volume attributes class: the one
//     with the fewest access modes, then the smallest, then by name;
//   - delayBinding (a WaitForFirstConsumer class) without a node binds
//     only pre-bound volumes: the others wait for the scheduler to choose
//     a node; with the node (the claim's selected-node), a volume must
//     also admit that node.
func pvFindMatch(c *corev1.PersistentVolumeClaim, volumes []*corev1.PersistentVolume, node *corev1.Node, delayBinding bool) (*corev1.PersistentVolume, error) {
	var selector labels.Selector
	if c.Spec.Selector != nil {
		s, err := metav1.LabelSelectorAsSelector(c.Spec.Selector)
		if err != nil {
			return nil, fmt.Errorf("selector of claim %s/%s: %w", c.Namespace, c.Name, err)
		}
		selector = s
	}
	want := c.Spec.Resources.Requests[corev1.ResourceStorage]
	class := pvcClass(c)
	claimVAC := kit.Deref(c.Spec.VolumeAttributesClassName)
	var best *corev1.PersistentVolume
	for _, v := range volumes {
		if v.Spec.ClaimRef != nil && !pvBoundTo(v, c) {
			continue
		}
		have := v.Spec.Capacity[corev1.ResourceStorage]
		if have.Cmp(want) < 0 || pvModeMismatch(&c.Spec, &v.Spec) || !pvOffersModes(v, c) ||
			kit.Deref(v.Spec.VolumeAttributesClassName) != claimVAC || v.DeletionTimestamp != nil {
			continue
		}
		if pvBoundTo(v, c) {
			return v, nil
		}
		switch {
		case delayBinding && node == nil,
			v.Status.Phase != corev1.VolumeAvailable,
			selector != nil && !selector.Matches(labels.Set(v.Labels)),
			pvClass(v) != class,
			node != nil && !pvFitsNode(v, node):
			continue
		}
		if best == nil || pvPrefer(v, best) {
			best = v
		}
	}
	return best, nil
}

// pvPrefer orders fitting volumes: fewer access modes (what the claim asks
// for and little more), then less capacity, then name.
func pvPrefer(a, b *corev1.PersistentVolume) bool {
	qa, qb := a.Spec.Capacity[corev1.ResourceStorage], b.Spec.Capacity[corev1.ResourceStorage]
	if c := cmp.Compare(pvDistinctModes(a), pvDistinctModes(b)); c != 0 {
		return c < 0
	}
	if c := qa.Cmp(qb); c != 0 {
		return c < 0
	}
	return a.Name < b.Name
}

func pvDistinctModes(v *corev1.PersistentVolume) int {
	seen := map[corev1.PersistentVolumeAccessMode]bool{}
	for _, m := range v.Spec.AccessModes {
		seen[m] = true
	}
	return len(seen)
}
