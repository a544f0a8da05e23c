package volumes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/control/wire"
)

// The decisions of the persistentvolume controller, one claim or one
// volume at a time, in the order of Kubernetes' syncClaim and syncVolume.

// errPVTaken fails a binding whose volume another claim took meanwhile.
var errPVTaken = errors.New("the volume is bound to another claim")

// syncClaim syncs one claim (namespace/name).
func (r *pvRun) syncClaim(ctx context.Context, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	claim, err := r.getClaim(ctx, ns, name, false)
	if err != nil || claim == nil {
		return err
	}
	if claim, err = r.protectClaim(ctx, claim); err != nil {
		return err
	}
	if claim.DeletionTimestamp != nil {
		return nil // a claim on its way out gets no volume
	}
	if !metav1.HasAnnotation(claim.ObjectMeta, annBindCompleted) {
		return r.syncUnboundClaim(ctx, claim)
	}
	return r.syncBoundClaim(ctx, claim)
}

// protectClaim keeps the pvc-protection finalizer on a claim that is not
// being deleted, and drops it from a deleted claim no pod on a node uses.
func (r *pvRun) protectClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
	deleting := claim.DeletionTimestamp != nil
	switch has := slices.Contains(claim.Finalizers, registry.FinalizerPVCProtection); {
	case !deleting && !has:
		return r.updateClaim(ctx, claim, "", func(c *corev1.PersistentVolumeClaim) (bool, error) {
			// No finalizer may be added once the claim is being deleted.
			return c.DeletionTimestamp == nil && setFinalizer(&c.ObjectMeta, registry.FinalizerPVCProtection, true), nil
		})
	case deleting && has:
		if used, err := r.claimInUse(ctx, claim); err != nil || used {
			return claim, err
		}
		return r.updateClaim(ctx, claim, "", func(c *corev1.PersistentVolumeClaim) (bool, error) {
			return setFinalizer(&c.ObjectMeta, registry.FinalizerPVCProtection, false), nil
		})
	}
	return claim, nil
}

// claimInUse reports whether a pod on a node uses the claim, as Kubernetes'
// pvc-protection controller sees it: the kubelet may be mounting it.
func (r *pvRun) claimInUse(ctx context.Context, claim *corev1.PersistentVolumeClaim) (bool, error) {
	pods, err := r.listPods(ctx, claim.Namespace, true)
	if err != nil {
		return false, err
	}
	for i := range pods {
		if pods[i].Spec.NodeName != "" && slices.Contains(pvPodClaims(&pods[i]), claim.Name) {
			return true, nil
		}
	}
	return false, nil
}

// syncUnboundClaim finds, waits for or provisions a claim's volume.
func (r *pvRun) syncUnboundClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	if claim.Spec.VolumeName != "" {
		return r.syncRequestedVolume(ctx, claim)
	}
	delay, err := r.delayBinding(ctx, claim)
	if err != nil {
		return err
	}
	selected := claim.Annotations[annSelectedNode]
	var node *corev1.Node
	if delay && selected != "" {
		// A node that does not exist fits no volume; provisioning then
		// hands the claim back to the scheduler.
		if node, err = r.getNode(ctx, selected); err != nil {
			return err
		}
	}
	volumes, err := r.listVolumes(ctx)
	if err != nil {
		return err
	}
	vol, err := pvFindMatch(claim, volumes, node, delay)
	if err != nil {
		return err
	}
	if vol != nil {
		return r.bind(ctx, vol, claim)
	}
	if assigned, err := r.assignDefaultClass(ctx, claim); err != nil || assigned {
		return err // the change brings the claim back
	}
	switch {
	case delay && selected == "":
		if err := r.waitForConsumer(ctx, claim); err != nil {
			return err
		}
	case pvcClass(claim) != "":
		return r.provisionClaim(ctx, claim)
	default:
		r.binderEvents.Eventf(claim, corev1.EventTypeNormal, "FailedBinding", "no persistent volumes available for this claim and no storage class is set")
	}
	_, err = r.setClaimStatus(ctx, claim, corev1.ClaimPending, nil)
	return err
}

