package strategy

import (
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Default fills in defaults in place. obj is a pointer to a k8s.io/api type;
// objects of types this package does not know are left as they are.
func Default(obj runtime.Object) {
	if e, ok := lookup(obj); ok && e.defaults != nil {
		e.defaults(obj)
	}
}

// ValidateCreate validates a new object, after Default and after the caller
// has set the system fields (name from generateName, uid, namespace).
//
// Like Kubernetes' Job strategy, it generates a Job's selector and the
// matching pod template labels from the Job's uid when spec.manualSelector
// is not true, so a Job must have its uid before this call.
func ValidateCreate(obj runtime.Object) field.ErrorList {
	e, ok := lookup(obj)
	if !ok {
		return unknownType("validate create", obj)
	}
	errs := e.create(obj)
	if len(errs) == 0 {
		// As the API server's BeforeCreate: the common metadata rules run
		// once the type's own rules passed.
		errs = commonMeta(obj, e.namespaced)
	}
	return dedupe(errs)
}

// ValidateUpdate validates an update of old (the stored object) to obj.
// Fields that may not change are reported with field.Forbidden or
// field.Invalid naming their path. obj must carry the resourceVersion of
// the update (the stored one for an unconditional update).
func ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	e, errs := lookupPair("validate update", obj, old)
	if errs != nil {
		return errs
	}
	errs = append(commonMetaUpdate(obj, old, e.namespaced), e.update(obj, old)...)
	return dedupe(errs)
}

// ValidateStatusUpdate validates a write to the status subresource: the
// metadata and the status of obj against old.
func ValidateStatusUpdate(obj, old runtime.Object) field.ErrorList {
	e, errs := lookupPair("validate status update", obj, old)
	if errs != nil {
		return errs
	}
	errs = commonMetaUpdate(obj, old, e.namespaced)
	if e.status != nil {
		errs = append(errs, e.status(obj, old)...)
	}
	return dedupe(errs)
}

// lookupPair finds the entry for an update and checks both objects share it.
func lookupPair(op string, obj, old runtime.Object) (entry, field.ErrorList) {
	e, ok := lookup(obj)
	if !ok {
		return e, unknownType(op, obj)
	}
	if old == nil || reflect.TypeOf(old) != reflect.TypeOf(obj) || reflect.ValueOf(old).IsNil() {
		return e, field.ErrorList{field.InternalError(nil, fmt.Errorf("strategy: %s: old object is %T, want %T", op, old, obj))}
	}
	return e, nil
}

func lookup(obj runtime.Object) (entry, bool) {
	if obj == nil {
		return entry{}, false
	}
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return entry{}, false
	}
	e, ok := byType[v.Type()]
	return e, ok
}

func unknownType(op string, obj runtime.Object) field.ErrorList {
	return field.ErrorList{field.InternalError(nil, fmt.Errorf("strategy: %s: %w: %T", op, errUnknownType, obj))}
}

var errUnknownType = fmt.Errorf("no strategy for type")

// commonMeta is the metadata check the API server runs for every created
// object: names must at least be path segments.
func commonMeta(obj runtime.Object, namespaced bool) field.ErrorList {
	m, err := meta.Accessor(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), fmt.Errorf("strategy: metadata: %w", err))}
	}
	return apivalidation.ValidateObjectMetaAccessor(m, namespaced, path.ValidatePathSegmentName, field.NewPath("metadata"))
}

// commonMetaUpdate is the metadata check the API server runs for every
// update before the type's own rules.
func commonMetaUpdate(obj, old runtime.Object, namespaced bool) field.ErrorList {
	m, err := meta.Accessor(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), fmt.Errorf("strategy: metadata: %w", err))}
	}
	om, err := meta.Accessor(old)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), fmt.Errorf("strategy: old metadata: %w", err))}
	}
	errs := apivalidation.ValidateObjectMetaAccessor(m, namespaced, path.ValidatePathSegmentName, field.NewPath("metadata"))
	return append(errs, apivalidation.ValidateObjectMetaAccessorUpdate(m, om, field.NewPath("metadata"))...)
}

// dedupe drops errors whose text repeats an earlier one, as Kubernetes'
// aggregated error message does.
func dedupe(errs field.ErrorList) field.ErrorList {
	if len(errs) < 2 {
		return errs
	}
	seen := make(map[string]bool, len(errs))
	out := errs[:0:0]
	for _, e := range errs {
		s := e.Error()
		if seen[s] {
			continue
		}
		seen[s] = true
		out = append(out, e)
	}
	return out
}
