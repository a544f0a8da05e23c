package crd

import (
	"encoding/base64"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// pruneAndDefault drops from v what schema s does not specify (unless it
// keeps unknown fields) and sets the defaults of what is missing, as
// kube-apiserver does to a custom object on every write; root keeps
// apiVersion, kind and metadata. pruned, if not nil, hears the path of
// each field dropped.
func pruneAndDefault(v any, s *JSONSchemaProps, root bool) any {
	return walk(v, s, root, nil, nil)
}

// applyDefaults sets the defaults of what is missing in v, pruning
// nothing: what kube-apiserver does to a custom object read from storage
// (a default added to the schema after the object was written).
func applyDefaults(v any, s *JSONSchemaProps) {
	walkDefaults(v, s)
}

func walkDefaults(v any, s *JSONSchemaProps) {
	if s == nil {
		return
	}
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			if ps, ok := s.Properties[k]; ok {
				walkDefaults(child, &ps)
			} else if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
				walkDefaults(child, s.AdditionalProperties.Schema)
			}
		}
		for k, ps := range s.Properties {
			if _, ok := x[k]; ok || ps.Default == nil {
				continue
			}
			if d, err := ps.Default.Value(); err == nil {
				walkDefaults(d, &ps)
				x[k] = d
			}
		}
	case []any:
		if s.Items != nil && s.Items.Schema != nil {
			for _, item := range x {
				walkDefaults(item, s.Items.Schema)
			}
		}
	}
}

func walk(v any, s *JSONSchemaProps, root bool, path *field.Path, pruned func(*field.Path)) any {
	if s == nil {
		return v
	}
	preserve := s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			if root || s.XEmbeddedResource {
				if k == "apiVersion" || k == "kind" || k == "metadata" {
					continue
				}
			}
			ps, known := s.Properties[k]
			switch {
			case known:
				if child == nil && !ps.Nullable {
					delete(x, k) // a null where none may be: as if unset
					continue
				}
				x[k] = walk(child, &ps, false, path.Child(k), pruned)
			case s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
				as := s.AdditionalProperties.Schema
				if child == nil && !as.Nullable {
					delete(x, k)
					continue
				}
				x[k] = walk(child, as, false, path.Child(k), pruned)
			case preserve, s.AdditionalProperties != nil && s.AdditionalProperties.Allows:
			default:
				delete(x, k)
				if pruned != nil {
					pruned(path.Child(k))
				}
			}
		}
		for k, ps := range s.Properties {
			if _, ok := x[k]; ok || ps.Default == nil {
				continue
			}
			if d, err := ps.Default.Value(); err == nil {
				x[k] = walk(d, &ps, false, path.Child(k), nil)
			}
		}
		return x
	case []any:
		if s.Items != nil && s.Items.Schema != nil {
			for i := range x {
				x[i] = walk(x[i], s.Items.Schema, false, path.Index(i), pruned)
			}
		}
		return x
	}
	return v
}

// prunedFields returns the paths of the fields pruneAndDefault would drop
// from v (a decoded custom object), for fieldValidation's unknown fields.
func prunedFields(v map[string]any, s *JSONSchemaProps) []string {
	var out []string
	walk(v, s, true, nil, func(p *field.Path) { out = append(out, p.String()) })
	return out
}

