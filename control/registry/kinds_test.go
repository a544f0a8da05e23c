package registry_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/raft"
)

// TestTableEntriesComplete: every entry has what the registry and the API
// server call, and its strategy validates names as its scope wants.
func TestTableEntriesComplete(t *testing.T) {
	for _, r := range registry.Table() {
		t.Run(r.String()+"/"+r.Version, func(t *testing.T) {
			if r.New == nil || r.NewList == nil || r.Strategy == nil || r.Table == nil {
				t.Fatal("entry lacks New, NewList, Strategy or Table")
			}
			if r.StorageVersion != "" && r.Convert == nil {
				t.Fatal("stored in another version without a conversion")
			}
			// The strategy's metadata check (which every update runs)
			// refuses a namespace on a cluster-scoped kind only.
			obj := r.New()
			m, _ := obj.(metav1.Object)
			m.SetName("x")
			m.SetNamespace("default")
			refused := false
			for _, e := range r.Strategy.ValidateUpdate(obj, obj.DeepCopyObject()) {
				refused = refused || e.Field == "metadata.namespace"
			}
			if refused == r.Namespaced {
				t.Errorf("namespaced %v, but its strategy refuses a namespace: %v", r.Namespaced, refused)
			}
		})
	}
}

// TestNoPanicOnEmptyObjects runs every strategy function of every kind on
// empty objects: user input must never panic.
func TestNoPanicOnEmptyObjects(t *testing.T) {
	for _, r := range registry.Table() {
		t.Run(r.String()+"/"+r.Version, func(t *testing.T) { runStrategy(r, r.New()) })
	}
}

// FuzzStrategies decodes arbitrary JSON into an object of each kind and
// runs its whole strategy on it; nothing may panic.
func FuzzStrategies(f *testing.F) {
	for _, seed := range []string{
		`{}`,
		`{"metadata":{"name":"x","namespace":"d"},"spec":{"containers":[{"name":"c","livenessProbe":{},"lifecycle":{"preStop":{}}}],"volumes":[{"name":"v","projected":{"sources":[{"serviceAccountToken":{}}]}}]}}`,
		`{"spec":{"selector":{"matchExpressions":[{"key":"a","operator":"In"}]},"template":{"spec":{"initContainers":[{"restartPolicy":"Always"}]}},"strategy":{"type":"RollingUpdate"},"updateStrategy":{"type":"RollingUpdate"}}}`,
		`{"spec":{"ports":[{"port":1,"targetPort":"x"}],"clusterIPs":["None","1.2.3.4"],"type":"LoadBalancer"},"status":{"loadBalancer":{"ingress":[{"ipMode":"VIP"}]}}}`,
		`{"spec":{"rules":[{"http":{"paths":[{"backend":{}}]}}],"metrics":[{"type":"Object","object":{}}],"behavior":{"scaleUp":{}}},"ports":[{}],"endpoints":[{}]}`,
	} {
		f.Add([]byte(seed))
	}
	table := registry.Table()
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, r := range table {
			obj := r.New()
			if json.Unmarshal(data, obj) == nil {
				runStrategy(r, obj)
			}
		}
	})
}

// runStrategy calls every function of r's strategy on obj.
func runStrategy(r *registry.Resource, obj runtime.Object) {
	old := obj.DeepCopyObject()
	s := r.Strategy
	s.PrepareForCreate(obj)
	_ = s.ValidateCreate(obj)
	s.PrepareForUpdate(obj, old)
	_ = s.ValidateUpdate(obj, old)
	s.PrepareForStatusUpdate(obj, old)
	_ = s.ValidateStatusUpdate(obj, old)
	_, _ = s.BeginDelete(obj, metav1.DeleteOptions{})
	_ = s.HeldBack(obj)
}

// widgetStrategy is a trivial strategy for a kind without a Go type: no
// defaults, and a widget needs spec.size.
type widgetStrategy struct{}

func (widgetStrategy) PrepareForCreate(obj runtime.Object) {
	unstructured.RemoveNestedField(obj.(*unstructured.Unstructured).Object, "status")
}
func (widgetStrategy) PrepareForUpdate(obj, old runtime.Object)       {}
func (widgetStrategy) PrepareForStatusUpdate(obj, old runtime.Object) {}
func (widgetStrategy) ValidateCreate(obj runtime.Object) field.ErrorList {
	if _, ok, _ := unstructured.NestedInt64(obj.(*unstructured.Unstructured).Object, "spec", "size"); !ok {
		return field.ErrorList{field.Required(field.NewPath("spec", "size"), "")}
	}
	return nil
}
func (s widgetStrategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	return s.ValidateCreate(obj)
}
func (widgetStrategy) ValidateStatusUpdate(obj, old runtime.Object) field.ErrorList { return nil }
func (widgetStrategy) BeginDelete(runtime.Object, metav1.DeleteOptions) (int64, bool) {
	return 0, false
}
func (widgetStrategy) HeldBack(runtime.Object) bool { return false }

