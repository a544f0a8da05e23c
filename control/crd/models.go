package crd

import (
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/isle-cluster/isle/control/openapi"
)

// modelName is a custom kind's model name, as kube-apiserver names it:
// the group reversed, the version, the kind ("stable.example.com" v1
// CronTab → "com.example.stable.v1.CronTab").
func modelName(group, version, kind string) string {
	parts := strings.Split(group, ".")
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, ".") + "." + version + "." + kind
}

// models returns the OpenAPI models of one version of a CRD: its schema
// with apiVersion, kind and metadata (ObjectMeta) as every object has
// them, its list (modelName and modelName+"List"), and the meta models they
// refer to.
func models(c *CustomResourceDefinition, v CustomResourceDefinitionVersion, names CustomResourceDefinitionNames) openapi.Models {
	b := openapi.NewBuilder()
	objectMeta := b.AddKind(reflect.TypeOf(metav1.ObjectMeta{}))
	listMeta := b.AddKind(reflect.TypeOf(metav1.ListMeta{}))
	ms := b.Models()
	name := modelName(c.Spec.Group, v.Name, names.Kind)
	s := toSpec(v.Schema.OpenAPIV3Schema)
	if s.Properties == nil {
		s.Properties = map[string]spec.Schema{}
	}
	described := func(s *spec.Schema, d string) spec.Schema {
		s.Description = d
		return *s
	}
	s.Properties["apiVersion"] = described(spec.StringProperty(), metav1.TypeMeta{}.SwaggerDoc()["apiVersion"])
	s.Properties["kind"] = described(spec.StringProperty(), metav1.TypeMeta{}.SwaggerDoc()["kind"])
	s.Properties["metadata"] = described(spec.RefSchema("#/definitions/"+objectMeta), "Standard object's metadata.")
	s.AddExtension("x-kubernetes-group-version-kind", []any{map[string]any{"group": c.Spec.Group, "version": v.Name, "kind": names.Kind}})
	ms[name] = s
	list := &spec.Schema{SchemaProps: spec.SchemaProps{
		Description: names.ListKind + " is a list of " + names.Kind,
		Type:        spec.StringOrArray{"object"},
		Required:    []string{"items"},
		Properties: map[string]spec.Schema{
			"apiVersion": *spec.StringProperty(),
			"kind":       *spec.StringProperty(),
			"metadata":   *spec.RefSchema("#/definitions/" + listMeta),
			"items":      *spec.ArrayProperty(spec.RefSchema("#/definitions/" + name)),
		},
	}}
	list.AddExtension("x-kubernetes-group-version-kind", []any{map[string]any{"group": c.Spec.Group, "version": v.Name, "kind": names.ListKind}})
	ms[name+"List"] = list
	return ms
}