// validateValue checks v against schema s as kube-apiserver's OpenAPI
// validation does, with its messages.
func validateValue(v any, s *JSONSchemaProps, path *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	var errs field.ErrorList
	name := path.String()
	if v == nil {
		if !s.Nullable && s.Type != "" {
			errs = append(errs, field.Invalid(path, nil, fmt.Sprintf("%s in body must be of type %s: \"null\"", name, s.Type)))
		}
		return errs
	}
	if !typeMatches(v, s) {
		want := s.Type
		if s.XIntOrString {
			want = "integer,string"
		}
		return append(errs, field.Invalid(path, v, fmt.Sprintf("%s in body must be of type %s: %q", name, want, jsonType(v))))
	}
	if len(s.Enum) > 0 {
		found := false
		var allowed []string
		for _, e := range s.Enum {
			ev, _ := e.Value()
			allowed = append(allowed, string(e.Raw))
			found = found || equalJSON(ev, v)
		}
		if !found {
			errs = append(errs, field.NotSupported(path, v, allowed))
		}
	}
	switch x := v.(type) {
	case string:
		errs = append(errs, validateString(x, s, path)...)
	case int64, float64:
		errs = append(errs, validateNumber(toFloat(x), s, path)...)
	case []any:
		if s.MaxItems != nil && int64(len(x)) > *s.MaxItems {
			errs = append(errs, field.TooMany(path, len(x), int(*s.MaxItems)))
		}
		if s.MinItems != nil && int64(len(x)) < *s.MinItems {
			errs = append(errs, field.Invalid(path, len(x), fmt.Sprintf("%s in body should have at least %d items", name, *s.MinItems)))
		}
		errs = append(errs, validateListUniqueness(x, s, path)...)
		if s.Items != nil && s.Items.Schema != nil {
			for i, item := range x {
				errs = append(errs, validateValue(item, s.Items.Schema, path.Index(i))...)
			}
		}
	case map[string]any:
		if s.MaxProperties != nil && int64(len(x)) > *s.MaxProperties {
			errs = append(errs, field.TooMany(path, len(x), int(*s.MaxProperties)))
		}
		if s.MinProperties != nil && int64(len(x)) < *s.MinProperties {
			errs = append(errs, field.Invalid(path, len(x), fmt.Sprintf("%s in body should have at least %d properties", name, *s.MinProperties)))
		}
		for _, r := range s.Required {
			if _, ok := x[r]; !ok {
				errs = append(errs, field.Required(path.Child(r), ""))
			}
		}
		for k, child := range x {
			if ps, ok := s.Properties[k]; ok {
				errs = append(errs, validateValue(child, &ps, path.Child(k))...)
			} else if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
				errs = append(errs, validateValue(child, s.AdditionalProperties.Schema, path.Child(k))...)
			}
		}
		if s.XEmbeddedResource {
			for _, k := range []string{"apiVersion", "kind"} {
				if str, _ := x[k].(string); str == "" && !(s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields && x[k] == nil) {
					errs = append(errs, field.Required(path.Child(k), "must not be empty"))
				}
			}
		}
	}
	for i := range s.AllOf {
		errs = append(errs, validateValue(v, &s.AllOf[i], path)...)
	}
	if len(s.AnyOf) > 0 {
		ok := false
		for i := range s.AnyOf {
			ok = ok || len(validateValue(v, &s.AnyOf[i], path)) == 0
		}
		if !ok {
			errs = append(errs, field.Invalid(path, v, fmt.Sprintf("%s in body must validate at least one schema (anyOf)", name)))
		}
	}
	if len(s.OneOf) > 0 {
		n := 0
		for i := range s.OneOf {
			if len(validateValue(v, &s.OneOf[i], path)) == 0 {
				n++
			}
		}
		if n != 1 {
			errs = append(errs, field.Invalid(path, v, fmt.Sprintf("%s in body must validate one and only one schema (oneOf)", name)))
		}
	}
	if s.Not != nil && len(validateValue(v, s.Not, path)) == 0 {
		errs = append(errs, field.Invalid(path, v, fmt.Sprintf("%s in body must not validate the schema (not)", name)))
	}
	return errs
}

func typeMatches(v any, s *JSONSchemaProps) bool {
	if s.XIntOrString {
		switch v.(type) {
		case string, int64:
			return true
		case float64:
			return v.(float64) == math.Trunc(v.(float64))
		}
		return false
	}
	switch s.Type {
	case "":
		return true
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "integer":
		switch n := v.(type) {
		case int64:
			return true
		case float64:
			return n == math.Trunc(n) && !math.IsInf(n, 0)
		}
		return false
	case "number":
		switch v.(type) {
		case int64, float64:
			return true
		}
	}
	return false
}

func jsonType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case int64:
		return "integer"
	case float64:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "null"
}

func toFloat(v any) float64 {
	switch n := v.(type) {
	case int64:
		return float64(n)
	case float64:
		return n
	}
	return 0
}

