package crd

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
)

// The protobuf form of the CRDs (application/vnd.kubernetes.protobuf), as
// kube-apiserver's generated code writes apiextensions.k8s.io/v1: each
// field's number is its `pb` tag; the codec walks the types by
// reflection. Clients built on client-go's typed clients (the
// conformance suite's among them) send and ask for CRDs in it.

// Reset empties the CRD, for a decode into it.
func (c *CustomResourceDefinition) Reset() { *c = CustomResourceDefinition{} }

// Marshal writes the CRD as protobuf.
func (c *CustomResourceDefinition) Marshal() ([]byte, error) {
	return marshalMessage(nil, reflect.ValueOf(c).Elem())
}

// Unmarshal reads a CRD from protobuf.
func (c *CustomResourceDefinition) Unmarshal(b []byte) error {
	return unmarshalMessage(b, reflect.ValueOf(c).Elem(), 0)
}

// Reset empties the list, for a decode into it.
func (l *CustomResourceDefinitionList) Reset() { *l = CustomResourceDefinitionList{} }

// Marshal writes the list as protobuf.
func (l *CustomResourceDefinitionList) Marshal() ([]byte, error) {
	return marshalMessage(nil, reflect.ValueOf(l).Elem())
}

// Unmarshal reads a list from protobuf.
func (l *CustomResourceDefinitionList) Unmarshal(b []byte) error {
	return unmarshalMessage(b, reflect.ValueOf(l).Elem(), 0)
}

// pbField is a struct field with a protobuf number.
type pbField struct {
	index int
	num   protowire.Number
	// deps: JSONSchemaProps.dependencies, JSON here and
	// JSONSchemaPropsOrStringArray on the wire.
	deps bool
}

var pbFields sync.Map // reflect.Type → []pbField

func fieldsOf(t reflect.Type) []pbField {
	if f, ok := pbFields.Load(t); ok {
		return f.([]pbField)
	}
	var out []pbField
	for i := range t.NumField() {
		tag, ok := t.Field(i).Tag.Lookup("pb")
		if !ok {
			continue
		}
		numStr, opt, _ := strings.Cut(tag, ",")
		n, err := strconv.Atoi(numStr)
		if err != nil {
			panic("crd: bad pb tag on " + t.String() + "." + t.Field(i).Name)
		}
		out = append(out, pbField{index: i, num: protowire.Number(n), deps: opt == "deps"})
	}
	pbFields.Store(t, out)
	return out
}

// protoCodec is a type of another package that reads and writes its own
// protobuf (metav1.ObjectMeta, ListMeta, Time).
type protoCodec interface {
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

var crdPkg = reflect.TypeFor[JSON]().PkgPath()

// foreign reports whether v (addressable) brings its own codec.
func foreign(v reflect.Value) (protoCodec, bool) {
	if v.Type().PkgPath() == crdPkg || !v.CanAddr() {
		return nil, false
	}
	c, ok := v.Addr().Interface().(protoCodec)
	return c, ok
}

// marshalMessage appends the fields of struct v.
func marshalMessage(b []byte, v reflect.Value) ([]byte, error) {
	for _, f := range fieldsOf(v.Type()) {
		var err error
		fv := v.Field(f.index)
		if f.deps {
			b, err = marshalDeps(b, f.num, fv)
		} else {
			b, err = marshalField(b, f.num, fv)
		}
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

func marshalField(b []byte, num protowire.Number, v reflect.Value) ([]byte, error) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return b, nil
		}
		return marshalField(b, num, v.Elem())
	case reflect.String:
		b = protowire.AppendTag(b, num, protowire.BytesType)
		return protowire.AppendString(b, v.String()), nil
	case reflect.Bool:
		b = protowire.AppendTag(b, num, protowire.VarintType)
		return protowire.AppendVarint(b, protowire.EncodeBool(v.Bool())), nil
	case reflect.Int32, reflect.Int64:
		b = protowire.AppendTag(b, num, protowire.VarintType)
		return protowire.AppendVarint(b, uint64(v.Int())), nil
	case reflect.Float64:
		b = protowire.AppendTag(b, num, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, math.Float64bits(v.Float())), nil
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if v.IsNil() {
				return b, nil
			}
			b = protowire.AppendTag(b, num, protowire.BytesType)
			return protowire.AppendBytes(b, v.Bytes()), nil
		}
		for i := range v.Len() {
			var err error
			if b, err = marshalField(b, num, v.Index(i)); err != nil {
				return nil, err
			}
		}
		return b, nil
	case reflect.Map:
		keys := v.MapKeys()
		sortKeys(keys)
		for _, k := range keys {
			entry := protowire.AppendTag(nil, 1, protowire.BytesType)
			entry = protowire.AppendString(entry, k.String())
			val := reflect.New(v.Type().Elem()).Elem()
			val.Set(v.MapIndex(k))
			var err error
			if entry, err = marshalField(entry, 2, val); err != nil {
				return nil, err
			}
			b = protowire.AppendTag(b, num, protowire.BytesType)
			b = protowire.AppendBytes(b, entry)
		}
		return b, nil
	case reflect.Struct:
		var body []byte
		var err error
		if c, ok := foreign(v); ok {
			body, err = c.Marshal()
		} else {
			body, err = marshalMessage(nil, v)
		}
		if err != nil {
			return nil, err
		}
		b = protowire.AppendTag(b, num, protowire.BytesType)
		return protowire.AppendBytes(b, body), nil
	}
	return nil, fmt.Errorf("crd: protobuf of %s: not supported", v.Type())
}

