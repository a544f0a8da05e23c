package printers

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Printer of horizontal pod autoscalers, from autoscaling/v2 objects and
// from autoscaling/v1 ones seen as v2.

func printHPA(hpa *autoscalingv2.HorizontalPodAutoscaler, now time.Time) []interface{} {
	return hpaCells(hpa.ObjectMeta, hpa.Spec.ScaleTargetRef.Kind, hpa.Spec.ScaleTargetRef.Name,
		hpa.Spec.Metrics, hpa.Status.CurrentMetrics, hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas, hpa.Status.CurrentReplicas, now)
}

func hpaCells(meta metav1.ObjectMeta, kind, name string, specs []autoscalingv2.MetricSpec, statuses []autoscalingv2.MetricStatus,
	minReplicas *int32, maxReplicas, current int32, now time.Time) []interface{} {
	minPods := unset
	if minReplicas != nil {
		minPods = fmt.Sprintf("%d", *minReplicas)
	}
	return []interface{}{
		meta.Name,
		kind + "/" + name,
		hpaTargets(specs, statuses),
		minPods,
		int64(maxReplicas),
		int64(current),
		since(meta.CreationTimestamp, now),
	}
}

// hpaTargets is the TARGETS cell: "current/target" for the first two
// metrics, resource metrics prefixed with the resource's name, "<unknown>"
// for a current value not known yet. statuses[i] belongs to specs[i].
func hpaTargets(specs []autoscalingv2.MetricSpec, statuses []autoscalingv2.MetricStatus) string {
	if len(specs) == 0 {
		return none
	}
	const limit = 2
	var list []string
	for i := range specs {
		if len(list) == limit {
			break
		}
		var status *autoscalingv2.MetricStatus
		if i < len(statuses) {
			status = &statuses[i]
		}
		list = append(list, metricTarget(&specs[i], status))
	}
	s := strings.Join(list, ", ")
	if len(specs) > limit {
		return fmt.Sprintf("%s + %d more...", s, len(specs)-limit)
	}
	return s
}

// metricTarget renders one metric; status may be nil.
func metricTarget(spec *autoscalingv2.MetricSpec, status *autoscalingv2.MetricStatus) string {
	switch {
	case spec.Type == autoscalingv2.ExternalMetricSourceType && spec.External != nil:
		var cur *autoscalingv2.MetricValueStatus
		if status != nil && status.External != nil {
			cur = &status.External.Current
		}
		return valueTarget(spec.External.Target, cur)
	case spec.Type == autoscalingv2.PodsMetricSourceType && spec.Pods != nil:
		current := unknown
		if status != nil && status.Pods != nil {
			current = quantity(status.Pods.Current.AverageValue)
		}
		return current + "/" + quantity(spec.Pods.Target.AverageValue)
	case spec.Type == autoscalingv2.ObjectMetricSourceType && spec.Object != nil:
		var cur *autoscalingv2.MetricValueStatus
		if status != nil && status.Object != nil {
			cur = &status.Object.Current
		}
		return valueTarget(spec.Object.Target, cur)
	case spec.Type == autoscalingv2.ResourceMetricSourceType && spec.Resource != nil:
		var cur *autoscalingv2.MetricValueStatus
		if status != nil && status.Resource != nil {
			cur = &status.Resource.Current
		}
		return string(spec.Resource.Name) + ": " + resourceTarget(spec.Resource.Target, cur)
	case spec.Type == autoscalingv2.ContainerResourceMetricSourceType && spec.ContainerResource != nil:
		var cur *autoscalingv2.MetricValueStatus
		if status != nil && status.ContainerResource != nil {
			cur = &status.ContainerResource.Current
		}
		return string(spec.ContainerResource.Name) + ": " + resourceTarget(spec.ContainerResource.Target, cur)
	}
	return "<unknown type>"
}

// valueTarget renders an object or external metric: average values marked
// "(avg)", else plain values. cur is nil while there is no status.
func valueTarget(target autoscalingv2.MetricTarget, cur *autoscalingv2.MetricValueStatus) string {
	current := unknown
	if target.AverageValue != nil {
		if cur != nil && cur.AverageValue != nil {
			current = quantity(cur.AverageValue)
		}
		return current + "/" + quantity(target.AverageValue) + " (avg)"
	}
	if cur != nil {
		current = quantity(cur.Value)
	}
	return current + "/" + quantity(target.Value)
}

