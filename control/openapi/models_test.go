package openapi_test

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/kube-openapi/pkg/schemaconv"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"

	"github.com/isle-cluster/isle/control/openapi"
	"github.com/isle-cluster/isle/control/registry"
)

// servedModels builds the models of every kind the registry serves.
func servedModels(t testing.TB) openapi.Models {
	t.Helper()
	b := openapi.NewBuilder()
	for _, r := range registry.Table() {
		b.AddKind(reflect.TypeOf(r.New()), r.GVK())
		b.AddKind(reflect.TypeOf(r.NewList()), r.GroupVersion().WithKind(r.Kind+"List"))
	}
	return b.Models()
}

// upstreamSchema is kube-apiserver's server-side apply schema of the
// built-in types, as client-go carries it.
func upstreamSchema(t *testing.T) *smdschema.Schema {
	t.Helper()
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}}
	tv, err := applyconfigurations.NewTypeConverter(registry.Scheme).ObjectToTyped(pod)
	if err != nil {
		t.Fatal(err)
	}
	return tv.Schema()
}

// TestApplySchemaIsUpstreams checks that server-side apply sees every
// served type as kube-apiserver does: the same fields, the same list
// types and keys, the same atomic maps and structs.
func TestApplySchemaIsUpstreams(t *testing.T) {
	models := servedModels(t)
	ours, err := schemaconv.ToSchemaFromOpenAPI(models, false)
	if err != nil {
		t.Fatal(err)
	}
	theirs := upstreamSchema(t)
	var diffs []string
	names := make([]string, 0, len(models))
	for name := range models {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		a, ok1 := ours.FindNamedType(name)
		u, ok2 := theirs.FindNamedType(name)
		if !ok2 && (strings.HasSuffix(name, "List") || strings.Contains(name, ".meta.v1.")) {
			continue // lists and list metadata are not applied
		}
		if !ok1 || !ok2 {
			diffs = append(diffs, fmt.Sprintf("%s: ours %v, upstream's %v", name, ok1, ok2))
			continue
		}
		compareAtoms(ours, theirs, name, a.Atom, u.Atom, &diffs)
	}
	if len(diffs) > 0 {
		t.Errorf("%d differences from kube-apiserver's apply schema:\n%s", len(diffs), strings.Join(diffs, "\n"))
	}
}

func compareAtoms(ours, theirs *smdschema.Schema, path string, a, u smdschema.Atom, diffs *[]string) {
	switch {
	case (a.Scalar == nil) != (u.Scalar == nil), (a.List == nil) != (u.List == nil), (a.Map == nil) != (u.Map == nil):
		*diffs = append(*diffs, fmt.Sprintf("%s: kind %s, upstream's %s", path, atomKind(a), atomKind(u)))
		return
	}
	if a.Scalar != nil && *a.Scalar != *u.Scalar {
		*diffs = append(*diffs, fmt.Sprintf("%s: scalar %s, upstream's %s", path, *a.Scalar, *u.Scalar))
	}
	if a.List != nil {
		if a.List.ElementRelationship != u.List.ElementRelationship || !reflect.DeepEqual(a.List.Keys, u.List.Keys) {
			*diffs = append(*diffs, fmt.Sprintf("%s: list %s %v, upstream's %s %v", path, a.List.ElementRelationship, a.List.Keys, u.List.ElementRelationship, u.List.Keys))
		}
		// A key missing from an applied item takes its default.
		ae, ok1 := ours.Resolve(a.List.ElementType)
		ue, ok2 := theirs.Resolve(u.List.ElementType)
		if ok1 && ok2 && ae.Map != nil && ue.Map != nil {
			for _, k := range u.List.Keys {
				af, _ := ae.Map.FindField(k)
				uf, _ := ue.Map.FindField(k)
				if !reflect.DeepEqual(af.Default, uf.Default) {
					*diffs = append(*diffs, fmt.Sprintf("%s[].%s: default %#v, upstream's %#v", path, k, af.Default, uf.Default))
				}
			}
		}
		compareRefs(ours, theirs, path+"[]", a.List.ElementType, u.List.ElementType, diffs)
	}
	if a.Map != nil {
		if rel(a.Map.ElementRelationship) != rel(u.Map.ElementRelationship) {
			*diffs = append(*diffs, fmt.Sprintf("%s: map %q, upstream's %q", path, a.Map.ElementRelationship, u.Map.ElementRelationship))
		}
		for _, f := range u.Map.Fields {
			if _, ok := a.Map.FindField(f.Name); !ok {
				*diffs = append(*diffs, fmt.Sprintf("%s.%s: missing", path, f.Name))
			}
		}
		for _, f := range a.Map.Fields {
			uf, ok := u.Map.FindField(f.Name)
			if !ok {
				*diffs = append(*diffs, fmt.Sprintf("%s.%s: not upstream's", path, f.Name))
				continue
			}
			compareRefs(ours, theirs, path+"."+f.Name, f.Type, uf.Type, diffs)
		}
		// The elements of an atomic map play no part in apply: it is
		// replaced whole.
		if len(a.Map.Fields) == 0 && rel(a.Map.ElementRelationship) != smdschema.Atomic {
			compareRefs(ours, theirs, path+"{}", a.Map.ElementType, u.Map.ElementType, diffs)
		}
	}
}

