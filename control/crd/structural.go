package crd

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateStructural checks a version's schema as kube-apiserver's
// structural-schema rules do: every node says its type (but where
// x-kubernetes-int-or-string or x-kubernetes-preserve-unknown-fields
// allow any), the root is an object, metadata says no more than name and
// generateName, and what a structural schema cannot hold is refused.
// Value validations (allOf, anyOf, oneOf, not) may not add fields or
// types of their own. Defaults must be valid values where they stand.
func validateStructural(s *JSONSchemaProps, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s == nil {
		return field.ErrorList{field.Required(path, "schemas are required")}
	}
	if s.Type != "object" {
		errs = append(errs, field.Invalid(path.Child("type"), s.Type, "must be object at the root"))
	}
	if s.Nullable {
		errs = append(errs, field.Forbidden(path.Child("nullable"), "must be false at the root"))
	}
	errs = append(errs, validateNode(s, path, false, true)...)
	if md, ok := s.Properties["metadata"]; ok {
		mp := path.Child("properties").Key("metadata")
		if md.Type != "object" {
			errs = append(errs, field.Invalid(mp.Child("type"), md.Type, "must be object"))
		}
		for name, p := range md.Properties {
			if name != "name" && name != "generateName" {
				errs = append(errs, field.Forbidden(mp.Child("properties").Key(name), "only name and generateName may be specified in metadata"))
				continue
			}
			if p.Type != "string" {
				errs = append(errs, field.Invalid(mp.Child("properties").Key(name).Child("type"), p.Type, "must be string"))
			}
		}
		if len(md.Required) > 0 || md.AdditionalProperties != nil || md.Default != nil || md.XPreserveUnknownFields != nil {
			errs = append(errs, field.Forbidden(mp, "must not specify anything other than name and generateName, but metadata is implicitly specified"))
		}
	}
	return errs
}

// validateNode checks one node of a schema and those under it; inValue is
// true inside allOf, anyOf, oneOf and not.
func validateNode(s *JSONSchemaProps, path *field.Path, inValue, root bool) field.ErrorList {
	var errs field.ErrorList
	forbid := func(set bool, name string) {
		if set {
			errs = append(errs, field.Forbidden(path.Child(name), name+" is forbidden in a structural schema"))
		}
	}
	forbid(s.Ref != nil, "$ref")
	forbid(s.Schema != "", "$schema")
	forbid(s.ID != "", "id")
	forbid(len(s.Definitions) > 0, "definitions")
	forbid(len(s.Dependencies) > 0, "dependencies")
	forbid(len(s.PatternProperties) > 0, "patternProperties")
	forbid(s.AdditionalItems != nil, "additionalItems")
	forbid(s.UniqueItems, "uniqueItems")
	if s.Items != nil && len(s.Items.JSONSchemas) > 0 {
		errs = append(errs, field.Forbidden(path.Child("items"), "items must be a schema object and not an array"))
	}
	if len(s.Properties) > 0 && s.AdditionalProperties != nil {
		errs = append(errs, field.Forbidden(path.Child("additionalProperties"), "additionalProperties and properties are mutual exclusive"))
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema == nil && !s.AdditionalProperties.Allows {
		errs = append(errs, field.Forbidden(path.Child("additionalProperties"), "additionalProperties cannot be set to false"))
	}
	if inValue {
		// Value validations say nothing of the structure.
		forbid(s.Type != "", "type")
		forbid(s.Default != nil, "default")
		forbid(s.Nullable, "nullable")
		forbid(s.Description != "", "description")
		forbid(s.XPreserveUnknownFields != nil, "x-kubernetes-preserve-unknown-fields")
		forbid(s.XEmbeddedResource, "x-kubernetes-embedded-resource")
		forbid(s.XIntOrString, "x-kubernetes-int-or-string")
		forbid(s.XListType != nil, "x-kubernetes-list-type")
		forbid(s.XMapType != nil, "x-kubernetes-map-type")
		forbid(len(s.XListMapKeys) > 0, "x-kubernetes-list-map-keys")
	} else {
		anyType := s.XIntOrString || (s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields)
		if s.Type == "" && !anyType {
			errs = append(errs, field.Required(path.Child("type"), "must not be empty for specified object fields"))
		}
		switch s.Type {
		case "", "object", "array", "string", "integer", "number", "boolean":
		default:
			errs = append(errs, field.NotSupported(path.Child("type"), s.Type, []string{"array", "boolean", "integer", "number", "object", "string"}))
		}
		if s.XPreserveUnknownFields != nil && !*s.XPreserveUnknownFields {
			errs = append(errs, field.Invalid(path.Child("x-kubernetes-preserve-unknown-fields"), false, "must be true or undefined"))
		}
		if s.XEmbeddedResource && s.Type != "object" {
			errs = append(errs, field.Invalid(path.Child("type"), s.Type, "must be object if x-kubernetes-embedded-resource is true"))
		}
		if s.XIntOrString && s.Type != "" {
			errs = append(errs, field.Invalid(path.Child("type"), s.Type, "must be empty if x-kubernetes-int-or-string is true"))
		}
		if s.Type == "array" && s.Items == nil {
			errs = append(errs, field.Required(path.Child("items"), "must be specified"))
		}
		errs = append(errs, validateListType(s, path)...)
		if s.XMapType != nil && *s.XMapType != "atomic" && *s.XMapType != "granular" {
			errs = append(errs, field.NotSupported(path.Child("x-kubernetes-map-type"), *s.XMapType, []string{"atomic", "granular"}))
		}
		if s.XMapType != nil && s.Type != "object" {
			errs = append(errs, field.Invalid(path.Child("type"), s.Type, "must be object if x-kubernetes-map-type is specified"))
		}
	}
	if s.Pattern != "" {
		if _, err := regexp.Compile(s.Pattern); err != nil {
			errs = append(errs, field.Invalid(path.Child("pattern"), s.Pattern, "must be a valid regular expression: "+err.Error()))
		}
	}
	if s.Default != nil && !inValue {
		if root {
			errs = append(errs, field.Forbidden(path.Child("default"), "must not be set at the root"))
		} else if v, err := s.Default.Value(); err != nil {
			errs = append(errs, field.Invalid(path.Child("default"), string(s.Default.Raw), "must be JSON"))
		} else {
			before := mustJSON(v)
			if after := mustJSON(pruneAndDefault(v, s, false)); before != after {
				errs = append(errs, field.Invalid(path.Child("default"), string(s.Default.Raw), "must not have unknown fields (they would be pruned)"))
			}
			for _, e := range validateValue(v, s, path.Child("default")) {
				errs = append(errs, field.Invalid(path.Child("default"), string(s.Default.Raw), e.Error()))
			}
		}
	}
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := s.Properties[name]
		errs = append(errs, validateNode(&p, path.Child("properties").Key(name), inValue, false)...)
	}
	if s.Items != nil && s.Items.Schema != nil {
		errs = append(errs, validateNode(s.Items.Schema, path.Child("items"), inValue, false)...)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		errs = append(errs, validateNode(s.AdditionalProperties.Schema, path.Child("additionalProperties"), inValue, false)...)
	}
	for i := range s.AllOf {
		errs = append(errs, validateNode(&s.AllOf[i], path.Child("allOf").Index(i), true, false)...)
	}
	for i := range s.AnyOf {
		errs = append(errs, validateNode(&s.AnyOf[i], path.Child("anyOf").Index(i), true, false)...)
	}
	for i := range s.OneOf {
		errs = append(errs, validateNode(&s.OneOf[i], path.Child("oneOf").Index(i), true, false)...)
	}
	if s.Not != nil {
		errs = append(errs, validateNode(s.Not, path.Child("not"), true, false)...)
	}
	return errs
}