// toSpec converts a CRD schema to kube-openapi's, whose models serve the
// OpenAPI documents and server-side apply.
func toSpec(s *JSONSchemaProps) *spec.Schema {
	if s == nil {
		return nil
	}
	out := &spec.Schema{}
	p := &out.SchemaProps
	p.Description, p.Format, p.Title, p.Pattern = s.Description, s.Format, s.Title, s.Pattern
	if s.Type != "" {
		p.Type = spec.StringOrArray{s.Type}
	}
	p.Maximum, p.ExclusiveMaximum, p.Minimum, p.ExclusiveMinimum = s.Maximum, s.ExclusiveMaximum, s.Minimum, s.ExclusiveMinimum
	p.MaxLength, p.MinLength, p.MaxItems, p.MinItems, p.MaxProperties, p.MinProperties = s.MaxLength, s.MinLength, s.MaxItems, s.MinItems, s.MaxProperties, s.MinProperties
	p.MultipleOf, p.Required, p.Nullable = s.MultipleOf, s.Required, s.Nullable
	if s.Default != nil {
		p.Default, _ = s.Default.Value()
	}
	for _, e := range s.Enum {
		if v, err := e.Value(); err == nil {
			p.Enum = append(p.Enum, v)
		}
	}
	if s.Items != nil && s.Items.Schema != nil {
		p.Items = &spec.SchemaOrArray{Schema: toSpec(s.Items.Schema)}
	}
	if len(s.Properties) > 0 {
		p.Properties = map[string]spec.Schema{}
		for k, v := range s.Properties {
			p.Properties[k] = *toSpec(&v)
		}
	}
	if ap := s.AdditionalProperties; ap != nil {
		p.AdditionalProperties = &spec.SchemaOrBool{Allows: ap.Allows, Schema: toSpec(ap.Schema)}
	}
	for _, list := range []struct {
		in  []JSONSchemaProps
		out *[]spec.Schema
	}{{s.AllOf, &p.AllOf}, {s.AnyOf, &p.AnyOf}, {s.OneOf, &p.OneOf}} {
		for i := range list.in {
			*list.out = append(*list.out, *toSpec(&list.in[i]))
		}
	}
	p.Not = toSpec(s.Not)
	ext := func(k string, v any) { out.AddExtension(k, v) }
	if s.XPreserveUnknownFields != nil {
		ext("x-kubernetes-preserve-unknown-fields", *s.XPreserveUnknownFields)
	}
	if s.XEmbeddedResource {
		ext("x-kubernetes-embedded-resource", true)
	}
	if s.XIntOrString {
		ext("x-kubernetes-int-or-string", true)
	}
	if s.XListType != nil {
		ext("x-kubernetes-list-type", *s.XListType)
	}
	if len(s.XListMapKeys) > 0 {
		keys := make([]any, len(s.XListMapKeys))
		for i, k := range s.XListMapKeys {
			keys[i] = k
		}
		ext("x-kubernetes-list-map-keys", keys)
	}
	if s.XMapType != nil {
		ext("x-kubernetes-map-type", *s.XMapType)
	}
	return out
}

// v2Model is a custom kind's model as OpenAPI v2 shows it, for the
// validation of kubectl 1.27 and 1.28, as kube-apiserver words it: a
// kind preserving unknown fields at its root is an object and nothing
// more (else kubectl would refuse every field it does not list);
// elsewhere the junctors go (v2 has none that kubectl reads), a nullable
// or unknown-preserving node loses its type's content, and an array left
// without items its type.
func v2Model(s *spec.Schema, preserveAll bool) *spec.Schema {
	if preserve(s) || preserveAll {
		out := &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}}}
		out.Extensions = spec.Extensions{"x-kubernetes-group-version-kind": s.Extensions["x-kubernetes-group-version-kind"]}
		return out
	}
	out := *s
	v2Node(&out)
	return &out
}

func preserve(s *spec.Schema) bool {
	v, _ := s.Extensions.GetBool("x-kubernetes-preserve-unknown-fields")
	return v
}

// v2Node rewrites a copy of a schema node and its children for v2.
func v2Node(s *spec.Schema) {
	s.AllOf, s.OneOf, s.AnyOf, s.Not = nil, nil, nil, nil
	if s.Nullable {
		s.Type, s.Nullable, s.Items, s.Properties = nil, false, nil, nil
	}
	if preserve(s) {
		s.Items, s.Properties = nil, nil
		if s.Type.Contains("object") {
			s.Type = nil
		}
	}
	if s.Items == nil && s.Type.Contains("array") {
		s.Type = nil
	}
	if len(s.Properties) > 0 {
		props := make(map[string]spec.Schema, len(s.Properties))
		var required []string
		for name, p := range s.Properties {
			v2Node(&p)
			props[name] = p
		}
		// A nullable field may be null: not required in v2.
		for _, r := range s.Required {
			if p, ok := s.Properties[r]; !ok || !p.Nullable {
				required = append(required, r)
			}
		}
		s.Properties, s.Required = props, required
	}
	if s.Items != nil && s.Items.Schema != nil {
		item := *s.Items.Schema
		v2Node(&item)
		s.Items = &spec.SchemaOrArray{Schema: &item}
	}
	if ap := s.AdditionalProperties; ap != nil && ap.Schema != nil {
		if ap.Schema.Nullable {
			s.Required = nil
		}
		sch := *ap.Schema
		v2Node(&sch)
		s.AdditionalProperties = &spec.SchemaOrBool{Allows: ap.Allows, Schema: &sch}
	}
}