func sortKeys(keys []reflect.Value) {
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j].String() < keys[j-1].String(); j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
}

// marshalDeps writes dependencies (JSON values: a schema or a list of
// property names) as JSONSchemaPropsOrStringArray entries.
func marshalDeps(b []byte, num protowire.Number, v reflect.Value) ([]byte, error) {
	deps := v.Interface().(map[string]JSON)
	keys := make([]string, 0, len(deps))
	for k := range deps {
		keys = append(keys, k)
	}
	vals := make([]reflect.Value, len(keys))
	for i, k := range keys {
		vals[i] = reflect.ValueOf(k)
	}
	sortKeys(vals)
	for _, kv := range vals {
		k := kv.String()
		var or struct {
			Schema   *JSONSchemaProps `pb:"1"`
			Property []string         `pb:"2"`
		}
		raw := deps[k].Raw
		if len(raw) > 0 && raw[0] == '[' {
			if err := json.Unmarshal(raw, &or.Property); err != nil {
				return nil, fmt.Errorf("crd: dependencies %q: %w", k, err)
			}
		} else {
			or.Schema = &JSONSchemaProps{}
			if err := json.Unmarshal(raw, or.Schema); err != nil {
				return nil, fmt.Errorf("crd: dependencies %q: %w", k, err)
			}
		}
		body, err := marshalMessage(nil, reflect.ValueOf(&or).Elem())
		if err != nil {
			return nil, err
		}
		entry := protowire.AppendTag(nil, 1, protowire.BytesType)
		entry = protowire.AppendString(entry, k)
		entry = protowire.AppendTag(entry, 2, protowire.BytesType)
		entry = protowire.AppendBytes(entry, body)
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendBytes(b, entry)
	}
	return b, nil
}

// maxDepth bounds the nesting of a decoded message: a schema nested
// deeper is refused rather than followed down the stack.
const maxDepth = 128

// unmarshalMessage reads the fields of struct v from b, nested depth
// messages deep; unknown fields are skipped.
func unmarshalMessage(b []byte, v reflect.Value, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("crd: protobuf of %s: nested more than %d messages deep", v.Type(), maxDepth)
	}
	fields := fieldsOf(v.Type())
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("crd: protobuf of %s: %w", v.Type(), protowire.ParseError(n))
		}
		b = b[n:]
		i := -1
		for j, f := range fields {
			if f.num == num {
				i = j
			}
		}
		if i < 0 {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("crd: protobuf of %s: %w", v.Type(), protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		f := fields[i]
		var err error
		if f.deps {
			n, err = unmarshalDeps(b, typ, v.Field(f.index), depth)
		} else {
			n, err = unmarshalField(b, typ, v.Field(f.index), depth)
		}
		if err != nil {
			return fmt.Errorf("crd: protobuf of %s.%s: %w", v.Type(), v.Type().Field(f.index).Name, err)
		}
		b = b[n:]
	}
	return nil
}

