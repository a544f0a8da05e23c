package registry

import (
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"unicode"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/isle-cluster/isle/control/openapi"
)

// DefaultManager is the field manager of writes that name none: the
// in-process controllers', under the name kube-controller-manager has
// (tools that ignore its fields by name find them).
const DefaultManager = "kube-controller-manager"

// maxManagerLength bounds a field manager's name, as kube-apiserver does.
const maxManagerLength = 128

// ManagerFor is a request's field manager: the fieldManager it names,
// else its user agent's name ("kubectl/v1.33.0 ..." → "kubectl"), as
// kube-apiserver takes it.
func ManagerFor(fieldManager, userAgent string) string {
	if fieldManager != "" {
		return fieldManager
	}
	name, _, _ := strings.Cut(userAgent, "/")
	name = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return -1
	}, name)
	if len(name) > maxManagerLength {
		name = name[:maxManagerLength]
	}
	return name
}

// ValidateManager checks a fieldManager query parameter (path names the
// parameter in the error): at most 128 printable characters.
func ValidateManager(manager string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(manager) > maxManagerLength {
		errs = append(errs, field.TooLong(path, manager, maxManagerLength))
	}
	for _, r := range manager {
		if !unicode.IsPrint(r) {
			errs = append(errs, field.Invalid(path, manager, "must only contain printable characters"))
			break
		}
	}
	return errs
}

// fieldManagers record who owns which fields of every object written
// (metadata.managedFields) and merge server-side apply patches, with the
// library kube-apiserver uses (k8s.io/apimachinery's managedfields over
// sigs.k8s.io/structured-merge-diff), for the Go kinds of the table.
type fieldManagers struct {
	resources  *Resources
	once       sync.Once
	types      managedfields.TypeConverter
	err        error
	mu         sync.Mutex
	byKey      map[fieldManagerKey]*managedfields.FieldManager
	generation uint64 // of the resources byKey was pruned at
}

type fieldManagerKey struct {
	r   *Resource
	sub string
}

// typeConverter builds, at first use, the apply schema of every Go kind
// served, from their OpenAPI models.
func (f *fieldManagers) typeConverter() (managedfields.TypeConverter, error) {
	f.once.Do(func() {
		b := openapi.NewBuilder()
		for _, r := range f.resources.All() {
			if _, ok := r.New().(runtime.Unstructured); !ok {
				b.AddKind(reflect.TypeOf(r.New()), r.GVK())
			}
		}
		f.types, f.err = managedfields.NewTypeConverter(b.Models(), false)
	})
	return f.types, f.err
}

// manager returns the field manager of a resource's writes through sub
// ("" the resource, "status", "scale").
func (f *fieldManagers) manager(r *Resource, sub string) (*managedfields.FieldManager, error) {
	key := fieldManagerKey{r: r, sub: sub}
	f.mu.Lock()
	defer f.mu.Unlock()
	if fm, ok := f.byKey[key]; ok {
		return fm, nil
	}
	if gen := f.resources.Generation(); gen != f.generation {
		// Resources came and went: forget the managers of those gone.
		for k := range f.byKey {
			if cur, ok := f.resources.Lookup(k.r.GroupVersionResource); !ok || cur != k.r {
				delete(f.byKey, k)
			}
		}
		f.generation = gen
	}
	newFieldManager := managedfields.NewDefaultFieldManager
	var types managedfields.TypeConverter
	_, unstructured := r.New().(runtime.Unstructured)
	switch {
	case unstructured && r.ApplyTypes != nil:
		// A kind with a schema (a CRD's): its fields as the schema says.
		var err error
		if types, err = r.ApplyTypes(); err != nil {
			return nil, fmt.Errorf("registry: apply schema of %s: %w", r, err)
		}
		newFieldManager = managedfields.NewDefaultCRDFieldManager
	case unstructured:
		// A kind with no Go type: its fields are deduced from the object,
		// every one atomic.
		types, newFieldManager = managedfields.NewDeducedTypeConverter(), managedfields.NewDefaultCRDFieldManager
	default:
		var err error
		if types, err = f.typeConverter(); err != nil {
			return nil, fmt.Errorf("registry: apply schema: %w", err)
		}
	}
	// What a write through sub may not change is not its writer's: the
	// status of a write to the resource, the spec of a write to its status.
	var reset *fieldpath.Set
	switch {
	case sub == "" && r.Status:
		reset = fieldpath.NewSet(fieldpath.MakePathOrDie("status"))
	case sub == "status" || sub == "approval":
		reset = fieldpath.NewSet(fieldpath.MakePathOrDie("spec"))
	}
	var resetFields map[fieldpath.APIVersion]fieldpath.Filter
	if reset != nil {
		resetFields = map[fieldpath.APIVersion]fieldpath.Filter{fieldpath.APIVersion(r.GroupVersion().String()): fieldpath.NewExcludeSetFilter(reset)}
	}
	conv := convertor{resources: f.resources}
	fm, err := newFieldManager(types, conv, noDefaults{}, conv, r.GVK(), r.GroupVersion(), sub, resetFields)
	if err != nil {
		return nil, fmt.Errorf("registry: field manager of %s: %w", r, err)
	}
	if f.byKey == nil {
		f.byKey = map[fieldManagerKey]*managedfields.FieldManager{}
	}
	f.byKey[key] = fm
	return fm, nil
}

