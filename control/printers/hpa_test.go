package printers

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
)

func qty(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

func resourceMetric(name corev1.ResourceName, target autoscalingv2.MetricTarget) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: name, Target: target}}
}

func resourceStatus(name corev1.ResourceName, current autoscalingv2.MetricValueStatus) autoscalingv2.MetricStatus {
	return autoscalingv2.MetricStatus{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{Name: name, Current: current}}
}

func TestHPARows(t *testing.T) {
	withMetrics := hpaWithMetrics()
	without := hpaWithoutMetrics()

	memory := hpaWithMetrics()
	memory.Spec.Metrics = []autoscalingv2.MetricSpec{resourceMetric(corev1.ResourceMemory, autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: qty("200Mi")})}
	memory.Status.CurrentMetrics = []autoscalingv2.MetricStatus{resourceStatus(corev1.ResourceMemory, autoscalingv2.MetricValueStatus{AverageValue: qty("100Mi")})}

	several := hpaWithMetrics()
	several.Spec.MinReplicas = nil
	several.Spec.Metrics = []autoscalingv2.MetricSpec{
		{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "packets-per-second"},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: qty("1k")}}},
		{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "requests-per-second"},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: qty("10k")}}},
		resourceMetric(corev1.ResourceCPU, autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr(int32(80))}),
	}
	several.Status.CurrentMetrics = []autoscalingv2.MetricStatus{
		{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricStatus{Current: autoscalingv2.MetricValueStatus{AverageValue: qty("1500m")}}},
	}

	external := hpaWithMetrics()
	external.Spec.Metrics = []autoscalingv2.MetricSpec{
		{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "queue_messages_ready"},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: qty("30")}}},
		{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "hits"},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: qty("2k")}}},
	}
	external.Status.CurrentMetrics = []autoscalingv2.MetricStatus{
		{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricStatus{Current: autoscalingv2.MetricValueStatus{AverageValue: qty("12")}}},
		{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricStatus{Current: autoscalingv2.MetricValueStatus{Value: qty("1500")}}},
	}

	container := hpaWithMetrics()
	container.Spec.Metrics = []autoscalingv2.MetricSpec{
		{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricSource{
			Name: corev1.ResourceCPU, Container: "app", Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr(int32(60))}}},
		resourceMetric(corev1.ResourceCPU, autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType}),
	}
	container.Status.CurrentMetrics = []autoscalingv2.MetricStatus{
		{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricStatus{
			Name: corev1.ResourceCPU, Container: "app", Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr(int32(75))}}},
	}

	noMetrics := hpaWithoutMetrics()
	noMetrics.Spec.Metrics = nil

	malformed := hpaWithoutMetrics()
	malformed.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType}, {Type: "Custom"}}

	tests := []struct {
		name string
		hpa  runtime.Object
		want []interface{}
	}{
		{"cpu with current metrics", &withMetrics, []interface{}{"web", "Deployment/web", "cpu: 50%/80%", "1", int64(10), int64(2), "120m"}},
		{"cpu without current metrics", &without, []interface{}{"api", "Deployment/web", "cpu: <unknown>/80%", "1", int64(10), int64(0), "20s"}},
		{"quantities built in code", ptr(hpaAverageValue()), []interface{}{"cache", "Deployment/web", "memory: 100Mi/256Mi", "1", int64(10), int64(2), "120m"}},
		{"memory average value", &memory, []interface{}{"web", "Deployment/web", "memory: 100Mi/200Mi", "1", int64(10), int64(2), "120m"}},
		{"more than two metrics", &several, []interface{}{"web", "Deployment/web", "1500m/1k, <unknown>/10k + 1 more...", "<unset>", int64(10), int64(2), "120m"}},
		{"external average and object value", &external, []interface{}{"web", "Deployment/web", "12/30 (avg), 1500/2k", "1", int64(10), int64(2), "120m"}},
		{"container resource, no target utilization", &container, []interface{}{"web", "Deployment/web", "cpu: 75%/60%, cpu: <unknown>/<auto>", "1", int64(10), int64(2), "120m"}},
		{"no metrics", &noMetrics, []interface{}{"api", "Deployment/web", "<none>", "1", int64(10), int64(0), "20s"}},
		{"malformed metrics do not panic", &malformed, []interface{}{"api", "Deployment/web", "<unknown type>, <unknown type>", "1", int64(10), int64(0), "20s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkCells(t, gr("autoscaling", "horizontalpodautoscalers"), tt.hpa, tt.want)
		})
	}
}

