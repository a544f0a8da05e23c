package crd

import (
	"fmt"
	"slices"
	"strings"
	"time"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/util/jsonpath"

	"github.com/isle-cluster/isle/control/openapi"
	"github.com/isle-cluster/isle/control/registry"
)

// Resources returns the registry's resources of an established CRD: one
// per version (the stored version always, to read and write what is
// stored; the versions not served are marked so).
func Resources(c *CustomResourceDefinition, poster Poster) ([]*registry.Resource, error) {
	names := c.Status.AcceptedNames
	if names.Plural == "" {
		names = c.Spec.Names
	}
	if names.ListKind == "" {
		names.ListKind = names.Kind + "List"
	}
	if names.Singular == "" {
		names.Singular = strings.ToLower(names.Kind)
	}
	storage := ""
	for _, v := range c.Spec.Versions {
		if v.Storage {
			storage = v.Name
		}
	}
	if storage == "" {
		return nil, fmt.Errorf("crd: %s has no storage version", c.Name)
	}
	var out []*registry.Resource
	for _, v := range c.Spec.Versions {
		if !v.Served && !v.Storage {
			continue
		}
		gv := schema.GroupVersion{Group: c.Spec.Group, Version: v.Name}
		var s *JSONSchemaProps
		if v.Schema != nil {
			s = v.Schema.OpenAPIV3Schema
		}
		st := &crStrategy{schema: s, namespaced: c.Spec.Scope == NamespaceScoped, status: v.Subresources != nil && v.Subresources.Status != nil, crd: c.Name}
		r := &registry.Resource{
			GroupVersionResource: gv.WithResource(names.Plural),
			Kind:                 names.Kind,
			Singular:             names.Singular,
			ShortNames:           names.ShortNames,
			Categories:           names.Categories,
			Namespaced:           c.Spec.Scope == NamespaceScoped,
			New:                  func() runtime.Object { return newObject(gv.WithKind(names.Kind)) },
			NewList: func() runtime.Object {
				l := &unstructured.UnstructuredList{}
				l.SetGroupVersionKind(gv.WithKind(names.ListKind))
				return l
			},
			Strategy: st,
			Table:    newTable(v.AdditionalPrinterColumns),
			Status:   st.status,
			Unserved: !v.Served,
			Prune:    st.prunedFields,
			Read:     st.read,
			Fields:   selectableFields(v.SelectableFields),
		}
		if c.DeletionTimestamp != nil {
			r.Terminating = "create not allowed while custom resource definition is terminating"
		}
		if v.Subresources != nil && v.Subresources.Scale != nil {
			r.Scale = scaleOf(v.Subresources.Scale)
		}
		if v.Name != storage {
			r.StorageVersion = storage
		}
		if len(c.Spec.Versions) > 1 {
			r.Convert = convertNone
			if conv := c.Spec.Conversion; conv != nil && conv.Strategy == WebhookConverter && conv.Webhook != nil && conv.Webhook.ClientConfig != nil && poster != nil {
				r.Convert = webhookConverter(c, poster)
			}
		}
		if s != nil {
			c, v, names := c, v, names
			r.Model, r.ListModel = modelName(c.Spec.Group, v.Name, names.Kind), modelName(c.Spec.Group, v.Name, names.Kind)+"List"
			r.ApplyTypes = func() (managedfields.TypeConverter, error) {
				return managedfields.NewTypeConverter(models(c, v, names), false)
			}
			r.OpenAPIDefs = func(v3 bool) map[string]map[string]any {
				ms := models(c, v, names)
				model := ms[r.Model]
				if !v3 {
					model = v2Model(model, c.Spec.PreserveUnknownFields)
				}
				return map[string]map[string]any{r.Model: openapi.SchemaJSON(model, v3), r.ListModel: openapi.SchemaJSON(ms[r.ListModel], v3)}
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// GroupVersionResourceOf names a version of a CRD's resource.
func GroupVersionResourceOf(c *CustomResourceDefinition, version string) schema.GroupVersionResource {
	plural := c.Status.AcceptedNames.Plural
	if plural == "" {
		plural = c.Spec.Names.Plural
	}
	return schema.GroupVersionResource{Group: c.Spec.Group, Version: version, Resource: plural}
}

func newObject(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	return u
}

// convertNone converts between versions as the None strategy does: the
// apiVersion changes, nothing else.
func convertNone(obj runtime.Object, to schema.GroupVersion) (runtime.Object, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("crd: convert %T: not a custom object", obj)
	}
	out := u.DeepCopy()
	out.SetAPIVersion(to.String())
	return out, nil
}

// crStrategy is the write rules of a custom resource's objects: pruning,
// defaults and validation by its version's schema, and the metadata rules
// of every object.
type crStrategy struct {
	schema     *JSONSchemaProps
	namespaced bool
	status     bool
	crd        string
}

func content(obj runtime.Object) map[string]any {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.Object
	}
	return nil
}

func (s *crStrategy) prepare(obj runtime.Object) {
	if c := content(obj); c != nil && s.schema != nil {
		pruneAndDefault(c, s.schema, true)
	}
}

// read defaults an object read from storage.
func (s *crStrategy) read(obj runtime.Object) {
	if c := content(obj); c != nil && s.schema != nil {
		for k, v := range c {
			if ps, ok := s.schema.Properties[k]; ok && k != "metadata" {
				applyDefaults(v, &ps)
			}
		}
		for k, ps := range s.schema.Properties {
			if _, ok := c[k]; !ok && ps.Default != nil && k != "metadata" {
				if d, err := ps.Default.Value(); err == nil {
					applyDefaults(d, &ps)
					c[k] = d
				}
			}
		}
	}
}

// selectableFields are a version's field selectors beyond the name and
// namespace: the value at each path, as a string.
func selectableFields(sf []SelectableField) map[string]func(runtime.Object) string {
	if len(sf) == 0 {
		return nil
	}
	out := map[string]func(runtime.Object) string{}
	for _, f := range sf {
		path := splitPath(f.JSONPath)
		out[strings.TrimPrefix(f.JSONPath, ".")] = func(obj runtime.Object) string {
			v, ok, _ := unstructured.NestedFieldNoCopy(content(obj), path...)
			if !ok || v == nil {
				return ""
			}
			return fmt.Sprint(v)
		}
	}
	return out
}

func (s *crStrategy) prunedFields(obj runtime.Object) []string {
	if c := content(obj); c != nil && s.schema != nil {
		return prunedFields(c, s.schema)
	}
	return nil
}

// PrepareForCreate prunes and defaults; the status of a resource with a
// status subresource is the controllers' to set.
func (s *crStrategy) PrepareForCreate(obj runtime.Object) {
	if s.status {
		delete(content(obj), "status")
	}
	s.prepare(obj)
}

// PrepareForUpdate prunes and defaults.
func (s *crStrategy) PrepareForUpdate(obj, old runtime.Object) { s.prepare(obj) }

// PrepareForStatusUpdate prunes and defaults.
func (s *crStrategy) PrepareForStatusUpdate(obj, old runtime.Object) { s.prepare(obj) }

func (s *crStrategy) validate(obj runtime.Object) field.ErrorList {
	m, err := metaOf(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	errs := apivalidation.ValidateObjectMetaAccessor(m, s.namespaced, path.ValidatePathSegmentName, field.NewPath("metadata"))
	if s.schema == nil {
		return errs
	}
	c := content(obj)
	for k, v := range c {
		if k == "apiVersion" || k == "kind" || k == "metadata" {
			continue
		}
		if ps, ok := s.schema.Properties[k]; ok {
			errs = append(errs, validateValue(v, &ps, field.NewPath(k))...)
		}
	}
	for _, r := range s.schema.Required {
		if _, ok := c[r]; !ok && r != "apiVersion" && r != "kind" && r != "metadata" {
			errs = append(errs, field.Required(field.NewPath(r), ""))
		}
	}
	return errs
}

func metaOf(obj runtime.Object) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("crd: %T has no metadata", obj)
	}
	return m, nil
}

// ValidateCreate validates a new object.
func (s *crStrategy) ValidateCreate(obj runtime.Object) field.ErrorList { return s.validate(obj) }

// ValidateUpdate validates an update.
func (s *crStrategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	errs := s.validate(obj)
	nm, err1 := metaOf(obj)
	om, err2 := metaOf(old)
	if err1 == nil && err2 == nil {
		errs = append(errs, apivalidation.ValidateObjectMetaAccessorUpdate(nm, om, field.NewPath("metadata"))...)
	}
	return errs
}

// ValidateStatusUpdate validates a status write.
func (s *crStrategy) ValidateStatusUpdate(obj, old runtime.Object) field.ErrorList {
	return s.ValidateUpdate(obj, old)
}

// BeginDelete: custom objects go at once (finalizers aside).
func (s *crStrategy) BeginDelete(runtime.Object, metav1.DeleteOptions) (int64, bool) { return 0, false }

// HeldBack: nothing holds a custom object but its finalizers.
func (s *crStrategy) HeldBack(runtime.Object) bool { return false }

// scaleOf reads and sets replicas at the scale subresource's paths.
func scaleOf(sc *CustomResourceSubresourceScale) *registry.Scale {
	specPath := splitPath(sc.SpecReplicasPath)
	statusPath := splitPath(sc.StatusReplicasPath)
	var selectorPath []string
	if sc.LabelSelectorPath != nil {
		selectorPath = splitPath(*sc.LabelSelectorPath)
	}
	return &registry.Scale{
		Replicas: func(obj runtime.Object) (int32, int32, *metav1.LabelSelector) {
			c := content(obj)
			spec, _, _ := unstructured.NestedInt64(c, specPath...)
			status, _, _ := unstructured.NestedInt64(c, statusPath...)
			var sel *metav1.LabelSelector
			if selectorPath != nil {
				if s, ok, _ := unstructured.NestedString(c, selectorPath...); ok {
					if ls, err := metav1.ParseToLabelSelector(s); err == nil {
						sel = ls
					}
				}
			}
			return int32(spec), int32(status), sel
		},
		SetReplicas: func(obj runtime.Object, n int32) {
			_ = unstructured.SetNestedField(content(obj), int64(n), specPath...)
		},
	}
}

func splitPath(p string) []string { return strings.Split(strings.TrimPrefix(p, "."), ".") }

// table prints custom objects with the CRD's printer columns.
type table struct {
	columns []metav1.TableColumnDefinition
	paths   []*jsonpath.JSONPath
	types   []string
}

func parseJSONPath(p string) (*jsonpath.JSONPath, error) {
	j := jsonpath.New("column").AllowMissingKeys(true)
	if err := j.Parse("{" + p + "}"); err != nil {
		return nil, err
	}
	return j, nil
}

func newTable(cols []CustomResourceColumnDefinition) *table {
	t := &table{columns: []metav1.TableColumnDefinition{{Name: "Name", Type: "string", Format: "name",
		Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]}}}
	if len(cols) == 0 {
		cols = []CustomResourceColumnDefinition{{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]}}
	}
	for _, c := range cols {
		j, err := parseJSONPath(c.JSONPath)
		if err != nil {
			continue
		}
		t.columns = append(t.columns, metav1.TableColumnDefinition{Name: c.Name, Type: c.Type, Format: c.Format, Description: c.Description, Priority: c.Priority})
		t.paths = append(t.paths, j)
		t.types = append(t.types, c.Type)
	}
	return t
}