func compareRefs(ours, theirs *smdschema.Schema, path string, a, u smdschema.TypeRef, diffs *[]string) {
	if rel(deref(a.ElementRelationship)) != rel(deref(u.ElementRelationship)) {
		*diffs = append(*diffs, fmt.Sprintf("%s: relationship %q, upstream's %q", path, deref(a.ElementRelationship), deref(u.ElementRelationship)))
	}
	if a.NamedType != nil && u.NamedType != nil {
		if *a.NamedType != *u.NamedType {
			// Both resolve: compare what they are (upstream names a few
			// primitives, such as __untyped_atomic_).
			an, ok1 := ours.Resolve(a)
			un, ok2 := theirs.Resolve(u)
			if !ok1 || !ok2 {
				*diffs = append(*diffs, fmt.Sprintf("%s: type %s, upstream's %s", path, *a.NamedType, *u.NamedType))
				return
			}
			if an.Map != nil || un.Map != nil || an.List != nil || un.List != nil {
				*diffs = append(*diffs, fmt.Sprintf("%s: type %s, upstream's %s", path, *a.NamedType, *u.NamedType))
			}
		}
		return // named types are compared by name
	}
	an, ok1 := ours.Resolve(a)
	un, ok2 := theirs.Resolve(u)
	if !ok1 || !ok2 {
		*diffs = append(*diffs, fmt.Sprintf("%s: unresolved", path))
		return
	}
	compareAtoms(ours, theirs, path, an, un, diffs)
}

func deref(e *smdschema.ElementRelationship) smdschema.ElementRelationship {
	if e == nil {
		return ""
	}
	return *e
}

// rel treats the default relationship of maps and structs as upstream's
// converter does.
func rel(e smdschema.ElementRelationship) smdschema.ElementRelationship {
	if e == smdschema.Separable {
		return ""
	}
	return e
}

func atomKind(a smdschema.Atom) string {
	switch {
	case a.Scalar != nil:
		return "scalar"
	case a.List != nil:
		return "list"
	case a.Map != nil:
		return "map"
	}
	return "none"
}

// TestModelNames: the names derived from package paths are the types' own.
func TestModelNames(t *testing.T) {
	type namer interface{ OpenAPIModelName() string }
	n := 0
	for name, typ := range registry.Scheme.AllKnownTypes() {
		if m, ok := reflect.New(typ).Interface().(namer); ok {
			n++
			if got := openapi.ModelName(typ); got != m.OpenAPIModelName() {
				t.Errorf("%s: %s, want %s", name, got, m.OpenAPIModelName())
			}
		}
	}
	if n < 50 {
		t.Fatalf("only %d types have OpenAPIModelName", n)
	}
}