// syncRequestedVolume binds a claim to the volume it names, if it can.
func (r *pvRun) syncRequestedVolume(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	vol, err := r.getVolume(ctx, claim.Spec.VolumeName)
	if err != nil {
		return err
	}
	switch {
	case vol == nil:
		// Not there (yet): the claim waits.
	case vol.Spec.ClaimRef == nil:
		if err := pvSatisfies(vol, claim); err != nil {
			r.binderEvents.Eventf(claim, corev1.EventTypeWarning, "VolumeMismatch", "Cannot bind to requested volume %q: %s", vol.Name, err)
			break
		}
		return r.bind(ctx, vol, claim)
	case pvBoundTo(vol, claim):
		return r.bind(ctx, vol, claim)
	default:
		r.binderEvents.Eventf(claim, corev1.EventTypeWarning, "FailedBinding", "volume %q already bound to a different claim.", vol.Name)
		if metav1.HasAnnotation(claim.ObjectMeta, annBoundByController) {
			// The controller's own binding was taken over: only someone
			// removing bind-completed from the claim gets here.
			return fmt.Errorf("bind claim %s/%s to volume %s: %w (%s/%s)", claim.Namespace, claim.Name, vol.Name, errPVTaken,
				vol.Spec.ClaimRef.Namespace, vol.Spec.ClaimRef.Name)
		}
	}
	_, err = r.setClaimStatus(ctx, claim, corev1.ClaimPending, nil)
	return err
}

// syncBoundClaim keeps a bound claim's binding, or declares it Lost.
func (r *pvRun) syncBoundClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	if claim.Spec.VolumeName == "" {
		return r.claimLost(ctx, claim, "ClaimLost", "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!")
	}
	vol, err := r.getVolume(ctx, claim.Spec.VolumeName)
	switch {
	case err != nil:
		return err
	case vol == nil:
		return r.claimLost(ctx, claim, "ClaimLost", "Bound claim has lost its PersistentVolume. Data on the volume is lost!")
	case vol.Spec.ClaimRef == nil, vol.Spec.ClaimRef.UID == claim.UID:
		return r.bind(ctx, vol, claim) // completes or repairs the binding; usually writes nothing
	}
	return r.claimLost(ctx, claim, "ClaimMisbound", "Two claims are bound to the same volume, this one is bound incorrectly")
}

// claimLost moves a claim to Lost, with a warning the first time.
func (r *pvRun) claimLost(ctx context.Context, claim *corev1.PersistentVolumeClaim, reason, message string) error {
	if claim.Status.Phase == corev1.ClaimLost {
		return nil
	}
	if _, err := r.setClaimStatus(ctx, claim, corev1.ClaimLost, nil); err != nil {
		return err
	}
	r.binderEvents.Eventf(claim, corev1.EventTypeWarning, reason, "%s", message)
	return nil
}

// delayBinding reports whether a claim's class binds WaitForFirstConsumer.
func (r *pvRun) delayBinding(ctx context.Context, claim *corev1.PersistentVolumeClaim) (bool, error) {
	name := pvcClass(claim)
	if name == "" {
		return false, nil
	}
	class, err := r.getClass(ctx, name)
	if err != nil || class == nil {
		return false, err
	}
	if class.VolumeBindingMode == nil {
		return false, fmt.Errorf("VolumeBindingMode not set for StorageClass %q", name)
	}
	return *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer, nil
}

// assignDefaultClass gives a claim without a class the default class, for
// claims created before there was one (Kubernetes' retroactive default
// StorageClass assignment).
func (r *pvRun) assignDefaultClass(ctx context.Context, claim *corev1.PersistentVolumeClaim) (bool, error) {
	if pvcHasClass(claim) {
		return false, nil
	}
	def, err := r.store.DefaultStorageClass(ctx)
	if err != nil || def == nil {
		return false, err
	}
	_, err = r.updateClaim(ctx, claim, "", func(c *corev1.PersistentVolumeClaim) (bool, error) {
		if pvcHasClass(c) {
			return false, nil
		}
		c.Spec.StorageClassName = &def.Name
		return true, nil
	})
	return err == nil, err
}

