package crd

import (
	"encoding/json"
	"strings"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

func schemaOf(t *testing.T, y string) *JSONSchemaProps {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	s := &JSONSchemaProps{}
	dec := json.NewDecoder(strings.NewReader(string(j)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func objectOf(t *testing.T, y string) map[string]any {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := utiljson.Unmarshal(j, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

const widgetSchema = `
type: object
properties:
  spec:
    type: object
    required: [size]
    properties:
      size: {type: integer, minimum: 1, maximum: 10, format: int32}
      color: {type: string, enum: [red, blue], default: red}
      name: {type: string, minLength: 2, maxLength: 5, pattern: '^[a-z]+$'}
      port: {x-kubernetes-int-or-string: true}
      tags: {type: array, maxItems: 2, items: {type: string}, x-kubernetes-list-type: set}
      ports:
        type: array
        x-kubernetes-list-type: map
        x-kubernetes-list-map-keys: [port]
        items:
          type: object
          required: [port]
          properties:
            port: {type: integer}
            protocol: {type: string, default: TCP}
      labels: {type: object, additionalProperties: {type: string}}
      free: {type: object, x-kubernetes-preserve-unknown-fields: true}
      template:
        type: object
        x-kubernetes-embedded-resource: true
        properties:
          spec: {type: object, properties: {x: {type: string}}}
      when: {type: string, format: date-time}
      ratio: {type: number, multipleOf: 0.5}
      mode: {type: string, nullable: true}
  status:
    type: object
    properties:
      ready: {type: boolean}
`

// TestPruneAndDefault: unknown fields go (but where the schema keeps
// them), defaults fill what is missing, nulls where none may be are unset.
func TestPruneAndDefault(t *testing.T) {
	s := schemaOf(t, widgetSchema)
	obj := objectOf(t, `
apiVersion: example.com/v1
kind: Widget
metadata: {name: w}
spec:
  size: 3
  bogus: 1
  ports: [{port: 80, extra: x}]
  labels: {a: b}
  free: {anything: {goes: here}}
  template:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec: {x: v, z: dropped}
  mode: null
  color: null
other: 1
`)
	pruned := prunedFields(obj, s)
	got := pruneAndDefault(obj, s, true).(map[string]any)
	b, _ := json.Marshal(got)
	want := `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"color":"red","free":{"anything":{"goes":"here"}},"labels":{"a":"b"},"mode":null,"ports":[{"port":80,"protocol":"TCP"}],"size":3,"template":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"x":"v"}}}}`
	if string(b) != want {
		t.Errorf("pruned and defaulted:\n%s\nwant\n%s", b, want)
	}
	wantPruned := map[string]bool{"spec.bogus": true, "spec.ports[0].extra": true, "spec.template.spec.z": true, "other": true}
	if len(pruned) != len(wantPruned) {
		t.Errorf("pruned %v", pruned)
	}
	for _, p := range pruned {
		if !wantPruned[p] {
			t.Errorf("pruned %s", p)
		}
	}
}

// TestValidateValue: each kind of rule fails with kube-apiserver's
// message, and a good object passes.
func TestValidateValue(t *testing.T) {
	s := schemaOf(t, widgetSchema)
	spec := s.Properties["spec"]
	good := objectOf(t, `{size: 3, color: blue, name: abc, port: 8080, tags: [a, b], ports: [{port: 1}, {port: 2}], when: "2026-12-03T07:00:00Z", ratio: 1.5, mode: null}`)
	if errs := validateValue(good, &spec, field.NewPath("spec")); len(errs) > 0 {
		t.Fatalf("a good object: %v", errs)
	}
	tests := []struct{ yaml, want string }{
		{`{size: "3"}`, `spec.size: Invalid value: "3": spec.size in body must be of type integer: "string"`},
		{`{}`, `spec.size: Required value`},
		{`{size: 0}`, `spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1`},
		{`{size: 11}`, `spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10`},
		{`{size: 1.5}`, `spec.size in body must be of type integer: "number"`},
		{`{size: 1, color: green}`, `spec.color: Unsupported value: "green": supported values: "\"red\"", "\"blue\""`},
		{`{size: 1, name: a}`, `spec.name in body should be at least 2 chars long`},
		{`{size: 1, name: abcdefg}`, `spec.name: Too long: may not be more than 5 bytes`},
		{`{size: 1, name: AB}`, `spec.name in body should match '^[a-z]+$'`},
		{`{size: 1, port: true}`, `spec.port in body must be of type integer,string: "boolean"`},
		{`{size: 1, tags: [a, b, c]}`, `spec.tags: Too many: 3: must have at most 2 items`},
		{`{size: 1, tags: [a, a]}`, `spec.tags[1]: Duplicate value: "a"`},
		{`{size: 1, ports: [{port: 1}, {port: 1, protocol: TCP}]}`, `spec.ports[1]: Duplicate value`},
		{`{size: 1, when: yesterday}`, `spec.when in body must be of type date-time: "yesterday"`},
		{`{size: 1, ratio: 0.7}`, `spec.ratio in body should be a multiple of 0.5`},
		{`{size: 1, labels: {a: 1}}`, `spec.labels.a in body must be of type string: "integer"`},
		{`{size: 1, template: {spec: {}}}`, `spec.template.apiVersion: Required value`},
		{`{size: 1, color: null}`, `spec.color in body must be of type string: "null"`},
	}
	for _, tc := range tests {
		errs := validateValue(objectOf(t, tc.yaml), &spec, field.NewPath("spec"))
		if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.yaml, errs, tc.want)
		}
	}
}

// TestStructural: what a structural schema may not say is refused with
// the path and the reason.
func TestStructural(t *testing.T) {
	tests := []struct{ yaml, want string }{
		{"type: object\nproperties: {a: {description: x}}", "properties[a].type: Required value"},
		{"type: string", "type: Invalid value: \"string\": must be object at the root"},
		{"type: object\nproperties: {a: {type: array}}", "properties[a].items: Required value"},
		{"type: object\nproperties: {a: {type: object, properties: {b: {type: string}}, additionalProperties: {type: string}}}", "additionalProperties and properties are mutual exclusive"},
		{"type: object\nproperties: {metadata: {type: object, properties: {labels: {type: object}}}}", "only name and generateName may be specified in metadata"},
		{"type: object\nproperties: {a: {type: string, default: 1}}", "properties[a].default: Invalid value"},
		{"type: object\nproperties: {a: {type: object, properties: {b: {type: string}}, default: {c: 1}}}", "must not have unknown fields"},
		{"type: object\nproperties: {a: {type: array, x-kubernetes-list-type: map, items: {type: object, properties: {k: {type: string}}}}}", "x-kubernetes-list-map-keys: Required value"},
		{"type: object\nproperties: {a: {type: array, x-kubernetes-list-type: map, x-kubernetes-list-map-keys: [k], items: {type: object, properties: {k: {type: string}}}}}", "all map keys must be required or have a default value: k"},
		{"type: object\nproperties: {a: {type: string, pattern: '('}}", "must be a valid regular expression"},
		{"type: object\nproperties: {a: {type: object, allOf: [{type: string}]}}", "allOf[0].type: Forbidden"},
		{"type: object\nproperties: {a: {type: array, uniqueItems: true, items: {type: string}}}", "uniqueItems: Forbidden"},
	}
	for _, tc := range tests {
		errs := validateStructural(schemaOf(t, tc.yaml), field.NewPath("s"))
		if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tc.want) {
			t.Errorf("%s:\ngot %v\nwant %q", tc.yaml, errs, tc.want)
		}
	}
	if errs := validateStructural(schemaOf(t, widgetSchema), field.NewPath("s")); len(errs) > 0 {
		t.Errorf("a structural schema: %v", errs)
	}
}
