package printers

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPersistentVolumeRows(t *testing.T) {
	bound := boundPV()

	released := boundPV()
	released.Name = "pvc-9c1d"
	released.Annotations = map[string]string{"volume.beta.kubernetes.io/storage-class": "slow"}
	released.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod, corev1.ReadWriteMany, corev1.ReadOnlyMany, corev1.ReadWriteOnce, corev1.ReadWriteMany}
	released.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	released.Spec.VolumeAttributesClassName = ptr("gold")
	released.Spec.VolumeMode = ptr(corev1.PersistentVolumeBlock)
	released.Status = corev1.PersistentVolumeStatus{Phase: corev1.VolumeReleased, Reason: "Released"}

	deleting := boundPV()
	deleting.DeletionTimestamp = agoPtr(time.Second)
	deleting.Spec.ClaimRef = nil
	deleting.Spec.VolumeMode = nil
	deleting.Spec.Capacity = nil
	deleting.Status.Phase = corev1.VolumeAvailable

	tests := []struct {
		name string
		pv   *corev1.PersistentVolume
		want []interface{}
	}{
		{"bound", &bound, []interface{}{"pvc-3f2a", "8Gi", "RWO", "Delete", "Bound", "default/data-db-0", "local-path", "<unset>", "", "5d", "Filesystem"}},
		{"released, all access modes, beta class", &released, []interface{}{"pvc-9c1d", "8Gi", "RWO,ROX,RWX,RWOP", "Retain", "Released", "default/data-db-0", "slow", "gold", "Released", "5d", "Block"}},
		{"terminating", &deleting, []interface{}{"pvc-3f2a", "0", "RWO", "Delete", "Terminating", "", "local-path", "<unset>", "", "5d", "<unset>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkCells(t, gr("", "persistentvolumes"), tt.pv, tt.want)
		})
	}
}

func TestPersistentVolumeClaimRows(t *testing.T) {
	bound := boundPVC()

	pending := corev1.PersistentVolumeClaim{
		ObjectMeta: meta("data-db-1", 40*time.Second),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")}},
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}

	beta := boundPVC()
	beta.Annotations = map[string]string{"volume.beta.kubernetes.io/storage-class": "slow"}
	beta.Spec.VolumeAttributesClassName = ptr("silver")
	beta.Spec.VolumeMode = nil
	beta.DeletionTimestamp = agoPtr(time.Second)

	tests := []struct {
		name string
		pvc  *corev1.PersistentVolumeClaim
		want []interface{}
	}{
		{"bound", &bound, []interface{}{"data-db-0", "Bound", "pvc-3f2a", "8Gi", "RWO", "local-path", "<unset>", "5d", "Filesystem"}},
		{"pending, no class", &pending, []interface{}{"data-db-1", "Pending", "", "", "", "", "<unset>", "40s", "<unset>"}},
		{"terminating, beta class", &beta, []interface{}{"data-db-0", "Terminating", "pvc-3f2a", "8Gi", "RWO", "slow", "silver", "5d", "<unset>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkCells(t, gr("", "persistentvolumeclaims"), tt.pvc, tt.want)
		})
	}
}

func TestStorageClassRows(t *testing.T) {
	def := defaultStorageClass()
	beta := storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: "nfs", CreationTimestamp: ago(time.Hour),
			Annotations: map[string]string{"storageclass.beta.kubernetes.io/is-default-class": "true"}},
		Provisioner:          "nfs.csi.k8s.io",
		ReclaimPolicy:        ptr(corev1.PersistentVolumeReclaimRetain),
		AllowVolumeExpansion: ptr(true),
	}
	plain := storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: "fast", CreationTimestamp: ago(time.Hour), Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "false"}},
		Provisioner: "isle.dev/local-path",
	}
	tests := []struct {
		name string
		sc   *storagev1.StorageClass
		want []interface{}
	}{
		{"default", &def, []interface{}{"local-path (default)", "isle.dev/local-path", "Delete", "WaitForFirstConsumer", false, "90d"}},
		{"beta default, expandable", &beta, []interface{}{"nfs (default)", "nfs.csi.k8s.io", "Retain", "Immediate", true, "60m"}},
		{"defaults applied", &plain, []interface{}{"fast", "isle.dev/local-path", "Delete", "Immediate", false, "60m"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkCells(t, gr("storage.k8s.io", "storageclasses"), tt.sc, tt.want)
		})
	}
}