// waitForConsumer says what a WaitForFirstConsumer claim waits for: a pod
// that uses it, or the scheduler to place the pods that do.
func (r *pvRun) waitForConsumer(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	pods, err := r.listPods(ctx, claim.Namespace, false)
	if err != nil {
		return err
	}
	var waiting []string
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" && !pvPodTerminated(p) && slices.Contains(pvPodClaims(p), claim.Name) {
			waiting = append(waiting, p.Name)
		}
	}
	slices.Sort(waiting)
	switch len(waiting) {
	case 0:
		r.binderEvents.Eventf(claim, corev1.EventTypeNormal, "WaitForFirstConsumer", "waiting for first consumer to be created before binding")
	case 1:
		r.binderEvents.Eventf(claim, corev1.EventTypeNormal, "WaitForPodScheduled", "waiting for pod %s to be scheduled", waiting[0])
	default:
		r.binderEvents.Eventf(claim, corev1.EventTypeNormal, "WaitForPodScheduled", "waiting for pods %s to be scheduled", strings.Join(waiting, ","))
	}
	return nil
}

// provisionClaim asks the claim's class's provisioner for a volume: the
// claim is annotated with the provisioner's name and told it waits for it
// (ExternalProvisioning, as Kubernetes says of every provisioner it does
// not run in-tree); isle.dev/local-path then provisions in-process.
func (r *pvRun) provisionClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	name := pvcClass(claim)
	class, err := r.getClass(ctx, name)
	if err != nil {
		return err
	}
	if class == nil {
		r.binderEvents.Eventf(claim, corev1.EventTypeWarning, "ProvisioningFailed", "%s",
			apierrors.NewNotFound(storagev1.Resource("storageclass"), name).Error())
		return nil // a class created later brings the claim back
	}
	if strings.HasPrefix(class.Provisioner, "kubernetes.io/") {
		// Kubernetes' in-tree provisioners, kubernetes.io/no-provisioner
		// among them: none runs here.
		r.binderEvents.Eventf(claim, corev1.EventTypeWarning, "ProvisioningFailed", "no volume plugin matched name: %s", class.Provisioner)
		return nil
	}
	annotated, err := r.updateClaim(ctx, claim, "", func(c *corev1.PersistentVolumeClaim) (bool, error) {
		changed := false
		for _, ann := range []string{annBetaStorageProvisioner, annStorageProvisioner} {
			if c.Annotations[ann] != class.Provisioner {
				metav1.SetMetaDataAnnotation(&c.ObjectMeta, ann, class.Provisioner)
				changed = true
			}
		}
		return changed, nil
	})
	if err != nil {
		if !errors.Is(err, errPVGone) {
			r.binderEvents.Eventf(claim, corev1.EventTypeWarning, "ProvisioningFailed", "Error saving claim: %v", err)
		}
		return err
	}
	claim = annotated
	r.binderEvents.Eventf(claim, corev1.EventTypeNormal, "ExternalProvisioning",
		"Waiting for a volume to be created either by the external provisioner '%s' or manually by the system administrator. "+
			"If volume creation is delayed, please verify that the provisioner is running and correctly registered.", class.Provisioner)
	if class.Provisioner != LocalPathProvisioner {
		return nil
	}
	return r.provisionLocalPath(ctx, claim, class)
}

// bind binds a volume and a claim: the volume's claimRef and phase first,
// then the claim's volumeName and annotations, then its status. Each step
// writes only what is missing; a failure leaves the rest to the next sync.
func (r *pvRun) bind(ctx context.Context, vol *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) error {
	vol, err := r.bindVolume(ctx, vol, claim)
	if err != nil {
		return err
	}
	if vol, err = r.setVolumePhase(ctx, vol, corev1.VolumeBound, ""); err != nil {
		return err
	}
	if claim, err = r.bindClaim(ctx, claim, vol); err != nil {
		return err
	}
	_, err = r.setClaimStatus(ctx, claim, corev1.ClaimBound, vol)
	return err
}

