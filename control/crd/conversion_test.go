package crd_test

import (
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/isle-cluster/isle/control/crd"
	"github.com/isle-cluster/isle/control/registry"
)

// gizmoConverter is a conversion webhook of gizmos: v1's spec.size is
// v2's spec.length.
func gizmoConverter(w http.ResponseWriter, r *http.Request) {
	var review crd.ConversionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "bad review", http.StatusBadRequest)
		return
	}
	resp := &crd.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	for _, raw := range review.Request.Objects {
		var u unstructured.Unstructured
		if err := u.UnmarshalJSON(raw.Raw); err != nil {
			resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
			break
		}
		from, to := "size", "length"
		if review.Request.DesiredAPIVersion == "example.com/v1" {
			from, to = to, from
		}
		if v, ok, _ := unstructured.NestedFieldCopy(u.Object, "spec", from); ok {
			unstructured.RemoveNestedField(u.Object, "spec", from)
			_ = unstructured.SetNestedField(u.Object, v, "spec", to)
		}
		u.SetAPIVersion(review.Request.DesiredAPIVersion)
		u.SetLabels(map[string]string{"converted": "yes"})
		u.SetUID("not-the-servers") // dropped: the metadata is the server's
		out, _ := u.MarshalJSON()
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtimeRaw(out))
	}
	review.Request, review.Response = nil, resp
	_ = json.NewEncoder(w).Encode(&review)
}

// TestConversionWebhook: a CRD of two versions converted by a webhook
// over TLS: an object written in one version is stored in the other and
// read in both; the webhook down, reads in the other version fail naming
// it, and the stored version still reads.
func TestConversionWebhook(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(gizmoConverter))
	defer srv.Close()
	ca := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	e := newEnv(t)
	e.createCRD(t, `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gizmos.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gizmos, singular: gizmo, kind: Gizmo}
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig: {url: "`+srv.URL+`/convert", caBundle: `+ca+`}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, properties: {size: {type: integer}}}}}}
  - name: v2
    served: true
    storage: false
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, properties: {length: {type: integer}}}}}}
`)
	v1 := e.served(t, schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gizmos"})
	v2 := e.served(t, schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "gizmos"})
	g := &unstructured.Unstructured{}
	_ = json.Unmarshal([]byte(`{"apiVersion":"example.com/v2","kind":"Gizmo","metadata":{"name":"g","namespace":"default"},"spec":{"length":3}}`), &g.Object)
	if _, err := e.Create(e.ctx, v2, "default", g, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	got1, err := e.Get(e.ctx, v1, "default", "g", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u1 := got1.(*unstructured.Unstructured)
	if n, _, _ := unstructured.NestedInt64(u1.Object, "spec", "size"); n != 3 || u1.GetAPIVersion() != "example.com/v1" {
		t.Errorf("read as v1: %v", u1.Object)
	}
	got2, err := e.Get(e.ctx, v2, "default", "g", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u2 := got2.(*unstructured.Unstructured)
	if n, _, _ := unstructured.NestedInt64(u2.Object, "spec", "length"); n != 3 || u2.GetAPIVersion() != "example.com/v2" {
		t.Errorf("read as v2: %v", u2.Object)
	}
	if u2.GetUID() != u1.GetUID() || u2.GetLabels()["converted"] != "yes" {
		t.Errorf("metadata after conversion: uid %s (stored %s), labels %v: want the server's uid and the webhook's labels", u2.GetUID(), u1.GetUID(), u2.GetLabels())
	}
	list, err := e.List(e.ctx, v2, "default", metav1.ListOptions{})
	if err != nil || len(list.(*unstructured.UnstructuredList).Items) != 1 {
		t.Fatalf("list as v2: %v", err)
	}
	// The storage version moves to v2: g stays stored in v1, a new one is
	// stored in v2, and a list in either version converts each as needed.
	if _, err := e.Mutate(e.ctx, e.crds, "", "gizmos.example.com", "", func(obj runtime.Object) error {
		c := obj.(*crd.CustomResourceDefinition)
		c.Spec.Versions[0].Storage, c.Spec.Versions[1].Storage = false, true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if r, ok := e.Resources().Lookup(v1.GroupVersionResource); ok && r.StorageVersion == "v2" {
			v1, v2 = r, e.served(t, v2.GroupVersionResource)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the new storage version is not served")
		}
		time.Sleep(20 * time.Millisecond)
	}
	h := &unstructured.Unstructured{}
	_ = json.Unmarshal([]byte(`{"apiVersion":"example.com/v1","kind":"Gizmo","metadata":{"name":"h","namespace":"default"},"spec":{"size":5}}`), &h.Object)
	if _, err := e.Create(e.ctx, v1, "default", h, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		r     *registry.Resource
		field string
	}{{v1, "size"}, {v2, "length"}} {
		list, err := e.List(e.ctx, c.r, "default", metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for _, it := range list.(*unstructured.UnstructuredList).Items {
			n, _, _ := unstructured.NestedInt64(it.Object, "spec", c.field)
			got[it.GetName()] = n
			if it.GetAPIVersion() != c.r.GroupVersion().String() {
				t.Errorf("%s listed as %s has apiVersion %s", it.GetName(), c.r.GroupVersion(), it.GetAPIVersion())
			}
		}
		if got["g"] != 3 || got["h"] != 5 {
			t.Errorf("list as %s: spec.%s %v, want g 3 and h 5 (stored in v1 and v2)", c.r.GroupVersion(), c.field, got)
		}
	}
	srv.Close()
	_, err = e.Get(e.ctx, v2, "default", "g", metav1.GetOptions{})
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "conversion webhook for example.com/v1, Kind=Gizmo failed") {
		t.Errorf("read as v2 with the webhook down: %v", err)
	}
	if _, err := e.Get(e.ctx, v1, "default", "g", metav1.GetOptions{}); err != nil {
		t.Errorf("read in the version it is stored in (v1) with the webhook down: %v", err)
	}
}

func runtimeRaw(b []byte) runtime.RawExtension { return runtime.RawExtension{Raw: b} }
