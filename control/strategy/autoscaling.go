package strategy

import (
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// HorizontalPodAutoscaler is the strategy of autoscaling/v2
// HorizontalPodAutoscalers, the version they are stored in.
var HorizontalPodAutoscaler = &Kind[*autoscalingv2.HorizontalPodAutoscaler]{namespaced: true, defaults: defaultHPAv2, create: validateHPAv2, update: validateHPAv2Update, status: validateHPAv2Status}

// HorizontalPodAutoscalerV1 is the strategy of autoscaling/v1
// HorizontalPodAutoscalers.
var HorizontalPodAutoscalerV1 = &Kind[*autoscalingv1.HorizontalPodAutoscaler]{namespaced: true, defaults: defaultHPAv1, create: validateHPAv1, update: validateHPAv1Update, status: validateHPAv1Status}

// ConvertHorizontalPodAutoscaler converts a HorizontalPodAutoscaler to
// version to: v1 carries only a CPU utilization target, so a v1 write
// replaces the v2 metrics with it.
func ConvertHorizontalPodAutoscaler(obj runtime.Object, to schema.GroupVersion) (runtime.Object, error) {
	switch o := obj.(type) {
	case *autoscalingv2.HorizontalPodAutoscaler:
		if to == autoscalingv1.SchemeGroupVersion {
			return hpaToV1(o), nil
		}
	case *autoscalingv1.HorizontalPodAutoscaler:
		if to == autoscalingv2.SchemeGroupVersion {
			return hpaToV2(o), nil
		}
	}
	return nil, fmt.Errorf("strategy: no conversion of %T to %s", obj, to)
}

func hpaToV1(in *autoscalingv2.HorizontalPodAutoscaler) *autoscalingv1.HorizontalPodAutoscaler {
	out := &autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: *in.ObjectMeta.DeepCopy()}
	out.APIVersion, out.Kind = autoscalingv1.SchemeGroupVersion.String(), "HorizontalPodAutoscaler"
	out.Spec = autoscalingv1.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv1.CrossVersionObjectReference(in.Spec.ScaleTargetRef),
		MinReplicas:    in.Spec.MinReplicas, MaxReplicas: in.Spec.MaxReplicas,
	}
	for _, m := range in.Spec.Metrics {
		if m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU &&
			m.Resource.Target.AverageUtilization != nil {
			out.Spec.TargetCPUUtilizationPercentage = m.Resource.Target.AverageUtilization
		}
	}
	out.Status = autoscalingv1.HorizontalPodAutoscalerStatus{
		ObservedGeneration: in.Status.ObservedGeneration, LastScaleTime: in.Status.LastScaleTime,
		CurrentReplicas: in.Status.CurrentReplicas, DesiredReplicas: in.Status.DesiredReplicas,
	}
	for _, m := range in.Status.CurrentMetrics {
		if m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU {
			out.Status.CurrentCPUUtilizationPercentage = m.Resource.Current.AverageUtilization
		}
	}
	return out
}

func hpaToV2(in *autoscalingv1.HorizontalPodAutoscaler) *autoscalingv2.HorizontalPodAutoscaler {
	out := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: *in.ObjectMeta.DeepCopy()}
	out.APIVersion, out.Kind = autoscalingv2.SchemeGroupVersion.String(), "HorizontalPodAutoscaler"
	out.Spec = autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference(in.Spec.ScaleTargetRef),
		MinReplicas:    in.Spec.MinReplicas, MaxReplicas: in.Spec.MaxReplicas,
	}
	if t := in.Spec.TargetCPUUtilizationPercentage; t != nil {
		out.Spec.Metrics = []autoscalingv2.MetricSpec{{
			Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: t}},
		}}
	}
	out.Status = autoscalingv2.HorizontalPodAutoscalerStatus{
		ObservedGeneration: in.Status.ObservedGeneration, LastScaleTime: in.Status.LastScaleTime,
		CurrentReplicas: in.Status.CurrentReplicas, DesiredReplicas: in.Status.DesiredReplicas,
	}
	if c := in.Status.CurrentCPUUtilizationPercentage; c != nil {
		out.Status.CurrentMetrics = []autoscalingv2.MetricStatus{{
			Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceCPU,
				Current: autoscalingv2.MetricValueStatus{AverageUtilization: c}},
		}}
	}
	return out
}
