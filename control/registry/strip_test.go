package registry

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestWithoutManagedFields(t *testing.T) {
	const mf = `"managedFields":[{"manager":"kubectl","fieldsV1":{"f:metadata":{"f:labels":{".":{}}}}}]`
	cases := []struct{ name, in, want string }{
		{"last", `{"kind":"Pod","metadata":{"name":"p",` + mf + `},"spec":{}}`, `{"kind":"Pod","metadata":{"name":"p"},"spec":{}}`},
		{"first", `{"metadata":{` + mf + `,"name":"p"}}`, `{"metadata":{"name":"p"}}`},
		{"middle", `{"metadata":{"name":"p",` + mf + `,"uid":"u"}}`, `{"metadata":{"name":"p","uid":"u"}}`},
		{"only", `{"metadata":{` + mf + `}}`, `{"metadata":{}}`},
		{"none", `{"metadata":{"name":"p"},"spec":{"managedFields":[]}}`, `{"metadata":{"name":"p"},"spec":{"managedFields":[]}}`},
		{"no metadata", `{"spec":{"managedFields":[]}}`, `{"spec":{"managedFields":[]}}`},
		{"tricky strings", `{"a":"}\"{[","metadata":{"annotations":{"x":"\"managedFields\":[\\"},` + mf + `}}`,
			`{"a":"}\"{[","metadata":{"annotations":{"x":"\"managedFields\":[\\"}}}`},
		{"not compact", `{"metadata": {` + mf + `}}`, `{"metadata": {` + mf + `}}`},
		{"cut short", `{"metadata":{"name":"p",` + mf, `{"metadata":{"name":"p",` + mf},
		{"not an object", `"metadata"`, `"metadata"`},
		{"empty", ``, ``},
	}
	for _, tc := range cases {
		if got := string(withoutManagedFields([]byte(tc.in))); got != tc.want {
			t.Errorf("%s: got\n%s\nwant\n%s", tc.name, got, tc.want)
		}
	}
}

// Every Go kind, filled at random with managed fields and stored as the
// store writes it, decodes without them to the object it was, less them.
func TestWithoutManagedFieldsEveryKind(t *testing.T) {
	f := storedFiller()
	for _, r := range Table() {
		if _, ok := r.New().(*unstructured.Unstructured); ok {
			continue
		}
		for i := range 20 {
			obj := r.New()
			f.Fill(obj)
			data, err := encode(r, obj)
			if err != nil {
				t.Fatal(err)
			}
			want, err := decodeStored(r, data)
			if err != nil {
				t.Fatal(err)
			}
			m, _ := meta.Accessor(want)
			m.SetManagedFields(nil)
			got, err := decodeStored(r, withoutManagedFields(data))
			if err != nil {
				t.Fatalf("%s #%d: %v", r, i, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s #%d: decoded without managed fields differs\n%s\n%s", r, i, data, withoutManagedFields(data))
			}
		}
	}
}
