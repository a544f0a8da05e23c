package volumes

import (
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/control/wire"
)

// The isle.dev/local-path provisioner: a claim of its class gets a
// directory on the node the scheduler chose for the first pod that uses
// it, as Rancher's local-path-provisioner (k3s' default) gives it.
//
// Contract with the node agent, which reads it from the objects (it
// reaches the control plane only through the Kubernetes API):
//
//   - A volume provisioned here has the annotation
//     pv.kubernetes.io/provisioned-by: isle.dev/local-path, a hostPath
//     source of type DirectoryOrCreate at
//     /var/lib/isle/storage/<pv name>_<claim namespace>_<claim name>,
//     and required node affinity kubernetes.io/hostname In [<the node's
//     kubernetes.io/hostname label, or its name>]: only that node mounts
//     it.
//   - The agent creates the directory when it first mounts the volume,
//     with mode 0777 as local-path-provisioner does, so that containers
//     not running as root can write to it.
//   - While the volume's reclaim policy is Delete, it carries the
//     finalizer isle.dev/local-path-cleanup. Once such a volume is being
//     deleted (the controller deletes it when its claim is gone), the agent
//     of its node removes the directory and its contents, without following
//     symbolic links out of it, and then removes the finalizer. No one else
//     removes it; an administrator may, when the node is gone for good.
//   - A volume with the Retain policy has no such finalizer: deleting it
//     leaves the directory and its data on the node, as Kubernetes leaves
//     the storage of a retained volume to the administrator. The agent
//     never removes a directory on its own account.
//
// The directory is a hostPath rather than a local volume because the
// kubelet (and isle's agent) create a DirectoryOrCreate path on mount,
// where a local volume's path must exist before it is mounted.
const (
	// LocalPathProvisioner is the provisioner of isle's default class.
	LocalPathProvisioner = "isle.dev/local-path"
	// LocalPathCleanupFinalizer holds a deleted local-path volume until its
	// node has removed its directory.
	LocalPathCleanupFinalizer = "isle.dev/local-path-cleanup"
	// localPathRoot is the directory of local-path volumes on a node that
	// does not name its own with annLocalPathRoot.
	localPathRoot = "/var/lib/isle/storage"
	// annLocalPathRoot on a Node names the directory of its local-path
	// volumes (its agent's DATA-DIR/storage; node/agent sets it).
	annLocalPathRoot = "isle.dev/local-path-root"
	// localPathClass is the name of isle's default StorageClass.
	localPathClass = "local-path"
)

// LocalPathStorageClass is the StorageClass every isle cluster starts
// with, and its default: local-path, provisioned by isle.dev/local-path on
// the node of the claim's first pod (WaitForFirstConsumer, so that the
// scheduler, not the volume, chooses the node), deleted with its claim.
func LocalPathStorageClass() *storagev1.StorageClass {
	reclaim := corev1.PersistentVolumeReclaimDelete
	binding := storagev1.VolumeBindingWaitForFirstConsumer
	return &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: localPathClass,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner:       LocalPathProvisioner,
		ReclaimPolicy:     &reclaim,
		VolumeBindingMode: &binding,
	}
}

// pvProvisionedName is the name of the volume provisioned for a claim, as
// Kubernetes names it.
func pvProvisionedName(c *corev1.PersistentVolumeClaim) string {
	return "pvc-" + string(c.UID)
}

// provisionLocalPath makes the volume of a claim of a local-path class on
// its selected node. Refusals are reported (ProvisioningFailed) and not
// retried: the claim has to change first.
func (r *pvRun) provisionLocalPath(ctx context.Context, claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass) error {
	name := pvProvisionedName(claim)
	if existing, err := r.getVolume(ctx, name); err != nil || existing != nil {
		return err // made already; the binding follows
	}
	failed := func(reason string) {
		r.provisionerEvents.Eventf(claim, corev1.EventTypeWarning, "ProvisioningFailed",
			"failed to provision volume with StorageClass %q: %s", class.Name, reason)
	}
	if err := localPathRefuses(claim, class); err != nil {
		failed(err.Error())
		return nil
	}
	nodeName := claim.Annotations[annSelectedNode]
	if nodeName == "" {
		// An Immediate class: nothing says where the directory should be.
		failed("configuration error, no node was specified")
		return nil
	}
	node, err := r.getNode(ctx, nodeName)
	if err != nil {
		return err
	}
	if node == nil {
		// Gone since the scheduler chose it: let the scheduler choose again.
		r.provisionerEvents.Eventf(claim, corev1.EventTypeWarning, "ProvisioningFailed", "failed to get target node: %v",
			apierrors.NewNotFound(corev1.Resource("node"), nodeName))
		_, err := r.updateClaim(ctx, claim, "", func(c *corev1.PersistentVolumeClaim) (bool, error) {
			if c.Annotations[annSelectedNode] != nodeName {
				return false, nil
			}
			delete(c.Annotations, annSelectedNode)
			return true, nil
		})
		return err
	}
	r.provisionerEvents.Eventf(claim, corev1.EventTypeNormal, "Provisioning", "External provisioner is provisioning volume for claim %q",
		pvcKey(claim.Namespace, claim.Name))
	_, err = r.store.Create(ctx, r.pvs, "", localPathVolume(name, claim, class, node), registry.WriteOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		failed(err.Error())
		return fmt.Errorf("create volume %s for claim %s/%s: %w", name, claim.Namespace, claim.Name, err)
	}
	r.provisionerEvents.Eventf(claim, corev1.EventTypeNormal, "ProvisioningSucceeded", "Successfully provisioned volume %s", name)
	return nil
}

