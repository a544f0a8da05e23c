package crd_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"

	"github.com/isle-cluster/isle/control/crd"
)

// TestProtobufRoundTrip: a CRD using every kind of field (nested
// schemas, maps of them, items, additionalProperties, enums and
// defaults, dependencies of both forms, conversion, conditions) reads
// back from its protobuf as it was.
func TestProtobufRoundTrip(t *testing.T) {
	const y = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com, labels: {a: b}, generation: 3}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd], categories: [all]}
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig: {service: {namespace: ns, name: conv, path: /convert, port: 8443}, caBundle: Y2E=}
  versions:
  - name: v1
    served: true
    storage: true
    deprecated: true
    deprecationWarning: old
    additionalPrinterColumns: [{name: Size, type: integer, jsonPath: .spec.size, priority: -1}]
    selectableFields: [{jsonPath: .spec.color}]
    subresources: {status: {}, scale: {specReplicasPath: .spec.size, statusReplicasPath: .status.size}}
    schema:
      openAPIV3Schema:
        type: object
        required: [spec]
        dependencies: {a: [b, c], d: {type: object}}
        properties:
          spec:
            type: object
            x-kubernetes-validations: [{rule: "self.size > 0", message: positive, optionalOldSelf: true}]
            properties:
              size: {type: integer, minimum: -1.5, maximum: 1e9, default: 2, format: int32}
              color: {type: string, enum: [red, "green"], pattern: "^[a-z]+$", maxLength: 10}
              tags: {type: array, items: {type: string}, x-kubernetes-list-type: set}
              tuple: {type: array, items: [{type: string}, {type: integer}]}
              extra: {type: object, additionalProperties: {type: string}}
              open: {type: object, additionalProperties: false, x-kubernetes-preserve-unknown-fields: true}
              either: {x-kubernetes-int-or-string: true, anyOf: [{type: integer}, {type: string}]}
status:
  conditions: [{type: Established, status: "True", lastTransitionTime: "2026-12-03T09:00:00Z", reason: InitialNamesAccepted, message: ok}]
  acceptedNames: {plural: widgets, kind: Widget}
  storedVersions: [v1]
`
	var in crd.CustomResourceDefinition
	if err := yaml.UnmarshalStrict([]byte(y), &in); err != nil {
		t.Fatal(err)
	}
	b, err := in.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var out crd.CustomResourceDefinition
	if err := out.Unmarshal(b); err != nil {
		t.Fatal(err)
	}
	out.TypeMeta = in.TypeMeta
	if !equality.Semantic.DeepEqual(&in, &out) {
		a, _ := yaml.Marshal(&in)
		c, _ := yaml.Marshal(&out)
		t.Errorf("round trip:\n%s\nbecame\n%s", a, c)
	}
	// A list too.
	l := crd.CustomResourceDefinitionList{Items: []crd.CustomResourceDefinition{in, in}}
	l.ResourceVersion = "7"
	if b, err = l.Marshal(); err != nil {
		t.Fatal(err)
	}
	var l2 crd.CustomResourceDefinitionList
	if err := l2.Unmarshal(b); err != nil || len(l2.Items) != 2 || l2.ResourceVersion != "7" || l2.Items[1].Spec.Versions[0].Name != "v1" {
		t.Errorf("list round trip: %v %+v", err, l2.ListMeta)
	}
	// A schema nested past any real one is refused, not followed down the
	// stack: not: {not: {not: ...}} (field 28 of JSONSchemaProps) inside
	// spec.versions[0].schema.openAPIV3Schema.
	deep := []byte{}
	for range 1000 {
		deep = append(append([]byte{0xe2, 0x01}, protoLen(len(deep))...), deep...)
	}
	schema := append(append([]byte{0x0a}, protoLen(len(deep))...), deep...)      // openAPIV3Schema
	version := append(append([]byte{0x22}, protoLen(len(schema))...), schema...) // schema
	spec := append(append([]byte{0x3a}, protoLen(len(version))...), version...)  // versions
	msg := append(append([]byte{0x12}, protoLen(len(spec))...), spec...)         // spec
	if err := out.Unmarshal(msg); err == nil || !strings.Contains(err.Error(), "nested more than") {
		t.Errorf("a schema nested 1000 deep: %v", err)
	}
	// Garbage is an error, not a panic.
	if err := out.Unmarshal([]byte{0x12, 0xff}); err == nil {
		t.Error("a truncated message decoded")
	}
}

// protoLen is a length as protobuf writes it (a varint).
func protoLen(n int) []byte {
	var b []byte
	for n >= 0x80 {
		b = append(b, byte(n)|0x80)
		n >>= 7
	}
	return append(b, byte(n))
}
