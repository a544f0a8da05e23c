package openapi

import (
	"math"
	"sort"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"sigs.k8s.io/yaml"
)

// encodeV2 writes the v2 document in the protobuf form kubectl asks for:
// gnostic's openapi_v2.Document (github.com/google/gnostic-models), whose
// field numbers are below. The encoder covers what Build writes; its test
// holds it to gnostic's own parse of the JSON document.
func encodeV2(doc obj) []byte {
	var b []byte
	b = str(b, 1, doc["swagger"])
	info := doc["info"].(obj)
	b = msg(b, 2, str(str(nil, 1, info["title"]), 2, info["version"]))
	var paths []byte
	for _, name := range sortedKeys(doc["paths"].(map[string]obj)) {
		item := encodePathItem(doc["paths"].(map[string]obj)[name])
		paths = msg(paths, 2, msg(str(nil, 1, name), 2, item)) // Paths.path: NamedPathItem
	}
	b = msg(b, 8, paths)
	var defs []byte
	for _, name := range sortedKeys(doc["definitions"].(map[string]obj)) {
		defs = msg(defs, 1, named(name, encodeSchema(doc["definitions"].(map[string]obj)[name])))
	}
	return msg(b, 9, defs)
}

func encodePathItem(item obj) []byte {
	var b []byte
	for _, m := range []struct {
		name string
		num  protowire.Number
	}{{"get", 2}, {"put", 3}, {"post", 4}, {"delete", 5}, {"patch", 8}} {
		if op, ok := item[m.name].(obj); ok {
			b = msg(b, m.num, encodeOperation(op))
		}
	}
	for _, p := range asList(item["parameters"]) {
		b = msg(b, 9, encodeParameter(p))
	}
	return b
}

func encodeOperation(op obj) []byte {
	var b []byte
	for _, t := range op["tags"].([]string) {
		b = str(b, 1, t)
	}
	b = str(b, 5, op["operationId"])
	for _, mt := range strs(op["produces"]) {
		b = str(b, 6, mt)
	}
	for _, mt := range strs(op["consumes"]) {
		b = str(b, 7, mt)
	}
	for _, p := range asList(op["parameters"]) {
		b = msg(b, 8, encodeParameter(p))
	}
	var resps []byte
	for _, code := range sortedKeys(op["responses"].(obj)) {
		r := op["responses"].(obj)[code].(obj)
		resp := str(nil, 1, r["description"])
		if s, ok := r["schema"].(obj); ok {
			resp = msg(resp, 2, msg(nil, 1, encodeSchema(s))) // SchemaItem.schema
		}
		resps = msg(resps, 1, named(code, msg(nil, 1, resp))) // ResponseValue.response
	}
	b = msg(b, 9, resps)
	for _, mt := range strs(op["schemes"]) {
		b = str(b, 10, mt)
	}
	return extensions(b, 13, op)
}

// encodeParameter writes a ParametersItem: a body parameter, or a query
// or path parameter of a simple type.
func encodeParameter(p obj) []byte {
	var param []byte
	switch p["in"] {
	case "body":
		body := str(str(nil, 2, p["name"]), 3, "body")
		body = boolean(body, 4, p["required"] == true)
		body = msg(body, 5, encodeSchema(p["schema"].(obj)))
		param = msg(nil, 1, body)
	case "query":
		sub := str(str(str(nil, 2, "query"), 3, p["description"]), 4, p["name"])
		sub = str(sub, 6, p["type"])
		param = msg(nil, 2, msg(nil, 3, sub))
	default: // path
		sub := boolean(nil, 1, p["required"] == true)
		sub = str(str(str(str(sub, 2, "path"), 3, p["description"]), 4, p["name"]), 5, p["type"])
		param = msg(nil, 2, msg(nil, 4, sub))
	}
	return msg(nil, 1, param) // ParametersItem.parameter
}

// encodeSchema writes a Schema.
func encodeSchema(s obj) []byte {
	var b []byte
	b = str(b, 1, s["$ref"])
	b = str(b, 2, s["format"])
	b = str(b, 4, s["description"])
	if v, ok := s["default"]; ok {
		b = msg(b, 5, anyValue(v))
	}
	b = double(b, 7, s["maximum"])
	b = boolean(b, 8, s["exclusiveMaximum"] == true)
	b = double(b, 9, s["minimum"])
	b = boolean(b, 10, s["exclusiveMinimum"] == true)
	b = integer(b, 11, s["maxLength"])
	b = integer(b, 12, s["minLength"])
	b = str(b, 13, s["pattern"])
	b = integer(b, 14, s["maxItems"])
	b = integer(b, 15, s["minItems"])
	b = boolean(b, 16, s["uniqueItems"] == true)
	b = integer(b, 17, s["maxProperties"])
	b = integer(b, 18, s["minProperties"])
	for _, r := range strs(s["required"]) {
		b = str(b, 19, r)
	}
	if enum, ok := s["enum"].([]any); ok {
		for _, v := range enum {
			b = msg(b, 20, anyValue(v))
		}
	}
	switch ap := s["additionalProperties"].(type) {
	case obj:
		b = msg(b, 21, msg(nil, 1, encodeSchema(ap)))
	case bool:
		b = msg(b, 21, protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), protowire.EncodeBool(ap)))
	}
	switch t := s["type"].(type) {
	case string:
		b = msg(b, 22, str(nil, 1, t))
	case []string:
		var ti []byte
		for _, v := range t {
			ti = str(ti, 1, v)
		}
		b = msg(b, 22, ti)
	}
	if items, ok := s["items"].(obj); ok {
		b = msg(b, 23, msg(nil, 1, encodeSchema(items)))
	}
	for _, a := range asList(s["allOf"]) {
		b = msg(b, 24, encodeSchema(a))
	}
	if props, ok := s["properties"].(obj); ok {
		var pb []byte
		for _, name := range sortedKeys(props) {
			pb = msg(pb, 1, named(name, encodeSchema(props[name].(obj))))
		}
		b = msg(b, 25, pb)
	}
	return extensions(b, 31, s)
}

// extensions writes the x- keys of o as repeated NamedAny, each value as
// YAML, as gnostic keeps them.
func extensions(b []byte, num protowire.Number, o obj) []byte {
	for _, k := range sortedKeys(o) {
		if strings.HasPrefix(k, "x-") {
			b = msg(b, num, named(k, anyValue(o[k])))
		}
	}
	return b
}

// anyValue is an Any holding v as YAML.
func anyValue(v any) []byte {
	y, err := yaml.Marshal(v)
	if err != nil {
		y = nil
	}
	return str(nil, 2, string(y))
}

// named is a Named* message: name 1, value 2.
func named(name string, value []byte) []byte { return msg(str(nil, 1, name), 2, value) }

func msg(b []byte, num protowire.Number, m []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, m)
}

func str(b []byte, num protowire.Number, v any) []byte {
	s, _ := v.(string)
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func boolean(b []byte, num protowire.Number, v bool) []byte {
	if !v {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), 1)
}

func double(b []byte, num protowire.Number, v any) []byte {
	f, ok := v.(float64)
	if !ok || f == 0 {
		return b
	}
	return protowire.AppendFixed64(protowire.AppendTag(b, num, protowire.Fixed64Type), math.Float64bits(f))
}

func integer(b []byte, num protowire.Number, v any) []byte {
	i, ok := v.(int64)
	if !ok || i == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), uint64(i))
}

func strs(v any) []string {
	s, _ := v.([]string)
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
