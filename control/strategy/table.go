package strategy

import (
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// entry is what the package knows about one Go type.
type entry struct {
	typ        reflect.Type
	namespaced bool
	defaults   func(runtime.Object)
	create     func(runtime.Object) field.ErrorList
	update     func(obj, old runtime.Object) field.ErrorList
	status     func(obj, old runtime.Object) field.ErrorList
}

// rules are the per-type functions, typed.
type rules[T runtime.Object] struct {
	namespaced bool
	defaults   func(T)
	create     func(T) field.ErrorList
	update     func(obj, old T) field.ErrorList
	status     func(obj, old T) field.ErrorList // nil: metadata only
}

// typed turns rules for *T into an entry working on runtime.Object.
func typed[T runtime.Object](r rules[T]) entry {
	e := entry{
		typ:        reflect.TypeFor[T](),
		namespaced: r.namespaced,
		create:     func(o runtime.Object) field.ErrorList { return r.create(o.(T)) },
		update:     func(o, old runtime.Object) field.ErrorList { return r.update(o.(T), old.(T)) },
	}
	if r.defaults != nil {
		e.defaults = func(o runtime.Object) { r.defaults(o.(T)) }
	}
	if r.status != nil {
		e.status = func(o, old runtime.Object) field.ErrorList { return r.status(o.(T), old.(T)) }
	}
	return e
}

// table lists every served type with its functions, in API group order.
var table = []entry{
	// core/v1
	typed(rules[*corev1.Namespace]{defaults: defaultNamespace, create: validateNamespace, update: validateNamespaceUpdate, status: validateNamespaceStatus}),
	typed(rules[*corev1.Node]{defaults: defaultNode, create: validateNode, update: validateNodeUpdate, status: validateNodeUpdate}),
	typed(rules[*corev1.Pod]{namespaced: true, defaults: defaultPod, create: validatePodCreate, update: validatePodUpdate, status: validatePodStatus}),
	typed(rules[*corev1.Service]{namespaced: true, defaults: defaultService, create: validateService, update: validateServiceUpdate, status: validateServiceStatus}),
	typed(rules[*corev1.ConfigMap]{namespaced: true, defaults: defaultConfigMap, create: validateConfigMap, update: validateConfigMapUpdate}),
	typed(rules[*corev1.Secret]{namespaced: true, defaults: defaultSecret, create: validateSecret, update: validateSecretUpdate}),
	typed(rules[*corev1.ServiceAccount]{namespaced: true, create: validateServiceAccount, update: validateServiceAccountUpdate}),
	typed(rules[*corev1.Event]{namespaced: true, create: validateEvent, update: validateEventUpdate}),
	typed(rules[*corev1.PersistentVolume]{defaults: defaultPersistentVolume, create: validatePersistentVolume, update: validatePersistentVolumeUpdate, status: validatePersistentVolumeStatus}),
	typed(rules[*corev1.PersistentVolumeClaim]{namespaced: true, defaults: defaultPersistentVolumeClaim, create: validatePersistentVolumeClaim, update: validatePersistentVolumeClaimUpdate, status: validatePersistentVolumeClaimStatus}),
	typed(rules[*corev1.Endpoints]{namespaced: true, defaults: defaultEndpoints, create: validateEndpoints, update: validateEndpointsUpdate}),
	typed(rules[*corev1.PodTemplate]{namespaced: true, defaults: defaultPodTemplateObject, create: validatePodTemplateObject, update: validatePodTemplateObjectUpdate}),
	// apps/v1
	typed(rules[*appsv1.Deployment]{namespaced: true, defaults: defaultDeployment, create: validateDeployment, update: validateDeploymentUpdate, status: validateDeploymentStatus}),
	typed(rules[*appsv1.ReplicaSet]{namespaced: true, defaults: defaultReplicaSet, create: validateReplicaSet, update: validateReplicaSetUpdate, status: validateReplicaSetStatus}),
	typed(rules[*appsv1.DaemonSet]{namespaced: true, defaults: defaultDaemonSet, create: validateDaemonSet, update: validateDaemonSetUpdate, status: validateDaemonSetStatus}),
	// batch/v1
	typed(rules[*batchv1.Job]{namespaced: true, defaults: defaultJob, create: validateJobCreate, update: validateJobUpdate, status: validateJobStatus}),
	// discovery.k8s.io/v1
	typed(rules[*discoveryv1.EndpointSlice]{namespaced: true, defaults: defaultEndpointSlice, create: validateEndpointSlice, update: validateEndpointSliceUpdate}),
	// networking.k8s.io/v1
	typed(rules[*networkingv1.Ingress]{namespaced: true, create: validateIngress, update: validateIngressUpdate, status: validateIngressStatus}),
	typed(rules[*networkingv1.IngressClass]{defaults: defaultIngressClass, create: validateIngressClass, update: validateIngressClassUpdate}),
	// autoscaling/v2 and autoscaling/v1
	typed(rules[*autoscalingv2.HorizontalPodAutoscaler]{namespaced: true, defaults: defaultHPAv2, create: validateHPAv2, update: validateHPAv2Update, status: validateHPAv2Status}),
	typed(rules[*autoscalingv1.HorizontalPodAutoscaler]{namespaced: true, defaults: defaultHPAv1, create: validateHPAv1, update: validateHPAv1Update, status: validateHPAv1Status}),
	// storage.k8s.io/v1
	typed(rules[*storagev1.StorageClass]{defaults: defaultStorageClass, create: validateStorageClass, update: validateStorageClassUpdate}),
	// coordination.k8s.io/v1
	typed(rules[*coordinationv1.Lease]{namespaced: true, create: validateLease, update: validateLeaseUpdate}),
}

// byType indexes table by the pointer type of the object.
var byType = func() map[reflect.Type]entry {
	m := make(map[reflect.Type]entry, len(table))
	for _, e := range table {
		m[e.typ] = e
	}
	return m
}()