func TestHPAv1Rows(t *testing.T) {
	withCPU := hpaV1()

	implicit := hpaV1()
	implicit.Spec.TargetCPUUtilizationPercentage = nil
	implicit.Status.CurrentCPUUtilizationPercentage = nil

	annotated := hpaV1()
	annotated.Annotations = map[string]string{
		"autoscaling.alpha.kubernetes.io/metrics": `[{"type":"Pods","pods":{"metricName":"rps","targetAverageValue":"100"}}]`,
		"autoscaling.alpha.kubernetes.io/current-metrics": `[{"type":"Pods","pods":{"metricName":"rps","currentAverageValue":"42"}},` +
			`{"type":"Resource","resource":{"name":"cpu","currentAverageUtilization":61,"currentAverageValue":"300m"}}]`,
	}

	onlyAnnotated := hpaV1()
	onlyAnnotated.Spec.TargetCPUUtilizationPercentage = nil
	onlyAnnotated.Status.CurrentCPUUtilizationPercentage = nil
	onlyAnnotated.Annotations = map[string]string{
		"autoscaling.alpha.kubernetes.io/metrics": `[{"type":"Resource","resource":{"name":"memory","targetAverageValue":"512Mi"}}]`,
	}

	tests := []struct {
		name string
		hpa  *autoscalingv1.HorizontalPodAutoscaler
		want []interface{}
	}{
		{"target and current cpu", &withCPU, []interface{}{"legacy", "Deployment/legacy", "cpu: 35%/70%", "2", int64(5), int64(2), "4d"}},
		{"implicit 80% target", &implicit, []interface{}{"legacy", "Deployment/legacy", "cpu: <unknown>/80%", "2", int64(5), int64(2), "4d"}},
		{"annotated metrics before cpu", &annotated, []interface{}{"legacy", "Deployment/legacy", "42/100, cpu: 61%/70%", "2", int64(5), int64(2), "4d"}},
		{"annotated metrics replace the default", &onlyAnnotated, []interface{}{"legacy", "Deployment/legacy", "memory: <unknown>/512Mi", "2", int64(5), int64(2), "4d"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkCells(t, gr("autoscaling", "horizontalpodautoscalers"), tt.hpa, tt.want)
		})
	}
}

func TestHPAv1BadAnnotation(t *testing.T) {
	for _, key := range []string{"autoscaling.alpha.kubernetes.io/metrics", "autoscaling.alpha.kubernetes.io/current-metrics"} {
		t.Run(key, func(t *testing.T) {
			h := hpaV1()
			h.Annotations = map[string]string{key: `{not json`}
			rows, err := Rows(&h, now)
			if err == nil || rows != nil {
				t.Fatalf("Rows: %v, %v; want an error", rows, err)
			}
			var syntax *json.SyntaxError
			if !errors.As(err, &syntax) || !strings.Contains(err.Error(), key) {
				t.Errorf("error %q: want a wrapped JSON syntax error naming %s", err, key)
			}
			list := &autoscalingv1.HorizontalPodAutoscalerList{Items: []autoscalingv1.HorizontalPodAutoscaler{hpaV1(), h}}
			if _, err := Rows(list, now); err == nil {
				t.Error("Rows(list): no error")
			}
		})
	}
}
