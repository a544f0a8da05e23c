package strategy

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// PersistentVolume is the strategy of core/v1 PersistentVolumes; a new one
// is Pending.
var PersistentVolume = &Kind[*corev1.PersistentVolume]{defaults: defaultPersistentVolume, create: validatePersistentVolume, update: validatePersistentVolumeUpdate, status: validatePersistentVolumeStatus,
	onCreate: func(o *corev1.PersistentVolume) {
		o.Status = corev1.PersistentVolumeStatus{Phase: corev1.VolumePending}
	}}

// PersistentVolumeClaim is the strategy of core/v1 PersistentVolumeClaims;
// a new one is Pending.
var PersistentVolumeClaim = &Kind[*corev1.PersistentVolumeClaim]{namespaced: true, defaults: defaultPersistentVolumeClaim, create: validatePersistentVolumeClaim, update: validatePersistentVolumeClaimUpdate, status: validatePersistentVolumeClaimStatus,
	onCreate: func(o *corev1.PersistentVolumeClaim) {
		o.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}
	}}

// StorageClass is the strategy of storage.k8s.io/v1 StorageClasses.
var StorageClass = &Kind[*storagev1.StorageClass]{defaults: defaultStorageClass, create: validateStorageClass, update: validateStorageClassUpdate}
