package registry_test

import (
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/isle-cluster/isle/control/registry"
)

// apply is a server-side apply as manager.
func (e *env) apply(t *testing.T, r *registry.Resource, name, sub, patch, manager string, force bool) (runtime.Object, bool, error) {
	t.Helper()
	obj, created, _, err := e.Apply(e.ctx, r, "default", name, sub, []byte(patch), registry.FieldValidationStrict,
		registry.WriteOptions{Manager: manager, Force: force})
	return obj, created, err
}

// owners lists, for each managed-fields entry, its manager, operation,
// subresource and fields.
func owners(t *testing.T, obj runtime.Object) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, mf := range obj.(metav1.Object).GetManagedFields() {
		key := mf.Manager + "/" + string(mf.Operation)
		if mf.Subresource != "" {
			key += "/" + mf.Subresource
		}
		out[key] = string(mf.FieldsV1.Raw)
	}
	return out
}

const appliedDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {team: a}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1
        ports:
        - containerPort: 80
`

// TestApply follows the cases kube-apiserver's server-side apply
// documents: create by apply, ownership, conflicts naming managers and
// fields, force, shared ownership of equal values, the removal of fields a
// manager stops applying, and managed fields of ordinary writes.
func TestApply(t *testing.T) {
	e := newEnv(t)
	deploys := e.deploys(t)

	obj, created, err := e.apply(t, deploys, "web", "", appliedDeployment, "alice", false)
	if err != nil || !created {
		t.Fatalf("create by apply: created %v, %v", created, err)
	}
	d := obj.(*appsv1.Deployment)
	if *d.Spec.Replicas != 2 || d.Spec.Template.Spec.Containers[0].ImagePullPolicy != corev1.PullIfNotPresent || d.Generation != 1 {
		t.Fatalf("applied deployment not defaulted as a create: %+v", d.Spec)
	}
	own := owners(t, d)
	if !strings.Contains(own["alice/Apply"], `"f:replicas":{}`) || !strings.Contains(own["alice/Apply"], `"k:{\"containerPort\":80,\"protocol\":\"TCP\"}"`) {
		t.Fatalf("alice's fields: %v", own)
	}

	t.Run("the same apply again changes nothing", func(t *testing.T) {
		obj, created, err := e.apply(t, deploys, "web", "", appliedDeployment, "alice", false)
		if err != nil || created {
			t.Fatal(created, err)
		}
		if got := obj.(*appsv1.Deployment); got.ResourceVersion != d.ResourceVersion || got.Generation != 1 {
			t.Fatalf("resourceVersion %s→%s generation %d", d.ResourceVersion, got.ResourceVersion, got.Generation)
		}
	})

	t.Run("conflict names the manager and the field", func(t *testing.T) {
		_, _, err := e.apply(t, deploys, "web", "", strings.Replace(appliedDeployment, "replicas: 2", "replicas: 3", 1), "bob", false)
		if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `conflict with "alice": .spec.replicas`) {
			t.Fatalf("got %v", err)
		}
		var st *apierrors.StatusError
		if se, ok := err.(*apierrors.StatusError); ok {
			st = se
		}
		if st == nil || st.ErrStatus.Details == nil || len(st.ErrStatus.Details.Causes) != 1 || st.ErrStatus.Details.Causes[0].Field != ".spec.replicas" {
			t.Fatalf("causes: %+v", st)
		}
	})

	t.Run("equal values are co-owned", func(t *testing.T) {
		obj, _, err := e.apply(t, deploys, "web", "", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 2}\n", "carol", false)
		if err != nil {
			t.Fatal(err)
		}
		own := owners(t, obj)
		if !strings.Contains(own["carol/Apply"], "f:replicas") || !strings.Contains(own["alice/Apply"], "f:replicas") {
			t.Fatalf("replicas not shared: %v", own)
		}
	})

	t.Run("force takes the field over", func(t *testing.T) {
		obj, _, err := e.apply(t, deploys, "web", "", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 5}\n", "bob", true)
		if err != nil {
			t.Fatal(err)
		}
		own := owners(t, obj)
		if *obj.(*appsv1.Deployment).Spec.Replicas != 5 || strings.Contains(own["alice/Apply"], "f:replicas") || strings.Contains(own["carol/Apply"], "f:replicas") ||
			!strings.Contains(own["bob/Apply"], "f:replicas") {
			t.Fatalf("after force: replicas %d, %v", *obj.(*appsv1.Deployment).Spec.Replicas, own)
		}
	})

	t.Run("a field no longer applied is removed", func(t *testing.T) {
		// alice stops applying the label team=a: she was its only owner.
		noLabel := strings.Replace(strings.Replace(appliedDeployment, "  labels: {team: a}\n", "", 1), "  replicas: 2\n", "", 1)
		obj, _, err := e.apply(t, deploys, "web", "", noLabel, "alice", false)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := obj.(*appsv1.Deployment).Labels["team"]; ok {
			t.Fatalf("label kept: %v", obj.(*appsv1.Deployment).Labels)
		}
	})

	t.Run("an update is recorded as its manager's", func(t *testing.T) {
		obj, err := e.Mutate(e.ctx, deploys, "default", "web", "", func(o runtime.Object) error {
			o.(*appsv1.Deployment).Annotations = map[string]string{"note": "x"}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if own := owners(t, obj); !strings.Contains(own[registry.DefaultManager+"/Update"], "f:note") {
			t.Fatalf("%v", own)
		}
		obj, _, err = e.Patch(e.ctx, deploys, "default", "web", "", types.MergePatchType, []byte(`{"metadata":{"labels":{"tier":"x"}}}`),
			registry.FieldValidationStrict, registry.WriteOptions{Manager: "kubectl-label"})
		if err != nil {
			t.Fatal(err)
		}
		if own := owners(t, obj); !strings.Contains(own["kubectl-label/Update"], "f:tier") {
			t.Fatalf("%v", own)
		}
	})

	t.Run("status apply", func(t *testing.T) {
		obj, _, err := e.apply(t, deploys, "web", "status", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nstatus: {observedGeneration: 7}\nspec: {replicas: 9}\n", "statusbot", false)
		if err != nil {
			t.Fatal(err)
		}
		got := obj.(*appsv1.Deployment)
		if got.Status.ObservedGeneration != 7 || *got.Spec.Replicas != 5 {
			t.Fatalf("status %d replicas %d: a status apply changes the status alone", got.Status.ObservedGeneration, *got.Spec.Replicas)
		}
		own := owners(t, got)
		if f := own["statusbot/Apply/status"]; !strings.Contains(f, "f:observedGeneration") || strings.Contains(f, "f:spec") {
			t.Fatalf("statusbot's fields: %v", own)
		}
	})

	t.Run("managed fields reset by a client", func(t *testing.T) {
		obj, _, err := e.Patch(e.ctx, deploys, "default", "web", "", types.MergePatchType, []byte(`{"metadata":{"managedFields":[{}]}}`),
			registry.FieldValidationStrict, registry.WriteOptions{Manager: "cleaner"})
		if err != nil {
			t.Fatal(err)
		}
		if mf := obj.(metav1.Object).GetManagedFields(); len(mf) != 0 {
			t.Fatalf("managed fields after a reset: %v", owners(t, obj))
		}
		// What nobody owned is "before-first-apply"'s at the next apply.
		_, _, err = e.apply(t, deploys, "web", "", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 4}\n", "bob", false)
		if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `"before-first-apply"`) {
			t.Fatalf("got %v", err)
		}
	})

	t.Run("dry run stores nothing", func(t *testing.T) {
		before := e.get(t, deploys, "default", "web").(*appsv1.Deployment)
		obj, _, _, err := e.Apply(e.ctx, deploys, "default", "web", "", []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 1}\n"),
			registry.FieldValidationStrict, registry.WriteOptions{Manager: "bob", DryRun: true, Force: true})
		if err != nil || *obj.(*appsv1.Deployment).Spec.Replicas != 1 {
			t.Fatal(err)
		}
		if after := e.get(t, deploys, "default", "web").(*appsv1.Deployment); after.ResourceVersion != before.ResourceVersion {
			t.Fatal("a dry run stored")
		}
	})

	t.Run("invalid result is refused", func(t *testing.T) {
		_, _, err := e.apply(t, deploys, "web", "", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: -1}\n", "bob", true)
		if !apierrors.IsInvalid(err) {
			t.Fatalf("got %v", err)
		}
	})

	t.Run("duplicate field", func(t *testing.T) {
		_, _, err := e.apply(t, deploys, "web", "", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 1}\nspec: {replicas: 2}\n", "bob", true)
		if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "already set") {
			t.Fatalf("got %v", err)
		}
	})
}

// TestApplyAfterClientSideApply: an object made by kubectl's client-side
// apply (the last-applied annotation, its Update manager) is taken over by
// a server-side apply of the same configuration without a conflict, as
// kube-apiserver's last-applied manager allows.
func TestApplyAfterClientSideApply(t *testing.T) {
	e := newEnv(t)
	cms := e.cms(t)
	config := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": "default"}, "data": map[string]any{"a": "1"}}
	last, _ := json.Marshal(config)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Annotations: map[string]string{corev1.LastAppliedConfigAnnotation: string(last)}}, Data: map[string]string{"a": "1"}}
	if _, err := e.Create(e.ctx, cms, "default", cm, registry.WriteOptions{Manager: "kubectl-client-side-apply"}); err != nil {
		t.Fatal(err)
	}
	// The same data, a new value: the client-side manager's field, applied
	// by the server-side one.
	obj, _, err := e.apply(t, cms, "c", "", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: \"2\"}\n", "kubectl", false)
	if err != nil {
		t.Fatalf("server-side apply after client-side apply: %v", err)
	}
	got := obj.(*corev1.ConfigMap)
	if got.Data["a"] != "2" || !strings.Contains(got.Annotations[corev1.LastAppliedConfigAnnotation], `"a":"2"`) {
		t.Fatalf("data %v, last-applied %s", got.Data, got.Annotations[corev1.LastAppliedConfigAnnotation])
	}
}

// TestApplyAcrossVersions: an autoscaling/v1 apply of an object stored as
// v2, with v2 managers, converts between the versions.
func TestApplyAcrossVersions(t *testing.T) {
	e := newEnv(t)
	v2 := e.res(t, "autoscaling", "v2", "horizontalpodautoscalers")
	v1 := e.res(t, "autoscaling", "v1", "horizontalpodautoscalers")
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "h"}, Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, MaxReplicas: 5}}
	if _, err := e.Create(e.ctx, v2, "default", hpa, registry.WriteOptions{Manager: "v2-writer"}); err != nil {
		t.Fatal(err)
	}
	obj, _, err := e.apply(t, v1, "h", "", "apiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\nmetadata: {name: h}\nspec:\n  maxReplicas: 7\n  targetCPUUtilizationPercentage: 50\n", "v1-applier", true)
	if err != nil {
		t.Fatal(err)
	}
	own := owners(t, obj)
	if !strings.Contains(own["v1-applier/Apply"], "f:maxReplicas") || own["v2-writer/Update"] == "" {
		t.Fatalf("%v", own)
	}
	got := e.get(t, v2, "default", "h").(*autoscalingv2.HorizontalPodAutoscaler)
	if got.Spec.MaxReplicas != 7 || len(got.Spec.Metrics) != 1 {
		t.Fatalf("stored: %+v", got.Spec)
	}
}