var errWireType = errors.New("wrong wire type")

// unmarshalField reads one value of field v (a repeated field's or a
// map's one element) and returns the bytes it took.
func unmarshalField(b []byte, typ protowire.Type, v reflect.Value, depth int) (int, error) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return unmarshalField(b, typ, v.Elem(), depth)
	case reflect.String, reflect.Struct, reflect.Map:
		if typ != protowire.BytesType {
			return 0, errWireType
		}
		body, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		switch v.Kind() {
		case reflect.String:
			v.SetString(string(body))
		case reflect.Struct:
			if c, ok := foreign(v); ok {
				return n, c.Unmarshal(body)
			}
			return n, unmarshalMessage(body, v, depth+1)
		default:
			return n, unmarshalEntry(body, v, depth+1)
		}
		return n, nil
	case reflect.Bool, reflect.Int32, reflect.Int64:
		if typ != protowire.VarintType {
			return 0, errWireType
		}
		x, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		if v.Kind() == reflect.Bool {
			v.SetBool(protowire.DecodeBool(x))
		} else {
			v.SetInt(int64(x))
		}
		return n, nil
	case reflect.Float64:
		if typ != protowire.Fixed64Type {
			return 0, errWireType
		}
		x, n := protowire.ConsumeFixed64(b)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		v.SetFloat(math.Float64frombits(x))
		return n, nil
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if typ != protowire.BytesType {
				return 0, errWireType
			}
			body, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return 0, protowire.ParseError(n)
			}
			v.SetBytes(append([]byte{}, body...))
			return n, nil
		}
		elem := reflect.New(v.Type().Elem()).Elem()
		n, err := unmarshalField(b, typ, elem, depth)
		if err != nil {
			return 0, err
		}
		v.Set(reflect.Append(v, elem))
		return n, nil
	}
	return 0, fmt.Errorf("%s: not supported", v.Type())
}

// unmarshalEntry reads a map entry (key 1, value 2) into map m.
func unmarshalEntry(body []byte, m reflect.Value, depth int) error {
	if m.IsNil() {
		m.Set(reflect.MakeMap(m.Type()))
	}
	key := ""
	val := reflect.New(m.Type().Elem()).Elem()
	for len(body) > 0 {
		num, typ, n := protowire.ConsumeTag(body)
		if n < 0 {
			return protowire.ParseError(n)
		}
		body = body[n:]
		switch num {
		case 1:
			s, n := protowire.ConsumeString(body)
			if n < 0 {
				return protowire.ParseError(n)
			}
			key, body = s, body[n:]
		case 2:
			n, err := unmarshalField(body, typ, val, depth)
			if err != nil {
				return err
			}
			body = body[n:]
		default:
			n = protowire.ConsumeFieldValue(num, typ, body)
			if n < 0 {
				return protowire.ParseError(n)
			}
			body = body[n:]
		}
	}
	m.SetMapIndex(reflect.ValueOf(key), val)
	return nil
}

// unmarshalDeps reads a dependencies entry into the JSON map v.
func unmarshalDeps(b []byte, typ protowire.Type, v reflect.Value, depth int) (int, error) {
	if typ != protowire.BytesType {
		return 0, errWireType
	}
	body, n := protowire.ConsumeBytes(b)
	if n < 0 {
		return 0, protowire.ParseError(n)
	}
	var entry map[string]struct {
		Schema   *JSONSchemaProps `pb:"1"`
		Property []string         `pb:"2"`
	}
	ev := reflect.ValueOf(&entry).Elem()
	if err := unmarshalEntry(body, ev, depth+1); err != nil {
		return 0, err
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	for k, or := range entry {
		var raw []byte
		var err error
		if or.Schema != nil {
			raw, err = json.Marshal(or.Schema)
		} else {
			raw, err = json.Marshal(or.Property)
		}
		if err != nil {
			return 0, err
		}
		v.SetMapIndex(reflect.ValueOf(k), reflect.ValueOf(JSON{Raw: raw}))
	}
	return n, nil
}