// validateListType checks x-kubernetes-list-type and its map keys.
func validateListType(s *JSONSchemaProps, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.XListType == nil {
		if len(s.XListMapKeys) > 0 {
			errs = append(errs, field.Forbidden(path.Child("x-kubernetes-list-map-keys"), `must only be used if x-kubernetes-list-type is "map"`))
		}
		return errs
	}
	lt := *s.XListType
	if s.Type != "array" {
		errs = append(errs, field.Invalid(path.Child("type"), s.Type, "must be array if x-kubernetes-list-type is specified"))
		return errs
	}
	switch lt {
	case "atomic":
	case "set":
		if it := s.Items.Schema; it != nil && it.Type != "string" && it.Type != "integer" && it.Type != "number" && it.Type != "boolean" &&
			!(it.Type == "object" && it.XMapType != nil && *it.XMapType == "atomic") {
			errs = append(errs, field.Invalid(path.Child("items").Child("type"), it.Type, "must be a scalar type (or an atomic object) if x-kubernetes-list-type is set"))
		}
	case "map":
		if len(s.XListMapKeys) == 0 {
			errs = append(errs, field.Required(path.Child("x-kubernetes-list-map-keys"), `must not be empty if x-kubernetes-list-type is "map"`))
		}
		it := s.Items.Schema
		if it == nil || it.Type != "object" {
			errs = append(errs, field.Invalid(path.Child("items").Child("type"), "", `must be object if x-kubernetes-list-type is "map"`))
			return errs
		}
		for i, k := range s.XListMapKeys {
			kp, ok := it.Properties[k]
			switch {
			case !ok:
				errs = append(errs, field.Invalid(path.Child("x-kubernetes-list-map-keys").Index(i), k, "entries must all be names of item properties"))
			case kp.Type != "string" && kp.Type != "integer" && kp.Type != "number" && kp.Type != "boolean":
				errs = append(errs, field.Invalid(path.Child("x-kubernetes-list-map-keys").Index(i), k, "must be a scalar property"))
			case kp.Default == nil && !slices.Contains(it.Required, k):
				errs = append(errs, field.Required(path.Child("items").Child("required"), "all map keys must be required or have a default value: "+k))
			}
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("x-kubernetes-list-type"), lt, []string{"atomic", "map", "set"}))
	}
	return errs
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