// resourceTarget renders a (container) resource metric: an average value,
// or a utilization in percent ("<auto>" with no target utilization). cur is
// nil while there is no status.
func resourceTarget(target autoscalingv2.MetricTarget, cur *autoscalingv2.MetricValueStatus) string {
	current := unknown
	if target.AverageValue != nil {
		if cur != nil {
			current = quantity(cur.AverageValue)
		}
		return current + "/" + quantity(target.AverageValue)
	}
	if cur != nil && cur.AverageUtilization != nil {
		current = fmt.Sprintf("%d%%", *cur.AverageUtilization)
	}
	goal := "<auto>"
	if target.AverageUtilization != nil {
		goal = fmt.Sprintf("%d%%", *target.AverageUtilization)
	}
	return current + "/" + goal
}

// Annotations in which autoscaling/v1 keeps the metrics it has no fields
// for, as JSON lists of autoscaling/v1 MetricSpec and MetricStatus.
const (
	v1MetricSpecsAnnotation    = "autoscaling.alpha.kubernetes.io/metrics"
	v1MetricStatusesAnnotation = "autoscaling.alpha.kubernetes.io/current-metrics"
)

// defaultCPUUtilization is the target autoscaling/v1 implies when it names
// no metric at all.
const defaultCPUUtilization = 80

// printHPAv1 prints an autoscaling/v1 object the way Kubernetes does: after
// converting it to the v2 form, with the metrics of its annotations first,
// then targetCPUUtilizationPercentage, else an 80% CPU target; the current
// metrics annotation, when present, replaces currentCPUUtilizationPercentage.
func printHPAv1(hpa *autoscalingv1.HorizontalPodAutoscaler, now time.Time) (metav1.TableRow, error) {
	specs, statuses, err := hpaV1Metrics(hpa)
	if err != nil {
		return metav1.TableRow{}, err
	}
	return metav1.TableRow{Cells: hpaCells(hpa.ObjectMeta, hpa.Spec.ScaleTargetRef.Kind, hpa.Spec.ScaleTargetRef.Name,
		specs, statuses, hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas, hpa.Status.CurrentReplicas, now)}, nil
}

func hpaV1Metrics(hpa *autoscalingv1.HorizontalPodAutoscaler) ([]autoscalingv2.MetricSpec, []autoscalingv2.MetricStatus, error) {
	var specs []autoscalingv2.MetricSpec
	if enc, ok := hpa.Annotations[v1MetricSpecsAnnotation]; ok {
		var v1Specs []autoscalingv1.MetricSpec
		if err := json.Unmarshal([]byte(enc), &v1Specs); err != nil {
			return nil, nil, fmt.Errorf("annotation %s: %w", v1MetricSpecsAnnotation, err)
		}
		for i := range v1Specs {
			specs = append(specs, v2MetricSpec(&v1Specs[i]))
		}
	}
	cpu := hpa.Spec.TargetCPUUtilizationPercentage
	if cpu == nil && len(specs) == 0 {
		def := int32(defaultCPUUtilization)
		cpu = &def
	}
	if cpu != nil {
		specs = append(specs, autoscalingv2.MetricSpec{
			Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricSource{
				Name:   corev1.ResourceCPU,
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: cpu},
			},
		})
	}

	var statuses []autoscalingv2.MetricStatus
	if enc, ok := hpa.Annotations[v1MetricStatusesAnnotation]; ok {
		var v1Statuses []autoscalingv1.MetricStatus
		if err := json.Unmarshal([]byte(enc), &v1Statuses); err != nil {
			return nil, nil, fmt.Errorf("annotation %s: %w", v1MetricStatusesAnnotation, err)
		}
		for i := range v1Statuses {
			statuses = append(statuses, v2MetricStatus(&v1Statuses[i]))
		}
	} else if u := hpa.Status.CurrentCPUUtilizationPercentage; u != nil {
		statuses = []autoscalingv2.MetricStatus{{
			Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricStatus{
				Name:    corev1.ResourceCPU,
				Current: autoscalingv2.MetricValueStatus{AverageUtilization: u},
			},
		}}
	}
	return specs, statuses, nil
}