// bindVolume points a volume's claimRef at the claim.
func (r *pvRun) bindVolume(ctx context.Context, vol *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolume, error) {
	prebound := pvBoundTo(vol, claim)
	return r.updateVolume(ctx, vol, "", func(v *corev1.PersistentVolume) (bool, error) {
		if v.Spec.ClaimRef != nil && !pvBoundTo(v, claim) {
			return false, fmt.Errorf("bind volume %s to claim %s/%s: %w", v.Name, claim.Namespace, claim.Name, errPVTaken)
		}
		changed := false
		if ref := v.Spec.ClaimRef; ref == nil || ref.UID != claim.UID {
			v.Spec.ClaimRef, changed = pvClaimRef(claim), true
		}
		if !prebound && !metav1.HasAnnotation(v.ObjectMeta, annBoundByController) {
			metav1.SetMetaDataAnnotation(&v.ObjectMeta, annBoundByController, "yes")
			changed = true
		}
		return changed, nil
	})
}

// bindClaim points a claim's volumeName at the volume and marks the
// binding complete.
func (r *pvRun) bindClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim, vol *corev1.PersistentVolume) (*corev1.PersistentVolumeClaim, error) {
	return r.updateClaim(ctx, claim, "", func(c *corev1.PersistentVolumeClaim) (bool, error) {
		if c.Spec.VolumeName != "" && c.Spec.VolumeName != vol.Name {
			return false, fmt.Errorf("bind claim %s/%s to volume %s: it names volume %s", c.Namespace, c.Name, vol.Name, c.Spec.VolumeName)
		}
		changed := false
		if c.Spec.VolumeName != vol.Name {
			c.Spec.VolumeName, changed = vol.Name, true
			if !metav1.HasAnnotation(c.ObjectMeta, annBoundByController) {
				metav1.SetMetaDataAnnotation(&c.ObjectMeta, annBoundByController, "yes")
			}
		}
		if !metav1.HasAnnotation(c.ObjectMeta, annBindCompleted) {
			metav1.SetMetaDataAnnotation(&c.ObjectMeta, annBindCompleted, "yes")
			changed = true
		}
		return changed, nil
	})
}

// setClaimStatus sets a claim's phase and, from the volume it is bound to
// (nil: none), its access modes and, when it becomes bound, its capacity,
// as Kubernetes' updateClaimStatus.
func (r *pvRun) setClaimStatus(ctx context.Context, claim *corev1.PersistentVolumeClaim, phase corev1.PersistentVolumeClaimPhase,
	vol *corev1.PersistentVolume) (*corev1.PersistentVolumeClaim, error) {
	return r.updateClaim(ctx, claim, "status", func(c *corev1.PersistentVolumeClaim) (bool, error) {
		changed := false
		becoming := c.Status.Phase != phase
		if becoming {
			c.Status.Phase, changed = phase, true
		}
		if vol == nil {
			if c.Status.AccessModes != nil || c.Status.Capacity != nil {
				c.Status.AccessModes, c.Status.Capacity, changed = nil, nil, true
			}
			return changed, nil
		}
		if !equality.Semantic.DeepEqual(c.Status.AccessModes, vol.Spec.AccessModes) {
			c.Status.AccessModes, changed = slices.Clone(vol.Spec.AccessModes), true
		}
		// Only when becoming bound: a later difference may be a resize
		// in progress, which the capacity must not hide.
		if have, ok := c.Status.Capacity[corev1.ResourceStorage]; becoming && (!ok || have.Cmp(vol.Spec.Capacity[corev1.ResourceStorage]) != 0) {
			c.Status.Capacity, changed = vol.Spec.Capacity.DeepCopy(), true
		}
		return changed, nil
	})
}