func validateNumber(n float64, s *JSONSchemaProps, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	name := path.String()
	if m := s.Maximum; m != nil {
		if s.ExclusiveMaximum && n >= *m {
			errs = append(errs, field.Invalid(path, n, fmt.Sprintf("%s in body should be less than %v", name, *m)))
		} else if n > *m {
			errs = append(errs, field.Invalid(path, n, fmt.Sprintf("%s in body should be less than or equal to %v", name, *m)))
		}
	}
	if m := s.Minimum; m != nil {
		if s.ExclusiveMinimum && n <= *m {
			errs = append(errs, field.Invalid(path, n, fmt.Sprintf("%s in body should be greater than %v", name, *m)))
		} else if n < *m {
			errs = append(errs, field.Invalid(path, n, fmt.Sprintf("%s in body should be greater than or equal to %v", name, *m)))
		}
	}
	if m := s.MultipleOf; m != nil && *m != 0 {
		if q := n / *m; q != math.Trunc(q) {
			errs = append(errs, field.Invalid(path, n, fmt.Sprintf("%s in body should be a multiple of %v", name, *m)))
		}
	}
	switch s.Format {
	case "int32":
		if n != math.Trunc(n) || n < math.MinInt32 || n > math.MaxInt32 {
			errs = append(errs, field.Invalid(path, n, fmt.Sprintf("%s in body must be of type int32: %q", name, fmt.Sprint(n))))
		}
	case "int64":
		if n != math.Trunc(n) {
			errs = append(errs, field.Invalid(path, n, fmt.Sprintf("%s in body must be of type int64: %q", name, fmt.Sprint(n))))
		}
	}
	return errs
}

func validateString(str string, s *JSONSchemaProps, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	name := path.String()
	n := int64(len([]rune(str)))
	if s.MaxLength != nil && n > *s.MaxLength {
		errs = append(errs, field.TooLong(path, str, int(*s.MaxLength)))
	}
	if s.MinLength != nil && n < *s.MinLength {
		errs = append(errs, field.Invalid(path, str, fmt.Sprintf("%s in body should be at least %d chars long", name, *s.MinLength)))
	}
	if s.Pattern != "" {
		if re, err := compiled(s.Pattern); err == nil && !re.MatchString(str) {
			errs = append(errs, field.Invalid(path, str, fmt.Sprintf("%s in body should match '%s'", name, s.Pattern)))
		}
	}
	bad := false
	switch s.Format {
	case "byte":
		_, err := base64.StdEncoding.DecodeString(str)
		bad = err != nil
	case "date-time", "datetime":
		_, err := time.Parse(time.RFC3339Nano, str)
		bad = err != nil
	case "date":
		_, err := time.Parse(time.DateOnly, str)
		bad = err != nil
	case "uuid":
		bad = !uuidRE.MatchString(str)
	case "duration":
		_, err := time.ParseDuration(str)
		bad = err != nil
	}
	if bad {
		errs = append(errs, field.Invalid(path, str, fmt.Sprintf("%s in body must be of type %s: %q", name, s.Format, str)))
	}
	return errs
}

var uuidRE = regexp.MustCompile(`^(?i)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// validateListUniqueness checks a set's members and a map list's keys.
func validateListUniqueness(items []any, s *JSONSchemaProps, path *field.Path) field.ErrorList {
	if s.XListType == nil || (*s.XListType != "set" && *s.XListType != "map") {
		return nil
	}
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, item := range items {
		key := mustJSON(item)
		if *s.XListType == "map" {
			m, _ := item.(map[string]any)
			parts := make([]string, len(s.XListMapKeys))
			for j, k := range s.XListMapKeys {
				kv, ok := m[k]
				if !ok && s.Items != nil && s.Items.Schema != nil {
					if ps, ok := s.Items.Schema.Properties[k]; ok && ps.Default != nil {
						kv, _ = ps.Default.Value()
					}
				}
				parts[j] = mustJSON(kv)
			}
			key = strings.Join(parts, ",")
		}
		if seen[key] {
			errs = append(errs, field.Duplicate(path.Index(i), item))
		}
		seen[key] = true
	}
	return errs
}

func equalJSON(a, b any) bool {
	if fa, ok := numeric(a); ok {
		fb, ok := numeric(b)
		return ok && fa == fb
	}
	return reflect.DeepEqual(a, b)
}

func numeric(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

var patterns sync.Map // pattern → *regexp.Regexp

func compiled(pattern string) (*regexp.Regexp, error) {
	if re, ok := patterns.Load(pattern); ok {
		return re.(*regexp.Regexp), nil
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	patterns.Store(pattern, re)
	return re, nil
}
