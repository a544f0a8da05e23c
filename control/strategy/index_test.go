package strategy

import (
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// kind is what the tests call of a Kind.
type kind interface {
	applyDefaults(runtime.Object)
	ValidateCreate(runtime.Object) field.ErrorList
	ValidateUpdate(obj, old runtime.Object) field.ErrorList
	ValidateStatusUpdate(obj, old runtime.Object) field.ErrorList
}

// entry is one exported strategy with the Go type it serves.
type entry struct {
	typ  reflect.Type
	kind kind
}

func of[T runtime.Object](k *Kind[T]) entry { return entry{typ: reflect.TypeFor[T](), kind: k} }

// table lists every exported strategy, as the registry's table of kinds
// uses them.
var table = []entry{
	of(Namespace), of(Node), of(Pod), of(Service), of(ConfigMap), of(Secret), of(ServiceAccount), of(Event),
	of(PersistentVolume), of(PersistentVolumeClaim), of(Endpoints), of(PodTemplate), of(ReplicationController), of(StatefulSet), of(ControllerRevision), of(CronJob),
	of(Deployment), of(ReplicaSet), of(DaemonSet), of(Job), of(EndpointSlice), of(Ingress), of(IngressClass), of(NetworkPolicy),
	of(HorizontalPodAutoscaler), of(HorizontalPodAutoscalerV1), of(StorageClass), of(Lease), of(ResourceQuota), of(LimitRange),
}

var byType = func() map[reflect.Type]kind {
	m := make(map[reflect.Type]kind, len(table))
	for _, e := range table {
		m[e.typ] = e.kind
	}
	return m
}()

var errUnknownType = fmt.Errorf("no strategy for type")

func lookup(obj runtime.Object) (kind, bool) {
	if obj == nil || reflect.ValueOf(obj).IsNil() {
		return nil, false
	}
	k, ok := byType[reflect.TypeOf(obj)]
	return k, ok
}

func unknownType(obj runtime.Object) field.ErrorList {
	return field.ErrorList{field.InternalError(nil, fmt.Errorf("strategy: %w: %T", errUnknownType, obj))}
}

// Default applies the defaults of obj's kind.
func Default(obj runtime.Object) {
	if k, ok := lookup(obj); ok {
		k.applyDefaults(obj)
	}
}

// ValidateCreate validates obj with the strategy of its type.
func ValidateCreate(obj runtime.Object) field.ErrorList {
	if k, ok := lookup(obj); ok {
		return k.ValidateCreate(obj)
	}
	return unknownType(obj)
}

// ValidateUpdate validates an update with the strategy of obj's type.
func ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	if k, ok := lookup(obj); ok {
		return k.ValidateUpdate(obj, old)
	}
	return unknownType(obj)
}

// ValidateStatusUpdate validates a status write with the strategy of
// obj's type.
func ValidateStatusUpdate(obj, old runtime.Object) field.ErrorList {
	if k, ok := lookup(obj); ok {
		return k.ValidateStatusUpdate(obj, old)
	}
	return unknownType(obj)
}
