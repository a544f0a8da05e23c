package openapi

import (
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Models are OpenAPI schema definitions by name ("io.k8s.api.core.v1.Pod"),
// as kube-apiserver names them. One set serves /openapi/v2, the documents
// of /openapi/v3 and server-side apply's type converter.
type Models map[string]*spec.Schema

// Extensions kube-apiserver's schemas carry.
const (
	extGVK           = "x-kubernetes-group-version-kind"
	extPatchStrategy = "x-kubernetes-patch-strategy"
	extPatchMergeKey = "x-kubernetes-patch-merge-key"
	extListType      = "x-kubernetes-list-type"
	extListMapKeys   = "x-kubernetes-list-map-keys"
	extMapType       = "x-kubernetes-map-type"
)

// The hooks kube-openapi's generator honours on a Go type.
type (
	schemaTyper  interface{ OpenAPISchemaType() []string }
	schemaFormer interface{ OpenAPISchemaFormat() string }
	swaggerDoc   interface{ SwaggerDoc() map[string]string }
)

// Builder reflects Go API types into Models: a field's JSON name, type and
// format from the struct and its tags, its description from the type's
// SwaggerDoc, the patch strategy from its patchStrategy and patchMergeKey
// tags, and the list and map types server-side apply needs from the tags
// and the overrides of listTypes (the +listType markers of k8s.io/api's
// sources, which no tag carries).
type Builder struct {
	models Models
	names  map[reflect.Type]string
}

// NewBuilder returns an empty builder.
func NewBuilder() *Builder {
	return &Builder{models: Models{}, names: map[reflect.Type]string{}}
}

// Models returns what was added.
func (b *Builder) Models() Models { return b.models }

// AddKind adds the model of a kind's Go type (a struct or a pointer to one)
// with the group-version-kinds it is served as, and returns its name.
func (b *Builder) AddKind(t reflect.Type, gvks ...schema.GroupVersionKind) string {
	name := b.ref(t)
	m := b.models[name]
	have, _ := m.Extensions[extGVK].([]any)
	for _, gvk := range gvks {
		have = append(have, map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind})
	}
	sort.SliceStable(have, func(i, j int) bool { return gvkKey(have[i]) < gvkKey(have[j]) })
	m.AddExtension(extGVK, have)
	return name
}

func gvkKey(v any) string {
	m, _ := v.(map[string]any)
	return m["group"].(string) + "/" + m["version"].(string) + "/" + m["kind"].(string)
}

// ModelName is the name kube-apiserver gives a Go type's model: its
// package path with the domain reversed ("k8s.io/api/core/v1".Pod →
// "io.k8s.api.core.v1.Pod"). (The types' OpenAPIModelName methods say the
// same; calling them would keep a thousand of them in the binary.)
func ModelName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if name, ok := packageNames[t.PkgPath()]; ok {
		return name + "." + t.Name()
	}
	parts := strings.Split(t.PkgPath(), "/")
	domain := strings.Split(parts[0], ".")
	for i, j := 0, len(domain)-1; i < j; i, j = i+1, j-1 {
		domain[i], domain[j] = domain[j], domain[i]
	}
	parts[0] = strings.Join(domain, ".")
	return strings.Join(parts, ".") + "." + t.Name()
}

// packageNames are the model name prefixes of isle's own Go types of
// upstream APIs: upstream's names.
var packageNames = map[string]string{
	"github.com/isle-cluster/isle/control/crd": "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1",
}