// TestUnstructuredKind: a kind without a Go type, registered with an entry
// of *unstructured.Unstructured and a trivial strategy, is created, read,
// decoded, created, watched, read, updated, merge-patched, listed, selected
// by field and deleted through the Store, as a CustomResourceDefinition's
// kind will be.
func TestUnstructuredKind(t *testing.T) {
	gv := schema.GroupVersion{Group: "example.isle.dev", Version: "v1"}
	widgets := &registry.Resource{
		GroupVersionResource: gv.WithResource("widgets"),
		Kind:                 "Widget", Singular: "widget", Namespaced: true, Status: true,
		New:      func() runtime.Object { return &unstructured.Unstructured{} },
		NewList:  func() runtime.Object { return &unstructured.UnstructuredList{} },
		Strategy: widgetStrategy{},
		Fields: map[string]func(runtime.Object) string{"spec.color": func(obj runtime.Object) string {
			s, _, _ := unstructured.NestedString(obj.(*unstructured.Unstructured).Object, "spec", "color")
			return s
		}},
	}
	e := newEnv(t, func(_ *raft.Config, c *registry.Config) {
		c.Resources = registry.NewResources(append(registry.Table(), widgets))
	})
	widget := func(name, color string, size int64) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": gv.String(), "kind": "Widget",
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"color": color, "size": size},
			"status":   map[string]any{"ready": true},
		}}
		return u
	}

	if _, err := e.Create(e.ctx, widgets, "default", &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gv.String(), "kind": "Widget", "metadata": map[string]any{"name": "bad"}, "spec": map[string]any{}},
	}, registry.WriteOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("create without spec.size: %v, want invalid", err)
	}
	events, err := e.Watch(e.ctx, widgets, "default", metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	// A request body decodes into the kind's object.
	body := []byte(`{"apiVersion":"example.isle.dev/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"color":"red","size":1},"status":{"ready":true}}`)
	obj, _, err := registry.Decode(widgets, body, registry.FormatJSON, registry.FieldValidationStrict)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	e.create(t, widgets, "default", obj)
	e.create(t, widgets, "default", widget("b", "blue", 2))
	for _, want := range []string{"a", "b"} {
		select {
		case ev := <-events:
			if ev.Type != watch.Added || nameOf(ev.Object) != want {
				t.Fatalf("watch event %s %s, want ADDED %s", ev.Type, nameOf(ev.Object), want)
			}
		case <-time.After(wait):
			t.Fatalf("no watch event for %s", want)
		}
	}

	got := e.get(t, widgets, "default", "a").(*unstructured.Unstructured)
	if got.GetUID() == "" || got.GetResourceVersion() == "" || got.GetGeneration() != 1 {
		t.Errorf("system fields not set: uid %q, rv %q, generation %d", got.GetUID(), got.GetResourceVersion(), got.GetGeneration())
	}
	if _, ok := got.Object["status"]; ok {
		t.Errorf("create kept the client's status: %v", got.Object["status"])
	}
	if size, _, _ := unstructured.NestedInt64(got.Object, "spec", "size"); size != 1 {
		t.Errorf("spec.size = %d, want 1", size)
	}

	// An update of the spec bumps the generation and keeps the status.
	got.Object["spec"].(map[string]any)["size"] = int64(3)
	got.Object["status"] = map[string]any{"ready": true}
	upd, err := e.Update(e.ctx, widgets, "default", "a", "", got, registry.WriteOptions{})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if u := upd.(*unstructured.Unstructured); u.GetGeneration() != 2 || u.Object["status"] != nil {
		t.Errorf("after update: generation %d, status %v; want 2 and none", u.GetGeneration(), u.Object["status"])
	}

	// A merge patch applies to the object's JSON.
	patched, _, err := e.Patch(e.ctx, widgets, "default", "b", "", types.MergePatchType, []byte(`{"spec":{"size":5}}`),
		registry.FieldValidationStrict, registry.WriteOptions{})
	if err != nil {
		t.Fatalf("merge patch: %v", err)
	}
	if size, _, _ := unstructured.NestedInt64(patched.(*unstructured.Unstructured).Object, "spec", "size"); size != 5 {
		t.Errorf("patched spec.size = %d, want 5", size)
	}

	list, err := e.List(e.ctx, widgets, "default", metav1.ListOptions{FieldSelector: "spec.color=blue"})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	items := list.(*unstructured.UnstructuredList).Items
	if len(items) != 1 || items[0].GetName() != "b" {
		t.Fatalf("list spec.color=blue: %d items, want b", len(items))
	}
	if _, err := e.List(e.ctx, widgets, "default", metav1.ListOptions{FieldSelector: "spec.shape=round"}); !apierrors.IsBadRequest(err) {
		t.Errorf("list by a field the kind does not index: %v, want bad request", err)
	}

	if _, deleted, err := e.Delete(e.ctx, widgets, "default", "a", metav1.DeleteOptions{}); err != nil || !deleted {
		t.Fatalf("delete: deleted %v, %v", deleted, err)
	}
	if _, err := e.Get(e.ctx, widgets, "default", "a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get after delete: %v, want not found", err)
	}
	list, err = e.List(e.ctx, widgets, "", metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if n := len(list.(*unstructured.UnstructuredList).Items); n != 1 {
		t.Errorf("%d widgets left, want 1", n)
	}
	if !reflect.DeepEqual(list.GetObjectKind().GroupVersionKind(), gv.WithKind("WidgetList")) {
		t.Errorf("list kind %v", list.GetObjectKind().GroupVersionKind())
	}
}