// localPathRefuses says why a claim cannot have a local-path volume of
// this class, if it cannot: a directory on one node is mounted by the
// pods of that node only, as a filesystem, empty, as it is.
func localPathRefuses(claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass) error {
	for _, m := range claim.Spec.AccessModes {
		if m != corev1.ReadWriteOnce && m != corev1.ReadWriteOncePod {
			return fmt.Errorf("%s only supports ReadWriteOnce and ReadWriteOncePod access modes", LocalPathProvisioner)
		}
	}
	switch {
	case claim.Spec.VolumeMode != nil && *claim.Spec.VolumeMode == corev1.PersistentVolumeBlock:
		return fmt.Errorf("%s does not support block volumes", LocalPathProvisioner)
	case claim.Spec.DataSource != nil || claim.Spec.DataSourceRef != nil:
		return fmt.Errorf("%s cannot populate a volume from a data source", LocalPathProvisioner)
	case kit.Deref(claim.Spec.VolumeAttributesClassName) != "":
		return fmt.Errorf("%s does not support volume attributes classes", LocalPathProvisioner)
	case len(class.MountOptions) > 0:
		return fmt.Errorf("%s does not support mount options", LocalPathProvisioner)
	case len(class.Parameters) > 0:
		return fmt.Errorf("%s takes no parameters, got %s", LocalPathProvisioner,
			strings.Join(slices.Sorted(maps.Keys(class.Parameters)), ", "))
	}
	return nil
}

// localPathVolume is the volume provisioned for a claim on a node, bound
// to the claim from the start.
func localPathVolume(name string, claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, node *corev1.Node) *corev1.PersistentVolume {
	host := node.Labels[corev1.LabelHostname]
	if host == "" {
		host = node.Name
	}
	reclaim := corev1.PersistentVolumeReclaimDelete
	if class.ReclaimPolicy != nil {
		reclaim = *class.ReclaimPolicy
	}
	dirType := corev1.HostPathDirectoryOrCreate
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{annProvisionedBy: LocalPathProvisioner},
			Labels: map[string]string{wire.LabelLocalPathNode: host}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: claim.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes:                   slices.Clone(claim.Spec.AccessModes),
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              pvcClass(claim),
			VolumeMode:                    claim.Spec.VolumeMode,
			ClaimRef:                      pvClaimRef(claim),
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{host}}},
			}}}},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: path.Join(nodeLocalPathRoot(node), name+"_"+claim.Namespace+"_"+claim.Name), Type: &dirType}},
		},
	}
	if reclaim == corev1.PersistentVolumeReclaimDelete {
		pv.Finalizers = []string{LocalPathCleanupFinalizer}
	}
	return pv
}

// localPathNode is the node that holds a local-path volume's directory, as
// its node affinity names it ("" for another volume).
func localPathNode(v *corev1.PersistentVolume) string {
	if v.Annotations[annProvisionedBy] != LocalPathProvisioner || v.Spec.NodeAffinity == nil || v.Spec.NodeAffinity.Required == nil {
		return ""
	}
	for _, term := range v.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if e.Key == corev1.LabelHostname && e.Operator == corev1.NodeSelectorOpIn && len(e.Values) == 1 {
				return e.Values[0]
			}
		}
	}
	return ""
}

// nodeLocalPathRoot is where the node keeps its local-path volumes: the
// directory it announces, if it is a clean absolute path, or the default.
func nodeLocalPathRoot(node *corev1.Node) string {
	if r := node.Annotations[annLocalPathRoot]; path.IsAbs(r) && path.Clean(r) == r && r != "/" {
		return r
	}
	return localPathRoot
}