// ref adds the model of a named struct type (or a type with its own schema
// type) and returns its name.
func (b *Builder) ref(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if name, ok := b.names[t]; ok {
		return name
	}
	name := ModelName(t)
	b.names[t] = name
	s := &spec.Schema{}
	b.models[name] = s
	zero := reflect.New(t).Elem().Interface()
	var docs map[string]string
	if d, ok := zero.(swaggerDoc); ok {
		docs = d.SwaggerDoc()
	}
	s.Description = docs[""]
	if st, ok := zero.(schemaTyper); ok {
		s.Type = st.OpenAPISchemaType()
		if f, ok := zero.(schemaFormer); ok {
			s.Format = f.OpenAPISchemaFormat()
		}
		return name
	}
	s.Type = spec.StringOrArray{"object"}
	b.fields(s, name, t, docs)
	if len(s.Required) == 0 {
		s.Required = nil
	}
	if mt, ok := structTypes[name]; ok {
		s.AddExtension(extMapType, mt)
	}
	return name
}

// fields adds the JSON fields of struct t (and of the structs it inlines)
// to s, the schema of model.
func (b *Builder) fields(s *spec.Schema, model string, t reflect.Type, docs map[string]string) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && (name == "" || strings.Contains(opts, "inline")) && ft.Kind() == reflect.Struct {
			var inner map[string]string
			if d, ok := reflect.New(ft).Elem().Interface().(swaggerDoc); ok {
				inner = d.SwaggerDoc()
			}
			b.fields(s, model, ft, inner)
			continue
		}
		if name == "" {
			name = f.Name
		}
		p := b.schemaOf(f.Type)
		p.Description = docs[name]
		if ps := f.Tag.Get("patchStrategy"); ps != "" {
			p.AddExtension(extPatchStrategy, ps)
		}
		if mk := f.Tag.Get("patchMergeKey"); mk != "" {
			p.AddExtension(extPatchMergeKey, mk)
		}
		if lt, ok := listTypes[model+"."+name]; ok {
			lt.apply(p)
		}
		if def, ok := defaults[model+"."+name]; ok {
			p.Default = def
		}
		required := !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero")
		if required {
			// A required field that is not a pointer is its zero value
			// when missing (a list item's key, for server-side apply).
			if p.Default == nil && f.Type.Kind() != reflect.Pointer {
				switch f.Type.Kind() {
				case reflect.String:
					p.Default = ""
				case reflect.Int32, reflect.Int64, reflect.Int:
					p.Default = 0
				}
			}
		}
		if s.Properties == nil {
			s.Properties = map[string]spec.Schema{}
		}
		s.Properties[name] = *p
		if required {
			s.Required = append(s.Required, name)
		}
	}
}

var rawExtension = reflect.TypeFor[runtime.RawExtension]()

// schemaOf returns the schema of a field or element of type t.
func (b *Builder) schemaOf(t reflect.Type) *spec.Schema {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	zero := reflect.New(t).Elem().Interface()
	if _, ok := zero.(schemaTyper); ok {
		return spec.RefSchema("#/definitions/" + b.ref(t))
	}
	if t == rawExtension {
		// Embedded JSON (a ControllerRevision's data): any value, applied
		// whole, as kube-apiserver's apply schema has it.
		s := &spec.Schema{}
		s.AddExtension(extMapType, "atomic")
		s.AddExtension(extListType, "atomic")
		return s
	}
	switch t.Kind() {
	case reflect.Struct:
		return spec.RefSchema("#/definitions/" + b.ref(t))
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"string"}, Format: "byte"}}
		}
		return spec.ArrayProperty(b.schemaOf(t.Elem()))
	case reflect.Map:
		return spec.MapProperty(b.schemaOf(t.Elem()))
	case reflect.String:
		return spec.StringProperty()
	case reflect.Bool:
		return spec.BoolProperty()
	case reflect.Int32, reflect.Int16, reflect.Int8, reflect.Uint16, reflect.Uint8, reflect.Int:
		return spec.Int32Property()
	case reflect.Int64, reflect.Uint32, reflect.Uint64, reflect.Uint:
		return spec.Int64Property()
	case reflect.Float32:
		return spec.Float32Property()
	case reflect.Float64:
		return spec.Float64Property()
	}
	// An interface (runtime.Object): any JSON value.
	return &spec.Schema{}
}
