package crd

import (
	"encoding/json"
	"testing"

	"k8s.io/kube-openapi/pkg/validation/spec"
)

// TestV2Model: the v2 model of a custom kind follows kube-apiserver's
// rewriting for kubectl's v2 validation.
func TestV2Model(t *testing.T) {
	schema := func(j string) *spec.Schema {
		t.Helper()
		var s spec.Schema
		if err := json.Unmarshal([]byte(j), &s); err != nil {
			t.Fatal(err)
		}
		return &s
	}
	gvk := `"x-kubernetes-group-version-kind":[{"group":"example.com","kind":"W","version":"v1"}]`
	root := v2Model(schema(`{"type":"object","x-kubernetes-preserve-unknown-fields":true,"properties":{"a":{"type":"string"}},`+gvk+`}`), false)
	if got, _ := json.Marshal(root); string(got) != `{"type":"object",`+gvk+`}` {
		t.Errorf("root preserving unknown fields: %s", got)
	}
	if got, _ := json.Marshal(v2Model(schema(`{"type":"object","properties":{"a":{"type":"string"}},`+gvk+`}`), true)); string(got) != `{"type":"object",`+gvk+`}` {
		t.Errorf("spec.preserveUnknownFields: %s", got)
	}
	in := schema(`{"type":"object","required":["n","s"],"properties":{
		"open":{"type":"object","x-kubernetes-preserve-unknown-fields":true,"properties":{"b":{"type":"string"}}},
		"n":{"type":"string","nullable":true},
		"s":{"type":"string"},
		"either":{"x-kubernetes-int-or-string":true,"anyOf":[{"type":"integer"},{"type":"string"}]},
		"list":{"type":"array","items":{"type":"object","nullable":true,"properties":{"x":{"type":"string"}}}}},` + gvk + `}`)
	out := v2Model(in, false)
	want := `{"type":"object","required":["s"],"properties":{` +
		`"either":{"x-kubernetes-int-or-string":true},` +
		`"list":{"type":"array","items":{}},` +
		`"n":{},` +
		`"open":{"x-kubernetes-preserve-unknown-fields":true},` +
		`"s":{"type":"string"}},` + gvk + `}`
	if got, _ := json.Marshal(out); string(got) != want {
		t.Errorf("v2 model:\n%s\nwant\n%s", got, want)
	}
	if len(in.Properties["open"].Properties) != 1 || in.Properties["either"].AnyOf == nil {
		t.Error("the v3 model was changed")
	}
}