// setVolumePhase sets a volume's phase (and message) if it changes, with
// the time of the transition.
func (r *pvRun) setVolumePhase(ctx context.Context, vol *corev1.PersistentVolume, phase corev1.PersistentVolumePhase, message string) (*corev1.PersistentVolume, error) {
	return r.updateVolume(ctx, vol, "status", func(v *corev1.PersistentVolume) (bool, error) {
		if v.Status.Phase == phase {
			return false, nil
		}
		now := metav1.NewTime(r.now().UTC().Truncate(time.Second))
		v.Status.Phase, v.Status.Message, v.Status.LastPhaseTransitionTime = phase, message, &now
		return true, nil
	})
}

// volumeFailed moves a volume to Failed, with a warning the first time.
func (r *pvRun) volumeFailed(ctx context.Context, vol *corev1.PersistentVolume, reason, message string) error {
	if vol.Status.Phase == corev1.VolumeFailed {
		return nil
	}
	if _, err := r.setVolumePhase(ctx, vol, corev1.VolumeFailed, message); err != nil {
		return err
	}
	r.binderEvents.Eventf(vol, corev1.EventTypeWarning, reason, "%s", message)
	return nil
}

// syncVolume syncs one volume.
func (r *pvRun) syncVolume(ctx context.Context, name string) error {
	vol, err := r.getVolume(ctx, name)
	if err != nil || vol == nil {
		return err
	}
	if vol, err = r.protectVolume(ctx, vol); err != nil {
		return err
	}
	ref := vol.Spec.ClaimRef
	if ref == nil || ref.UID == "" {
		// Unused, or pre-bound to a claim that has not taken it yet.
		_, err := r.setVolumePhase(ctx, vol, corev1.VolumeAvailable, "")
		return err
	}
	// A fresh read: a claim missing from the local copy only because it
	// was created a moment ago must not release its volume.
	claim, err := r.getClaim(ctx, ref.Namespace, ref.Name, true)
	if err != nil {
		return err
	}
	if claim != nil && claim.UID != ref.UID {
		claim = nil // deleted, and another made with its name
	}
	switch {
	case claim == nil:
		return r.release(ctx, vol)
	case claim.Spec.VolumeName == "":
		if pvModeMismatch(&claim.Spec, &vol.Spec) {
			r.binderEvents.Eventf(vol, corev1.EventTypeWarning, "VolumeMismatch",
				"Cannot bind PersistentVolume to requested PersistentVolumeClaim %q due to incompatible volumeMode.", claim.Name)
			r.binderEvents.Eventf(claim, corev1.EventTypeWarning, "VolumeMismatch",
				"Cannot bind PersistentVolume %q to requested PersistentVolumeClaim due to incompatible volumeMode.", vol.Name)
			return nil
		}
		// The claim's sync completes the binding (a provisioned volume
		// gets here first).
		r.claims.Add(pvcKey(claim.Namespace, claim.Name))
		return nil
	case claim.Spec.VolumeName == vol.Name:
		_, err := r.setVolumePhase(ctx, vol, corev1.VolumeBound, "")
		return err
	case metav1.HasAnnotation(vol.ObjectMeta, annProvisionedBy) && vol.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete:
		// Provisioned for a claim that was bound elsewhere: not needed.
		return r.release(ctx, vol)
	}
	return r.unbindVolume(ctx, vol)
}