// v2MetricSpec converts the fields of a v1 metric that printing reads.
func v2MetricSpec(in *autoscalingv1.MetricSpec) autoscalingv2.MetricSpec {
	out := autoscalingv2.MetricSpec{Type: autoscalingv2.MetricSourceType(in.Type)}
	if o := in.Object; o != nil {
		out.Object = &autoscalingv2.ObjectMetricSource{
			DescribedObject: autoscalingv2.CrossVersionObjectReference{Kind: o.Target.Kind, Name: o.Target.Name, APIVersion: o.Target.APIVersion},
			Metric:          autoscalingv2.MetricIdentifier{Name: o.MetricName, Selector: o.Selector},
			Target:          autoscalingv2.MetricTarget{Value: &o.TargetValue, AverageValue: o.AverageValue},
		}
	}
	if p := in.Pods; p != nil {
		out.Pods = &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: p.MetricName, Selector: p.Selector},
			Target: autoscalingv2.MetricTarget{AverageValue: &p.TargetAverageValue},
		}
	}
	if r := in.Resource; r != nil {
		out.Resource = &autoscalingv2.ResourceMetricSource{
			Name:   r.Name,
			Target: autoscalingv2.MetricTarget{AverageValue: r.TargetAverageValue, AverageUtilization: r.TargetAverageUtilization},
		}
	}
	if r := in.ContainerResource; r != nil {
		out.ContainerResource = &autoscalingv2.ContainerResourceMetricSource{
			Name:      r.Name,
			Container: r.Container,
			Target:    autoscalingv2.MetricTarget{AverageValue: r.TargetAverageValue, AverageUtilization: r.TargetAverageUtilization},
		}
	}
	if e := in.External; e != nil {
		out.External = &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: e.MetricName, Selector: e.MetricSelector},
			Target: autoscalingv2.MetricTarget{Value: e.TargetValue, AverageValue: e.TargetAverageValue},
		}
	}
	return out
}

// v2MetricStatus converts the fields of a v1 metric status that printing
// reads.
func v2MetricStatus(in *autoscalingv1.MetricStatus) autoscalingv2.MetricStatus {
	out := autoscalingv2.MetricStatus{Type: autoscalingv2.MetricSourceType(in.Type)}
	if o := in.Object; o != nil {
		out.Object = &autoscalingv2.ObjectMetricStatus{
			Metric:  autoscalingv2.MetricIdentifier{Name: o.MetricName, Selector: o.Selector},
			Current: autoscalingv2.MetricValueStatus{Value: &o.CurrentValue, AverageValue: o.AverageValue},
		}
	}
	if p := in.Pods; p != nil {
		out.Pods = &autoscalingv2.PodsMetricStatus{
			Metric:  autoscalingv2.MetricIdentifier{Name: p.MetricName, Selector: p.Selector},
			Current: autoscalingv2.MetricValueStatus{AverageValue: &p.CurrentAverageValue},
		}
	}
	if r := in.Resource; r != nil {
		out.Resource = &autoscalingv2.ResourceMetricStatus{
			Name:    r.Name,
			Current: autoscalingv2.MetricValueStatus{AverageValue: &r.CurrentAverageValue, AverageUtilization: r.CurrentAverageUtilization},
		}
	}
	if r := in.ContainerResource; r != nil {
		out.ContainerResource = &autoscalingv2.ContainerResourceMetricStatus{
			Name:      r.Name,
			Container: r.Container,
			Current:   autoscalingv2.MetricValueStatus{AverageValue: &r.CurrentAverageValue, AverageUtilization: r.CurrentAverageUtilization},
		}
	}
	if e := in.External; e != nil {
		out.External = &autoscalingv2.ExternalMetricStatus{
			Metric:  autoscalingv2.MetricIdentifier{Name: e.MetricName, Selector: e.MetricSelector},
			Current: autoscalingv2.MetricValueStatus{Value: &e.CurrentValue, AverageValue: e.CurrentAverageValue},
		}
	}
	return out
}
