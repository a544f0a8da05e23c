package strategy

import (
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Kind is the strategy of one kind served as the Go type T (a pointer to a
// k8s.io/api type): its defaults, what the server owns in its objects, its
// validation, and its part in status writes and deletion. Its methods take
// runtime.Object, as the registry calls them for any kind, and must be
// given a T; the registry's table of kinds pairs each Kind with its
// resource.
type Kind[T runtime.Object] struct {
	namespaced bool
	defaults   func(T)
	create     func(T) field.ErrorList
	update     func(obj, old T) field.ErrorList
	status     func(obj, old T) field.ErrorList // nil: metadata only
	// onCreate sets what the server owns in a new object, after its
	// defaults; nil clears the status (controllers own it).
	onCreate func(T)
	// onUpdate carries over what the server owns into an update of the
	// main resource, after its defaults; nil: nothing.
	onUpdate func(obj, old T)
	// statusMeta resets the metadata a status write may not change beyond
	// the system fields; nil: none.
	statusMeta func(obj, old metav1.Object)
	// beginDelete marks an object that is being deleted: how long it stays
	// for its node to stop it, and whether it stays for finalizing of its
	// own; nil: neither.
	beginDelete func(obj T, opts metav1.DeleteOptions) (grace int64, stay bool)
	// heldBack reports whether a deleting object must stay though it has
	// no finalizers left; nil: never.
	heldBack func(T) bool
}

// PrepareForCreate fills in the defaults of a new object and sets what the
// server owns in it (its status), before ValidateCreate.
func (k *Kind[T]) PrepareForCreate(obj runtime.Object) {
	o := obj.(T)
	k.applyDefaults(obj)
	if k.onCreate != nil {
		k.onCreate(o)
	} else {
		clearStatus(o)
	}
}

// PrepareForUpdate fills in the defaults of an update of old to obj of the
// main resource and carries over what the server owns, before
// ValidateUpdate.
func (k *Kind[T]) PrepareForUpdate(obj, old runtime.Object) {
	k.applyDefaults(obj)
	if k.onUpdate != nil {
		k.onUpdate(obj.(T), old.(T))
	}
}

// PrepareForStatusUpdate carries over the metadata that a write to the
// status subresource may not change.
func (k *Kind[T]) PrepareForStatusUpdate(obj, old runtime.Object) {
	if k.statusMeta == nil {
		return
	}
	nm, err1 := meta.Accessor(obj)
	om, err2 := meta.Accessor(old)
	if err1 == nil && err2 == nil {
		k.statusMeta(nm, om)
	}
}

// BeginDelete marks obj as being deleted: grace is how long it stays for
// its node to stop it, stay whether it stays for finalizing of its own.
func (k *Kind[T]) BeginDelete(obj runtime.Object, opts metav1.DeleteOptions) (grace int64, stay bool) {
	if k.beginDelete == nil {
		return 0, false
	}
	return k.beginDelete(obj.(T), opts)
}

// HeldBack reports whether a deleting object must stay though no
// finalizers are left.
func (k *Kind[T]) HeldBack(obj runtime.Object) bool {
	return k.heldBack != nil && k.heldBack(obj.(T))
}

func (k *Kind[T]) applyDefaults(obj runtime.Object) {
	if k.defaults != nil {
		k.defaults(obj.(T))
	}
}

// ValidateCreate validates a new object, after PrepareForCreate and after
// the caller has set the system fields (name from generateName, uid,
// namespace).
//
// Like Kubernetes' Job strategy, it generates a Job's selector and the
// matching pod template labels from the Job's uid when spec.manualSelector
// is not true, so a Job must have its uid before this call.
func (k *Kind[T]) ValidateCreate(obj runtime.Object) field.ErrorList {
	o, ok := k.typed(obj)
	if !ok {
		return wrongType("validate create", obj)
	}
	errs := k.create(o)
	if len(errs) == 0 {
		// As the API server's BeforeCreate: the common metadata rules run
		// once the type's own rules passed.
		errs = commonMeta(obj, k.namespaced)
	}
	return dedupe(errs)
}

// ValidateUpdate validates an update of old (the stored object) to obj.
// Fields that may not change are reported with field.Forbidden or
// field.Invalid naming their path. obj must carry the resourceVersion of
// the update (the stored one for an unconditional update).
func (k *Kind[T]) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	o, prev, errs := k.pair("validate update", obj, old)
	if errs != nil {
		return errs
	}
	errs = append(commonMetaUpdate(obj, old, k.namespaced), k.update(o, prev)...)
	return dedupe(errs)
}

// ValidateStatusUpdate validates a write to the status subresource: the
// metadata and the status of obj against old.
func (k *Kind[T]) ValidateStatusUpdate(obj, old runtime.Object) field.ErrorList {
	o, prev, errs := k.pair("validate status update", obj, old)
	if errs != nil {
		return errs
	}
	errs = commonMetaUpdate(obj, old, k.namespaced)
	if k.status != nil {
		errs = append(errs, k.status(o, prev)...)
	}
	return dedupe(errs)
}

// typed returns obj as a T that is not a nil pointer.
func (k *Kind[T]) typed(obj runtime.Object) (T, bool) {
	o, ok := obj.(T)
	return o, ok && !reflect.ValueOf(o).IsNil()
}

// pair returns the objects of an update as T.
func (k *Kind[T]) pair(op string, obj, old runtime.Object) (o, prev T, errs field.ErrorList) {
	o, ok := k.typed(obj)
	if !ok {
		return o, prev, wrongType(op, obj)
	}
	if prev, ok = k.typed(old); !ok {
		return o, prev, field.ErrorList{field.InternalError(nil, fmt.Errorf("strategy: %s: old object is %T, want %T", op, old, obj))}
	}
	return o, prev, nil
}

func wrongType(op string, obj runtime.Object) field.ErrorList {
	return field.ErrorList{field.InternalError(nil, fmt.Errorf("strategy: %s: %w: %T", op, errWrongType, obj))}
}

var errWrongType = fmt.Errorf("object of another type")

// clearStatus zeroes an object's status, if it has one.
func clearStatus(obj runtime.Object) {
	if st := reflect.ValueOf(obj).Elem().FieldByName("Status"); st.IsValid() && st.CanSet() {
		st.Set(reflect.Zero(st.Type()))
	}
}

// keepWriterMeta keeps the labels, annotations, finalizers and owners of a
// status write: the status of pods and nodes, which the boards' credentials
// write, may change none of them, so that a board cannot relabel a pod into
// another Service or itself into another role.
func keepWriterMeta(nm, om metav1.Object) {
	nm.SetLabels(om.GetLabels())
	nm.SetAnnotations(om.GetAnnotations())
	nm.SetFinalizers(om.GetFinalizers())
	nm.SetOwnerReferences(om.GetOwnerReferences())
}

// keepLabels keeps the labels of a status write.
func keepLabels(nm, om metav1.Object) { nm.SetLabels(om.GetLabels()) }

// fields adapts typed field selector getters.
func fields[T runtime.Object](m map[string]func(T) string) map[string]func(runtime.Object) string {
	out := make(map[string]func(runtime.Object) string, len(m))
	for name, get := range m {
		out[name] = func(obj runtime.Object) string { return get(obj.(T)) }
	}
	return out
}

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