// protectVolume keeps the pv-protection finalizer on a volume that is not
// being deleted and drops it from a deleted volume that is not Bound; it
// also keeps a local-path volume's cleanup finalizer in step with its
// reclaim policy.
func (r *pvRun) protectVolume(ctx context.Context, vol *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
	return r.updateVolume(ctx, vol, "", func(v *corev1.PersistentVolume) (bool, error) {
		// The node label its board lists its volumes by (volumes made
		// before there was one get it too, deleted ones included).
		labelled := false
		if node := localPathNode(v); node != "" && v.Labels[wire.LabelLocalPathNode] != node {
			metav1.SetMetaDataLabel(&v.ObjectMeta, wire.LabelLocalPathNode, node)
			labelled = true
		}
		if v.DeletionTimestamp != nil {
			removed := v.Status.Phase != corev1.VolumeBound && setFinalizer(&v.ObjectMeta, registry.FinalizerPVProtection, false)
			return removed || labelled, nil
		}
		changed := setFinalizer(&v.ObjectMeta, registry.FinalizerPVProtection, true) || labelled
		if v.Annotations[annProvisionedBy] == LocalPathProvisioner {
			wantCleanup := v.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete
			changed = setFinalizer(&v.ObjectMeta, LocalPathCleanupFinalizer, wantCleanup) || changed
		}
		return changed, nil
	})
}

// release marks a volume whose claim is gone Released (a Failed one stays
// Failed, so the user sees what went wrong) and reclaims it.
func (r *pvRun) release(ctx context.Context, vol *corev1.PersistentVolume) error {
	if vol.Status.Phase != corev1.VolumeReleased && vol.Status.Phase != corev1.VolumeFailed {
		var err error
		if vol, err = r.setVolumePhase(ctx, vol, corev1.VolumeReleased, ""); err != nil {
			return err
		}
		r.log.Info("persistentvolume controller: volume released", "volume", vol.Name,
			"reclaimPolicy", vol.Spec.PersistentVolumeReclaimPolicy)
	}
	switch vol.Spec.PersistentVolumeReclaimPolicy {
	case corev1.PersistentVolumeReclaimRetain:
		return nil
	case corev1.PersistentVolumeReclaimDelete:
		return r.deleteVolume(ctx, vol)
	case corev1.PersistentVolumeReclaimRecycle:
		// Deprecated in Kubernetes; isle has no recycler.
		return r.volumeFailed(ctx, vol, "VolumeFailedRecycle", "No recycler plugin found for the volume!")
	}
	return r.volumeFailed(ctx, vol, "VolumeUnknownReclaimPolicy", "Volume has unrecognized PersistentVolumeReclaimPolicy")
}

// deleteVolume carries out the Delete reclaim policy.
func (r *pvRun) deleteVolume(ctx context.Context, vol *corev1.PersistentVolume) error {
	switch provisioner := vol.Annotations[annProvisionedBy]; {
	case provisioner == LocalPathProvisioner:
		if vol.DeletionTimestamp != nil {
			return nil
		}
		// The node removes the directory, then the cleanup finalizer.
		uid := vol.UID
		_, _, err := r.store.Delete(ctx, r.pvs, "", vol.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("delete released volume %s: %w", vol.Name, err)
		}
		return nil
	case provisioner != "":
		return nil // its provisioner deletes what it made
	}
	return r.volumeFailed(ctx, vol, "VolumeFailedDelete",
		fmt.Sprintf("error getting deleter volume plugin for volume %q: no deletable volume plugin matched", vol.Name))
}

// unbindVolume undoes a binding the claim did not complete (it is bound to
// another volume): a volume the controller bound becomes free, one the user
// pre-bound stays pre-bound to that claim by name.
func (r *pvRun) unbindVolume(ctx context.Context, vol *corev1.PersistentVolume) error {
	vol, err := r.updateVolume(ctx, vol, "", func(v *corev1.PersistentVolume) (bool, error) {
		switch {
		case v.Spec.ClaimRef == nil:
			return false, nil
		case metav1.HasAnnotation(v.ObjectMeta, annBoundByController):
			v.Spec.ClaimRef = nil
			delete(v.Annotations, annBoundByController)
			if len(v.Annotations) == 0 {
				v.Annotations = nil
			}
		default:
			ref := *v.Spec.ClaimRef
			ref.UID = ""
			v.Spec.ClaimRef = &ref
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	_, err = r.setVolumePhase(ctx, vol, corev1.VolumeAvailable, "")
	return err
}
