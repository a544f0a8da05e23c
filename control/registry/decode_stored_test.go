package registry

import (
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/randfill"
)

// TestDecodeStoredAsBefore: every Go kind served, filled at random and
// stored as the store writes it, decodes to the same object as with
// sigs.k8s.io/json, the decoder the store used before.
func TestDecodeStoredAsBefore(t *testing.T) {
	f := storedFiller()
	kinds, size := 0, 0
	for _, r := range Table() {
		if _, ok := r.New().(*unstructured.Unstructured); ok || r.Convert != nil && r.StorageVersion != "" {
			continue
		}
		kinds++
		for i := range 20 {
			obj := r.New()
			f.Fill(obj)
			data, err := encode(r, obj)
			if err != nil {
				t.Fatalf("%s #%d: encode: %v", r, i, err)
			}
			size += len(data)
			got, err := decodeStored(r, data)
			if err != nil {
				t.Fatalf("%s #%d: decode: %v\n%s", r, i, err, data)
			}
			want := r.New()
			if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, want); err != nil {
				t.Fatalf("%s #%d: sigs.k8s.io/json: %v", r, i, err)
			}
			want.GetObjectKind().SetGroupVersionKind(r.GVK())
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s #%d: decoded differently from sigs.k8s.io/json\n%s\n got %#v\nwant %#v", r, i, data, got, want)
			}
		}
	}
	if kinds < 30 {
		t.Fatalf("%d kinds compared, want every Go kind", kinds)
	}
	t.Logf("%d kinds, %d objects, %d KiB of JSON", kinds, 20*kinds, size>>10)
}

// storedFiller fills objects at random with values the API takes.
func storedFiller() *randfill.Filler {
	return randfill.NewWithSeed(27).NilChance(0.2).NumElements(0, 3).MaxDepth(12).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewMilliQuantity(c.Int63n(1<<40), resource.DecimalSI)
		},
		func(v *intstr.IntOrString, c randfill.Continue) {
			if c.Bool() {
				*v = intstr.FromInt32(c.Int31())
			} else {
				*v = intstr.FromString(c.String(8))
			}
		},
		func(t *metav1.Time, c randfill.Continue) { *t = metav1.NewTime(time.Unix(c.Int63n(1<<32), 0)) },
		func(t *metav1.MicroTime, c randfill.Continue) {
			*t = metav1.NewMicroTime(time.Unix(c.Int63n(1<<32), c.Int63n(1e6)*1e3))
		},
		func(r *runtime.RawExtension, c randfill.Continue) {
			if c.Bool() {
				r.Raw = []byte(`{"apiVersion":"v1","kind":"ConfigMap","data":{"a":"b"}}`)
			}
		},
		func(fv *metav1.FieldsV1, c randfill.Continue) {
			fv.Raw = []byte(`{"f:metadata":{"f:labels":{".":{}}}}`)
		},
		func(tm *metav1.TypeMeta, c randfill.Continue) {},
	)
}
