package printers

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Printers of storage: persistent volumes, their claims, storage classes.

// Annotations that still take part in printing.
const (
	// betaStorageClassAnnotation names a volume's or claim's class and wins
	// over spec.storageClassName.
	betaStorageClassAnnotation = "volume.beta.kubernetes.io/storage-class"
	// defaultClassAnnotation and its beta form mark the default class.
	defaultClassAnnotation     = "storageclass.kubernetes.io/is-default-class"
	betaDefaultClassAnnotation = "storageclass.beta.kubernetes.io/is-default-class"
)

func printPersistentVolume(pv *corev1.PersistentVolume, now time.Time) []interface{} {
	claim := ""
	if ref := pv.Spec.ClaimRef; ref != nil {
		claim = ref.Namespace + "/" + ref.Name
	}
	capacity := pv.Spec.Capacity[corev1.ResourceStorage]
	phase := string(pv.Status.Phase)
	if pv.DeletionTimestamp != nil {
		phase = "Terminating"
	}
	class := pv.Spec.StorageClassName
	if c, ok := pv.Annotations[betaStorageClassAnnotation]; ok {
		class = c
	}
	return []interface{}{
		pv.Name,
		quantity(&capacity),
		accessModes(pv.Spec.AccessModes),
		string(pv.Spec.PersistentVolumeReclaimPolicy),
		phase,
		claim,
		class,
		stringOr(pv.Spec.VolumeAttributesClassName, unset),
		pv.Status.Reason,
		since(pv.CreationTimestamp, now),
		volumeMode(pv.Spec.VolumeMode),
	}
}

func printPersistentVolumeClaim(pvc *corev1.PersistentVolumeClaim, now time.Time) []interface{} {
	phase := string(pvc.Status.Phase)
	if pvc.DeletionTimestamp != nil {
		phase = "Terminating"
	}
	// Capacity and access modes are the bound volume's, shown once bound.
	capacity, modes := "", ""
	if pvc.Spec.VolumeName != "" {
		modes = accessModes(pvc.Status.AccessModes)
		q := pvc.Status.Capacity[corev1.ResourceStorage]
		capacity = quantity(&q)
	}
	class := stringOr(pvc.Spec.StorageClassName, "")
	if c, ok := pvc.Annotations[betaStorageClassAnnotation]; ok {
		class = c
	}
	return []interface{}{
		pvc.Name,
		phase,
		pvc.Spec.VolumeName,
		capacity,
		modes,
		class,
		stringOr(pvc.Spec.VolumeAttributesClassName, unset),
		since(pvc.CreationTimestamp, now),
		volumeMode(pvc.Spec.VolumeMode),
	}
}

// accessModes abbreviates access modes, always in the order RWO, ROX, RWX,
// RWOP, each once.
func accessModes(modes []corev1.PersistentVolumeAccessMode) string {
	has := make(map[corev1.PersistentVolumeAccessMode]bool, len(modes))
	for _, m := range modes {
		has[m] = true
	}
	var out []string
	for _, m := range []struct {
		mode  corev1.PersistentVolumeAccessMode
		short string
	}{
		{corev1.ReadWriteOnce, "RWO"},
		{corev1.ReadOnlyMany, "ROX"},
		{corev1.ReadWriteMany, "RWX"},
		{corev1.ReadWriteOncePod, "RWOP"},
	} {
		if has[m.mode] {
			out = append(out, m.short)
		}
	}
	return strings.Join(out, ",")
}

func volumeMode(m *corev1.PersistentVolumeMode) string {
	if m == nil {
		return unset
	}
	return string(*m)
}

// stringOr returns *s, or def when s is nil.
func stringOr(s *string, def string) string {
	if s == nil {
		return def
	}
	return *s
}

func printStorageClass(sc *storagev1.StorageClass, now time.Time) []interface{} {
	name := sc.Name
	if isDefaultClass(sc.ObjectMeta) {
		name += " (default)"
	}
	reclaim := string(corev1.PersistentVolumeReclaimDelete)
	if sc.ReclaimPolicy != nil {
		reclaim = string(*sc.ReclaimPolicy)
	}
	binding := string(storagev1.VolumeBindingImmediate)
	if sc.VolumeBindingMode != nil {
		binding = string(*sc.VolumeBindingMode)
	}
	expansion := false
	if sc.AllowVolumeExpansion != nil {
		expansion = *sc.AllowVolumeExpansion
	}
	return []interface{}{name, sc.Provisioner, reclaim, binding, expansion, since(sc.CreationTimestamp, now)}
}

func isDefaultClass(meta metav1.ObjectMeta) bool {
	return meta.Annotations[defaultClassAnnotation] == "true" || meta.Annotations[betaDefaultClassAnnotation] == "true"
}
