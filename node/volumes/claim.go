package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedulinghelper "k8s.io/component-helpers/scheduling/corev1"
)

// setupClaim finds the directory of the volume bound to a claim of pod:
// a persistentVolumeClaim volume's, or, if ephemeral, the claim Kubernetes
// makes for the pod's generic ephemeral volume (named <pod>-<volume>, owned
// by the pod). Only volumes on this board's disk are supported: hostPath
// (isle's local-path volumes; a missing DirectoryOrCreate directory is
// made 0777, as local-path-provisioner does, so that containers not running
// as root can write) and local (whose directory must exist, as Kubernetes
// requires, lest a disk that is not mounted be filled in its mount point's
// stead).
func (m *Manager) setupClaim(ctx context.Context, pod *corev1.Pod, claimName string, ephemeral bool) (string, error) {
	if claimName == "" {
		return "", errors.New("persistentVolumeClaim has no claimName")
	}
	pvc, err := m.cfg.Sources.PersistentVolumeClaim(ctx, pod.Namespace, claimName)
	if err = lookupError("persistentvolumeclaim", claimName, err); err != nil {
		return "", err
	}
	if pvc == nil {
		return "", fmt.Errorf("get persistentvolumeclaim %q: no object and no error", claimName)
	}
	if ephemeral && !metav1.IsControlledBy(pvc, pod) {
		return "", fmt.Errorf("persistentvolumeclaim %q was not created for this pod", claimName)
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
		return "", fmt.Errorf("persistentvolumeclaim %q is not bound (phase %q)", claimName, pvc.Status.Phase)
	}
	pv, err := m.cfg.Sources.PersistentVolume(ctx, pvc.Spec.VolumeName)
	if err = lookupError("persistentvolume", pvc.Spec.VolumeName, err); err != nil {
		return "", fmt.Errorf("persistentvolumeclaim %q: %w", claimName, err)
	}
	if pv == nil {
		return "", fmt.Errorf("get persistentvolume %q: no object and no error", pvc.Spec.VolumeName)
	}
	p, err := m.volumePath(pv, pvc)
	if err != nil {
		return "", fmt.Errorf("persistentvolumeclaim %q: persistentvolume %q: %w", claimName, pv.Name, err)
	}
	return p, nil
}

// volumePath checks that pv is bound to pvc and may be mounted here, and
// gives its directory.
func (m *Manager) volumePath(pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim) (string, error) {
	ref := pv.Spec.ClaimRef
	if ref == nil || ref.Namespace != pvc.Namespace || ref.Name != pvc.Name || (ref.UID != "" && ref.UID != pvc.UID) {
		return "", errors.New("it is not bound to this claim")
	}
	if pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == corev1.PersistentVolumeBlock {
		return "", errors.New("block volumes are not supported by isle")
	}
	if a := pv.Spec.NodeAffinity; a != nil && a.Required != nil {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: m.cfg.NodeName, Labels: m.cfg.NodeLabels}}
		ok, err := schedulinghelper.MatchNodeSelectorTerms(node, a.Required)
		if err != nil {
			return "", fmt.Errorf("node affinity: %w", err)
		}
		if !ok {
			return "", fmt.Errorf("its node affinity does not allow node %q", m.cfg.NodeName)
		}
	}
	switch {
	case pv.Spec.HostPath != nil:
		return checkHostPath(pv.Spec.HostPath, 0o777)
	case pv.Spec.Local != nil:
		p := pv.Spec.Local.Path
		if !filepath.IsAbs(p) {
			return "", fmt.Errorf("local path %q is not absolute", p)
		}
		fi, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("local path: %w", err)
		}
		if !fi.IsDir() {
			return "", fmt.Errorf("local path %s is not a directory", p)
		}
		return filepath.Clean(p), nil
	}
	if kind := kindOf(pv.Spec.PersistentVolumeSource); kind != "" {
		return "", fmt.Errorf("kind %s is not supported by isle", kind)
	}
	return "", errors.New("no volume source is set")
}