// Columns are the name and the printer columns.
func (t *table) Columns() []metav1.TableColumnDefinition { return slices.Clone(t.columns) }

// Rows prints an object or a list.
func (t *table) Rows(obj runtime.Object, now time.Time) ([]metav1.TableRow, error) {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		return []metav1.TableRow{t.row(o, now)}, nil
	case *unstructured.UnstructuredList:
		rows := make([]metav1.TableRow, 0, len(o.Items))
		for i := range o.Items {
			rows = append(rows, t.row(&o.Items[i], now))
		}
		return rows, nil
	}
	return nil, fmt.Errorf("crd: print %T: not a custom object", obj)
}

func (t *table) row(u *unstructured.Unstructured, now time.Time) metav1.TableRow {
	cells := []any{u.GetName()}
	for i, j := range t.paths {
		results, err := j.FindResults(u.Object)
		if err != nil || len(results) == 0 || len(results[0]) == 0 {
			cells = append(cells, nil)
			continue
		}
		v := results[0][0].Interface()
		switch t.types[i] {
		case "date":
			if s, ok := v.(string); ok {
				if ts, err := time.Parse(time.RFC3339, s); err == nil {
					v = duration.HumanDuration(now.Sub(ts))
				}
			}
		case "string":
			if _, ok := v.(string); !ok {
				v = fmt.Sprint(v)
			}
		}
		cells = append(cells, v)
	}
	return metav1.TableRow{Cells: cells}
}
