package scheduler

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/component-helpers/storage/ephemeral"
)

// selectedNodeAnnotation on a PersistentVolumeClaim of a
// WaitForFirstConsumer StorageClass names the node the scheduler chose for
// its first pod; the volume is provisioned for that node.
const selectedNodeAnnotation = "volume.kubernetes.io/selected-node"

// podVolumes is what a pod's PersistentVolumeClaims ask of its node, as
// kube-scheduler's VolumeBinding plugin sees them:
//   - a bound claim's volume may only be used where its node affinity
//     allows (a local disk on one board);
//   - an unbound claim of a WaitForFirstConsumer class fits any node until
//     a node is selected for it; the scheduler selects the pod's node and
//     a volume controller provisions there.
//
// Binding unbound claims to existing PersistentVolumes is the volume
// controller's job; the scheduler does not match them.
type podVolumes struct {
	affinity  []*nodeaffinity.LazyErrorNodeSelector // of the bound claims' volumes
	missingPV bool                                  // a bound claim's volume does not exist
	delayed   []delayedClaim
}

// delayedClaim is an unbound claim of a WaitForFirstConsumer class.
type delayedClaim struct {
	key string // namespace/name
	// selectedNode is the node selected for it, by a scheduler before (its
	// annotation) or by this one, writing it now; empty: none yet.
	selectedNode string
}

// filter returns why the pod's volumes do not fit the node, in
// kube-scheduler's order; nil if they fit or there are none.
func (v *podVolumes) filter(node *corev1.Node) []string {
	if v == nil {
		return nil
	}
	var out []string
	for _, sel := range v.affinity {
		if ok, err := sel.Match(node); !ok || err != nil {
			out = append(out, reasonVolumeConflict)
			break
		}
	}
	for _, c := range v.delayed {
		if c.selectedNode != "" && c.selectedNode != node.Name {
			out = append(out, reasonVolumeBind)
			break
		}
	}
	if v.missingPV {
		out = append(out, reasonVolumeMissingPV)
	}
	return out
}

// claimsToSelect are the delayed claims that have no node yet: the
// scheduler annotates them with the pod's node before it binds the pod.
func (v *podVolumes) claimsToSelect() []string {
	if v == nil {
		return nil
	}
	var out []string
	for _, c := range v.delayed {
		if c.selectedNode == "" {
			out = append(out, c.key)
		}
	}
	return out
}

// podVolumes reads the pod's claims, their volumes and classes (this
// member's copy: their changes retry unschedulable pods anyway). A reason
// that rules out every node comes back as unschedulable (kube-scheduler's
// PreFilter messages); a failure to read, as err.
func (r *run) podVolumes(ctx context.Context, pod *corev1.Pod) (v *podVolumes, unschedulable string, err error) {
	var claims []*corev1.PersistentVolumeClaim
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		var name string
		switch {
		case vol.PersistentVolumeClaim != nil:
			name = vol.PersistentVolumeClaim.ClaimName
		case vol.Ephemeral != nil:
			name = ephemeral.VolumeClaimName(pod, vol)
		default:
			continue
		}
		obj, err := r.store.Get(ctx, r.pvcs, pod.Namespace, name, metav1.GetOptions{ResourceVersion: "0"})
		switch {
		case apierrors.IsNotFound(err) && vol.Ephemeral != nil:
			return nil, fmt.Sprintf("waiting for ephemeral volume controller to create the persistentvolumeclaim %q", name), nil
		case apierrors.IsNotFound(err):
			return nil, fmt.Sprintf("persistentvolumeclaim %q not found", name), nil
		case err != nil:
			return nil, "", fmt.Errorf("read persistentvolumeclaim %q: %w", name, err)
		}
		pvc := obj.(*corev1.PersistentVolumeClaim)
		switch {
		case pvc.Status.Phase == corev1.ClaimLost:
			return nil, fmt.Sprintf("persistentvolumeclaim %q bound to non-existent persistentvolume %q", pvc.Name, pvc.Spec.VolumeName), nil
		case pvc.DeletionTimestamp != nil:
			return nil, fmt.Sprintf("persistentvolumeclaim %q is being deleted", pvc.Name), nil
		}
		if vol.Ephemeral != nil {
			if err := ephemeral.VolumeIsForPod(pod, pvc); err != nil {
				return nil, err.Error(), nil
			}
		}
		claims = append(claims, pvc)
	}
	if len(claims) == 0 {
		return nil, "", nil
	}
	v = &podVolumes{}
	unboundImmediate := false
	for _, pvc := range claims {
		if pvc.Spec.VolumeName != "" {
			if err := r.boundVolume(ctx, pvc, v); err != nil {
				return nil, "", err
			}
			continue
		}
		delay, err := r.waitsForFirstConsumer(ctx, pvc)
		if err != nil {
			return nil, "", err
		}
		if !delay {
			unboundImmediate = true
			continue
		}
		key := pvc.Namespace + "/" + pvc.Name
		selected := pvc.Annotations[selectedNodeAnnotation]
		if selected == "" {
			selected = r.selecting[key]
		}
		v.delayed = append(v.delayed, delayedClaim{key: key, selectedNode: selected})
	}
	if unboundImmediate {
		// The volume controller binds them; the claim's change retries the pod.
		return nil, msgUnboundImmediatePVC, nil
	}
	return v, "", nil
}

// boundVolume adds what the volume of a bound claim asks of the node.
func (r *run) boundVolume(ctx context.Context, pvc *corev1.PersistentVolumeClaim, v *podVolumes) error {
	obj, err := r.store.Get(ctx, r.pvs, "", pvc.Spec.VolumeName, metav1.GetOptions{ResourceVersion: "0"})
	if apierrors.IsNotFound(err) {
		v.missingPV = true
		return nil
	}
	if err != nil {
		return fmt.Errorf("read persistentvolume %q: %w", pvc.Spec.VolumeName, err)
	}
	pv := obj.(*corev1.PersistentVolume)
	if na := pv.Spec.NodeAffinity; na != nil && na.Required != nil {
		v.affinity = append(v.affinity, nodeaffinity.NewLazyErrorNodeSelector(na.Required))
	}
	return nil
}

// waitsForFirstConsumer reports whether an unbound claim's StorageClass
// binds on the first pod (a claim without a class, or whose class does not
// exist, binds at once), as Kubernetes' IsDelayBindingMode.
func (r *run) waitsForFirstConsumer(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (bool, error) {
	// The beta annotation, when present, wins over the field.
	class, annotated := pvc.Annotations[corev1.BetaStorageClassAnnotation]
	if !annotated && pvc.Spec.StorageClassName != nil {
		class = *pvc.Spec.StorageClassName
	}
	if class == "" {
		return false, nil
	}
	obj, err := r.store.Get(ctx, r.classes, "", class, metav1.GetOptions{ResourceVersion: "0"})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read storageclass %q: %w", class, err)
	}
	mode := obj.(*storagev1.StorageClass).VolumeBindingMode
	if mode == nil {
		return false, fmt.Errorf("VolumeBindingMode not set for StorageClass %q", class)
	}
	return *mode == storagev1.VolumeBindingWaitForFirstConsumer, nil
}