// update records manager's changes from old to obj in obj's managed
// fields. Tracking never fails a write: on an error obj keeps old's.
func (f *fieldManagers) update(r *Resource, sub string, old, obj runtime.Object, manager string) runtime.Object {
	if manager == "" {
		manager = DefaultManager
	}
	fm, err := f.manager(r, sub)
	if err != nil {
		slog.Error("registry: managed fields not tracked", "resource", r.String(), "err", err)
		om, err1 := meta.Accessor(old)
		nm, err2 := meta.Accessor(obj)
		if err1 == nil && err2 == nil {
			nm.SetManagedFields(om.GetManagedFields())
		}
		return obj
	}
	setGVK(r, old)
	setGVK(r, obj)
	return fm.UpdateNoErrors(old, obj, manager)
}

// apply merges a server-side apply patch into live (an empty object of
// the kind if there is none) as manager's; conflicts with other managers'
// fields are a 409 naming them, unless force.
func (f *fieldManagers) apply(r *Resource, sub string, live runtime.Object, patch map[string]any, manager string, force bool) (runtime.Object, error) {
	fm, err := f.manager(r, sub)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	setGVK(r, live)
	out, err := fm.Apply(live, &unstructured.Unstructured{Object: patch}, manager, force)
	if err != nil {
		if _, ok := err.(apierrors.APIStatus); ok {
			return nil, err
		}
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return out, nil
}

func setGVK(r *Resource, obj runtime.Object) {
	obj.GetObjectKind().SetGroupVersionKind(r.GVK())
}

// convertor converts between a kind's served versions, and from
// unstructured content to its Go type, for the field managers.
type convertor struct{ resources *Resources }

func (c convertor) Convert(in, out, context any) error {
	return fmt.Errorf("registry: convert %T to %T: not supported", in, out)
}

func (c convertor) ConvertFieldLabel(gvk schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

func (c convertor) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	gvk := in.GetObjectKind().GroupVersionKind()
	want, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{gvk})
	if !ok {
		return nil, fmt.Errorf("registry: %s has no version for %v", gvk, target)
	}
	to, ok := c.resources.ForKind(want)
	if !ok {
		return nil, fmt.Errorf("registry: %s is not served", want)
	}
	if u, ok := in.(runtime.Unstructured); ok {
		from, ok := c.resources.ForKind(gvk)
		if !ok {
			return nil, fmt.Errorf("registry: %s is not served", gvk)
		}
		obj := from.New()
		if _, isU := obj.(runtime.Unstructured); !isU {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), obj); err != nil {
				return nil, fmt.Errorf("registry: %s: %w", gvk, err)
			}
			setGVK(from, obj)
			in = obj
		}
	}
	if gvk == want {
		return in, nil
	}
	from, _ := c.resources.ForKind(gvk)
	if from == nil || from.Convert == nil {
		return nil, fmt.Errorf("registry: %s cannot be converted to %s", gvk, want)
	}
	out, err := from.Convert(in, to.GroupVersion())
	if err != nil {
		return nil, err
	}
	setGVK(to, out)
	return out, nil
}

// New is the field managers' ObjectCreater: an empty object of a kind.
func (c convertor) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	r, ok := c.resources.ForKind(gvk)
	if !ok {
		return nil, fmt.Errorf("registry: %s is not served", gvk)
	}
	obj := r.New()
	setGVK(r, obj)
	return obj, nil
}

// noDefaults: an applied object is defaulted by the write path, as every
// write is, after the merge.
type noDefaults struct{}

func (noDefaults) Default(runtime.Object) {}
