package crd_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/isle-cluster/isle/control/crd"
	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/control/webhooks"
	"github.com/isle-cluster/isle/raft/rafttest"
)

type env struct {
	*registry.Store
	ctx  context.Context
	crds *registry.Resource
}

// newEnv is a store serving CRDs, with the server and the controller of
// the CRDs running.
func newEnv(t *testing.T) *env {
	t.Helper()
	c := rafttest.NewCluster(t, rafttest.Options{Size: 1})
	s := registry.New(registry.Config{Node: c.Node(c.IDs()[0]), Resources: registry.NewResources(append(registry.Table(), crd.Resource()))})
	e := &env{Store: s, ctx: t.Context()}
	e.crds, _ = s.Resources().Lookup(crd.GroupVersion.WithResource("customresourcedefinitions"))
	ns, _ := s.Resources().Lookup(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"})
	if _, err := s.Create(e.ctx, ns, "", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	go crd.NewServer(s, webhooks.NewClient(s), log).Run(e.ctx)
	go crd.NewController(s, log, func() metav1.Time { return metav1.Now() }).Run(e.ctx)
	return e
}

func (e *env) createCRD(t *testing.T, y string) *crd.CustomResourceDefinition {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := registry.Decode(e.crds, j, registry.FormatJSON, registry.FieldValidationStrict)
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.Create(e.ctx, e.crds, "", obj, registry.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out.(*crd.CustomResourceDefinition)
}

func (e *env) served(t *testing.T, gvr schema.GroupVersionResource) *registry.Resource {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if r, ok := e.Resources().Lookup(gvr); ok {
			return r
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s not served", gvr)
	return nil
}

const widgets = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd], categories: [all]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, minimum: 1, default: 2}
              color: {type: string}
          status:
            type: object
            properties:
              ready: {type: boolean}
    subresources: {status: {}}
  - name: v1beta1
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`

func widget(gv, name, spec string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	_ = json.Unmarshal([]byte(`{"apiVersion":"`+gv+`","kind":"Widget","metadata":{"name":"`+name+`"},"spec":`+spec+`}`), &u.Object)
	return u
}

// TestCustomResourceLifecycle: a CRD is accepted and established, its
// kind served in both versions (stored in one, None conversion), its
// objects pruned, defaulted and validated, its status written through its
// subresource alone; deleting the CRD deletes its objects, then the CRD.
func TestCustomResourceLifecycle(t *testing.T) {
	e := newEnv(t)
	e.createCRD(t, widgets)
	v1 := e.served(t, schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"})
	beta := e.served(t, schema.GroupVersionResource{Group: "example.com", Version: "v1beta1", Resource: "widgets"})
	if !v1.Namespaced || v1.Kind != "Widget" || v1.ShortNames[0] != "wd" || v1.Categories[0] != "all" || !v1.Status || beta.StorageVersion != "v1" {
		t.Fatalf("resource %+v", v1)
	}
	got, _ := e.Get(e.ctx, e.crds, "", "widgets.example.com", metav1.GetOptions{})
	c := got.(*crd.CustomResourceDefinition)
	if c.Status.AcceptedNames.Kind != "Widget" || len(c.Status.StoredVersions) != 1 || c.Status.StoredVersions[0] != "v1" {
		t.Fatalf("status %+v", c.Status)
	}

	obj, err := e.Create(e.ctx, v1, "default", widget("example.com/v1", "a", `{"color":"red","bogus":1}`), registry.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := obj.(*unstructured.Unstructured).Object["spec"].(map[string]any)
	if spec["size"] != int64(2) || spec["bogus"] != nil {
		t.Fatalf("spec not defaulted and pruned: %v", spec)
	}
	if _, err := e.Create(e.ctx, v1, "default", widget("example.com/v1", "b", `{"size":0}`), registry.WriteOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "spec.size in body should be greater than or equal to 1") {
		t.Fatalf("invalid object: %v", err)
	}
	// Read and written in v1beta1, stored in v1.
	old, err := e.Get(e.ctx, beta, "default", "a", metav1.GetOptions{})
	if err != nil || old.(*unstructured.Unstructured).GetAPIVersion() != "example.com/v1beta1" {
		t.Fatalf("v1beta1 read: %v %v", old, err)
	}
	if _, err := e.Create(e.ctx, beta, "default", widget("example.com/v1beta1", "c", `{"anything":true}`), registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	stored, err := e.Get(e.ctx, v1, "default", "c", metav1.GetOptions{})
	if err != nil || stored.(*unstructured.Unstructured).GetAPIVersion() != "example.com/v1" {
		t.Fatalf("v1 read of a v1beta1 write: %v %v", stored, err)
	}
	// The status goes through its subresource alone.
	a := obj.(*unstructured.Unstructured)
	a.Object["status"] = map[string]any{"ready": true}
	upd, err := e.Update(e.ctx, v1, "default", "a", "", a, registry.WriteOptions{})
	if err != nil || upd.(*unstructured.Unstructured).Object["status"] != nil {
		t.Fatalf("status through the main resource: %v %v", upd, err)
	}
	a.SetResourceVersion("")
	upd, err = e.Update(e.ctx, v1, "default", "a", "status", a, registry.WriteOptions{})
	if err != nil || upd.(*unstructured.Unstructured).Object["status"] == nil {
		t.Fatalf("status write: %v %v", upd, err)
	}
	rows, err := v1.Table.Rows(upd, time.Now())
	if err != nil || len(rows) != 1 || rows[0].Cells[0] != "a" {
		t.Fatalf("rows %v %v", rows, err)
	}

	// Deleted: its objects go, then it does, then its kind.
	if _, _, err := e.Delete(e.ctx, e.crds, "", "widgets.example.com", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := e.Get(e.ctx, e.crds, "", "widgets.example.com", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the CRD stays")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := e.Count(v1, ""); n != 0 {
		t.Fatalf("%d objects left", n)
	}
	for time.Now().Before(deadline) {
		if _, ok := e.Resources().Lookup(v1.GroupVersionResource); !ok {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the kind is still served")
}

// TestNamesConflict: a CRD whose names another of its group holds is not
// established.
func TestNamesConflict(t *testing.T) {
	e := newEnv(t)
	e.createCRD(t, widgets)
	e.served(t, schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"})
	e.createCRD(t, strings.NewReplacer("name: widgets.example.com", "name: gadgets.example.com", "plural: widgets", "plural: gadgets", "singular: widget", "singular: gadget").Replace(widgets))
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		got, _ := e.Get(e.ctx, e.crds, "", "gadgets.example.com", metav1.GetOptions{})
		for _, cd := range got.(*crd.CustomResourceDefinition).Status.Conditions {
			if cd.Type == crd.NamesAccepted && cd.Status == "False" && strings.Contains(cd.Message, `"Widget" is already in use`) {
				if _, ok := e.Resources().Lookup(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}); ok {
					t.Fatal("served with a conflict")
				}
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no NamesAccepted=False condition")
}

// TestCRDValidation: a CRD that breaks the rules is refused, naming the
// field.
func TestCRDValidation(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct{ from, to, want string }{
		{"name: widgets.example.com", "name: widgets.other.com", "metadata.name: Invalid value"},
		{"group: example.com", "group: example", "spec.group: Invalid value: \"example\": should be a domain with at least one dot"},
		{"scope: Namespaced", "scope: Everywhere", "spec.scope: Unsupported value"},
		{"storage: false", "storage: true", "must have exactly one version marked as storage version"},
		{"type: integer, minimum: 1, default: 2", "minimum: 1", "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[size].type: Required value"},
		{"kind: Widget,", "kind: widget_x,", "spec.names.kind"},
	} {
		j, _ := yaml.YAMLToJSON([]byte(strings.Replace(widgets, tc.from, tc.to, 1)))
		obj, _, err := registry.Decode(e.crds, j, registry.FormatJSON, registry.FieldValidationStrict)
		if err == nil {
			_, err = e.Create(e.ctx, e.crds, "", obj, registry.WriteOptions{})
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s → %s: got %v, want %q", tc.from, tc.to, err, tc.want)
		}
	}
}

// TestDefaultsOnReadAndSelectableFields: a default added to the schema
// after an object was written shows when it is read; a selectable field
// is a field selector of the kind.
func TestDefaultsOnReadAndSelectableFields(t *testing.T) {
	e := newEnv(t)
	c := e.createCRD(t, strings.Replace(widgets, "    subresources: {status: {}}", "    subresources: {status: {}}\n    selectableFields: [{jsonPath: .spec.color}]", 1))
	v1 := e.served(t, schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"})
	for _, w := range []struct{ name, color string }{{"a", "red"}, {"b", "blue"}} {
		if _, err := e.Create(e.ctx, v1, "default", widget("example.com/v1", w.name, `{"color":"`+w.color+`"}`), registry.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	list, err := e.List(e.ctx, v1, "default", metav1.ListOptions{FieldSelector: "spec.color=blue"})
	if err != nil || len(list.(*unstructured.UnstructuredList).Items) != 1 || list.(*unstructured.UnstructuredList).Items[0].GetName() != "b" {
		t.Fatalf("spec.color=blue: %v %v", list, err)
	}
	if _, err := e.List(e.ctx, v1, "default", metav1.ListOptions{FieldSelector: "spec.size=2"}); err == nil {
		t.Fatal("a field selector the CRD does not declare")
	}
	// A default added to the schema.
	_, err = e.Mutate(e.ctx, e.crds, "", c.Name, "", func(obj runtime.Object) error {
		props := obj.(*crd.CustomResourceDefinition).Spec.Versions[0].Schema.OpenAPIV3Schema.Properties
		spec := props["spec"]
		spec.Properties["shape"] = crd.JSONSchemaProps{Type: "string", Default: &crd.JSON{Raw: []byte(`"round"`)}}
		props["spec"] = spec
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if r, ok := e.Resources().Lookup(v1.GroupVersionResource); ok && r != v1 {
			got, err := e.Get(e.ctx, r, "default", "a", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if shape, _, _ := unstructured.NestedString(got.(*unstructured.Unstructured).Object, "spec", "shape"); shape != "round" {
				t.Fatalf("read after a default was added: %v", got)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the changed CRD is not served")
}
