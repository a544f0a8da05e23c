package registry_test

import (
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/registry"
)

func TestDecode(t *testing.T) {
	rs := registry.NewResources(registry.Table())
	pods, _ := rs.Lookup(schema.GroupVersionResource{Version: "v1", Resource: "pods"})
	deploys, _ := rs.Lookup(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"})

	const unknown = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"bogus":1,"containers":[{"name":"c","image":"i"}]}}`
	const unknownYAML = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  bogus: 1\n  containers:\n  - name: c\n    image: i\n"
	const duplicate = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","name":"q"},"spec":{"containers":[{"name":"c","image":"i"}]}}`
	const wrongKind = `{"apiVersion":"v1","kind":"Service","metadata":{"name":"p"}}`
	const wrongGroup = `{"apiVersion":"apps/v1","kind":"Pod","metadata":{"name":"p"}}`
	const noTypeMeta = `{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i"}]}}`

	tests := []struct {
		name     string
		res      *registry.Resource
		body     string
		format   registry.Format
		mode     registry.FieldValidation
		wantErr  string // part of a 400's message; "" for success
		warnings string // part of a warning; "" for none
	}{
		{"strict unknown field", pods, unknown, registry.FormatJSON, registry.FieldValidationStrict, `unknown field "spec.bogus"`, ""},
		{"warn unknown field", pods, unknown, registry.FormatJSON, registry.FieldValidationWarn, "", `unknown field "spec.bogus"`},
		{"ignore unknown field", pods, unknown, registry.FormatJSON, registry.FieldValidationIgnore, "", ""},
		{"strict unknown field yaml", pods, unknownYAML, registry.FormatYAML, registry.FieldValidationStrict, `unknown field "spec.bogus"`, ""},
		{"warn unknown field yaml", pods, unknownYAML, registry.FormatYAML, registry.FieldValidationWarn, "", `unknown field "spec.bogus"`},
		{"strict duplicate field", pods, duplicate, registry.FormatJSON, registry.FieldValidationStrict, `duplicate field "metadata.name"`, ""},
		{"warn duplicate field", pods, duplicate, registry.FormatJSON, registry.FieldValidationWarn, "", `duplicate field "metadata.name"`},
		{"strict wrong kind", pods, wrongKind, registry.FormatJSON, registry.FieldValidationStrict, "do not match the expected v1, Kind=Pod", ""},
		{"warn wrong kind", pods, wrongKind, registry.FormatJSON, registry.FieldValidationWarn, "do not match the expected v1, Kind=Pod", ""},
		{"ignore wrong kind", pods, wrongKind, registry.FormatJSON, registry.FieldValidationIgnore, "do not match the expected v1, Kind=Pod", ""},
		{"wrong group", pods, wrongGroup, registry.FormatJSON, registry.FieldValidationIgnore, `"apps/v1"`, ""},
		{"pod body for deployments", deploys, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`, registry.FormatJSON, registry.FieldValidationStrict, "do not match the expected apps/v1, Kind=Deployment", ""},
		{"no apiVersion and kind", pods, noTypeMeta, registry.FormatJSON, registry.FieldValidationStrict, "", ""},
		{"not JSON", pods, `{"apiVersion":`, registry.FormatJSON, registry.FieldValidationStrict, "could not be decoded", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj, warnings, err := registry.Decode(tc.res, []byte(tc.body), tc.format, tc.mode)
			if tc.wantErr != "" {
				if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want a 400 containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := obj.GetObjectKind().GroupVersionKind(); got != tc.res.GVK() {
				t.Errorf("decoded as %v", got)
			}
			if tc.res == pods {
				p, ok := obj.(*corev1.Pod)
				if !ok || p.Name == "" || len(p.Spec.Containers) != 1 {
					t.Errorf("decoded %#v", obj)
				}
			}
			joined := strings.Join(warnings, "\n")
			if tc.warnings == "" && len(warnings) > 0 {
				t.Errorf("unexpected warnings %q", warnings)
			}
			if tc.warnings != "" && !strings.Contains(joined, tc.warnings) {
				t.Errorf("warnings %q, want one containing %q", warnings, tc.warnings)
			}
		})
	}
}

func TestHPAVersions(t *testing.T) {
	e := newEnv(t)
	v1 := e.res(t, "autoscaling", "v1", "horizontalpodautoscalers")
	v2 := e.res(t, "autoscaling", "v2", "horizontalpodautoscalers")
	target := autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}

	cpuV2 := func(t *testing.T, name string) int32 {
		t.Helper()
		h := e.get(t, v2, "default", name).(*autoscalingv2.HorizontalPodAutoscaler)
		if len(h.Spec.Metrics) != 1 || h.Spec.Metrics[0].Resource == nil || h.Spec.Metrics[0].Resource.Name != corev1.ResourceCPU ||
			h.Spec.Metrics[0].Resource.Target.AverageUtilization == nil {
			t.Fatalf("v2 metrics %+v", h.Spec.Metrics)
		}
		return *h.Spec.Metrics[0].Resource.Target.AverageUtilization
	}
	cpuV1 := func(t *testing.T, name string) int32 {
		t.Helper()
		h := e.get(t, v1, "default", name).(*autoscalingv1.HorizontalPodAutoscaler)
		if h.APIVersion != "autoscaling/v1" || h.Spec.TargetCPUUtilizationPercentage == nil {
			t.Fatalf("v1 object %s %+v", h.APIVersion, h.Spec)
		}
		return *h.Spec.TargetCPUUtilizationPercentage
	}

	w := e.watch(t, v1, "default", metav1.ListOptions{ResourceVersion: e.get(t, e.res(t, "", "v1", "namespaces"), "", "default").(*corev1.Namespace).ResourceVersion})

	t.Run("created as v1", func(t *testing.T) {
		e.create(t, v1, "default", &autoscalingv1.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: "h1"},
			Spec: autoscalingv1.HorizontalPodAutoscalerSpec{ScaleTargetRef: target, MinReplicas: ptr(int32(1)), MaxReplicas: 5,
				TargetCPUUtilizationPercentage: ptr(int32(60))},
		})
		if got := cpuV2(t, "h1"); got != 60 {
			t.Errorf("v2 reads %d, want 60", got)
		}
		if got := cpuV1(t, "h1"); got != 60 {
			t.Errorf("v1 reads %d, want 60", got)
		}
	})
	t.Run("created as v2", func(t *testing.T) {
		e.create(t, v2, "default", &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: "h2"},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference(target), MaxReplicas: 3,
				Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
					Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr(int32(70))}}}},
			},
		})
		if got := cpuV1(t, "h2"); got != 70 {
			t.Errorf("v1 reads %d, want 70", got)
		}
	})
	t.Run("updated as v1", func(t *testing.T) {
		h := e.get(t, v1, "default", "h2").(*autoscalingv1.HorizontalPodAutoscaler)
		h.Spec.TargetCPUUtilizationPercentage = ptr(int32(80))
		if _, err := e.Update(e.ctx, v1, "default", "h2", "", h, registry.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := cpuV2(t, "h2"); got != 80 {
			t.Errorf("v2 reads %d, want 80", got)
		}
	})
	t.Run("listed as v1", func(t *testing.T) {
		list, err := e.List(e.ctx, v1, "default", metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l := list.(*autoscalingv1.HorizontalPodAutoscalerList)
		if len(l.Items) != 2 || l.Kind != "HorizontalPodAutoscalerList" || l.APIVersion != "autoscaling/v1" {
			t.Fatalf("list %s %s with %d items", l.APIVersion, l.Kind, len(l.Items))
		}
	})
	t.Run("watched as v1", func(t *testing.T) {
		for _, want := range []struct {
			typ  watch.EventType
			name string
			cpu  int32
		}{{watch.Added, "h1", 60}, {watch.Added, "h2", 70}, {watch.Modified, "h2", 80}} {
			ev := w.expect(want.typ, want.name)
			h, ok := ev.Object.(*autoscalingv1.HorizontalPodAutoscaler)
			if !ok {
				t.Fatalf("watch of v1 sent %T", ev.Object)
			}
			if h.Spec.TargetCPUUtilizationPercentage == nil || *h.Spec.TargetCPUUtilizationPercentage != want.cpu {
				t.Errorf("%s %s: cpu %v, want %d", want.typ, want.name, h.Spec.TargetCPUUtilizationPercentage, want.cpu)
			}
		}
	})
}
