package registry

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The admission Kubernetes gives volumes and claims on create.

// Finalizers of Kubernetes' StorageObjectInUseProtection admission: every
// new claim and volume gets one, and the persistentvolume controller drops
// it once the claim is used by no pod on a node, or the volume is no longer
// bound, so neither disappears from under a workload.
const (
	FinalizerPVCProtection = "kubernetes.io/pvc-protection"
	FinalizerPVProtection  = "kubernetes.io/pv-protection"
)

// Annotations that mark a StorageClass as the default (GA and beta forms).
const (
	annDefaultStorageClass     = "storageclass.kubernetes.io/is-default-class"
	annBetaDefaultStorageClass = "storageclass.beta.kubernetes.io/is-default-class"
)

// PersistentVolumeAdmission gives every new volume the pv-protection
// finalizer.
var PersistentVolumeAdmission = &Admission{
	Create: func(_ context.Context, _ *Store, obj runtime.Object) error {
		pv := obj.(*corev1.PersistentVolume)
		pv.Finalizers = addFinalizer(pv.Finalizers, FinalizerPVProtection)
		return nil
	},
}

// PersistentVolumeClaimAdmission gives every new claim the pvc-protection
// finalizer and, if it names no class, the default StorageClass.
var PersistentVolumeClaimAdmission = &Admission{
	Create: func(ctx context.Context, s *Store, obj runtime.Object) error {
		pvc := obj.(*corev1.PersistentVolumeClaim)
		pvc.Finalizers = addFinalizer(pvc.Finalizers, FinalizerPVCProtection)
		if err := s.admitDefaultStorageClass(ctx, pvc); err != nil {
			return err
		}
		return s.admitLimits(ctx, pvc)
	},
}

// admitDefaultStorageClass gives a claim that names no class the default
// StorageClass, as Kubernetes' DefaultStorageClass admission plugin. An
// empty storageClassName asks for no class and is kept.
func (s *Store) admitDefaultStorageClass(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	if _, ok := pvc.Annotations[corev1.BetaStorageClassAnnotation]; ok || pvc.Spec.StorageClassName != nil {
		return nil
	}
	def, err := s.DefaultStorageClass(ctx)
	if err != nil || def == nil {
		return err
	}
	pvc.Spec.StorageClassName = &def.Name
	return nil
}

// DefaultStorageClass returns the StorageClass annotated as the default;
// of several, the newest, then the first by name, as Kubernetes picks it.
// It is nil if there is none.
func (s *Store) DefaultStorageClass(ctx context.Context) (*storagev1.StorageClass, error) {
	r, _ := s.resources.Lookup(storagev1.SchemeGroupVersion.WithResource("storageclasses"))
	list, err := s.List(ctx, r, "", metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, err
	}
	var def *storagev1.StorageClass
	for i := range list.(*storagev1.StorageClassList).Items {
		sc := &list.(*storagev1.StorageClassList).Items[i]
		if sc.Annotations[annDefaultStorageClass] != "true" && sc.Annotations[annBetaDefaultStorageClass] != "true" {
			continue
		}
		if def == nil || sc.CreationTimestamp.After(def.CreationTimestamp.Time) ||
			sc.CreationTimestamp.Equal(&def.CreationTimestamp) && sc.Name < def.Name {
			def = sc
		}
	}
	return def, nil
}
