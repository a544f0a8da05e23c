package strategy

import (
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validation of HorizontalPodAutoscalers (autoscaling/v2 and v1).

const (
	maxPeriodSeconds              int32 = 1800
	maxStabilizationWindowSeconds int32 = 3600
)

var metricSourceTypes = []autoscalingv2.MetricSourceType{autoscalingv2.ContainerResourceMetricSourceType,
	autoscalingv2.ExternalMetricSourceType, autoscalingv2.ObjectMetricSourceType, autoscalingv2.PodsMetricSourceType, autoscalingv2.ResourceMetricSourceType}

// validateHPAReplicas checks min and max replicas and the scale target,
// common to both versions.
func validateHPAReplicas(minR *int32, maxR int32, kind, name string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if minR != nil && *minR < 1 {
		errs = append(errs, field.Invalid(fldPath.Child("minReplicas"), *minR, "must be greater than or equal to 1"))
	}
	if maxR < 1 {
		errs = append(errs, field.Invalid(fldPath.Child("maxReplicas"), maxR, "must be greater than 0"))
	}
	if minR != nil && maxR < *minR {
		errs = append(errs, field.Invalid(fldPath.Child("maxReplicas"), maxR, "must be greater than or equal to `minReplicas`"))
	}
	return append(errs, validateCrossVersionObjectReference(kind, name, fldPath.Child("scaleTargetRef"))...)
}

func validateCrossVersionObjectReference(kind, name string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, f := range []struct{ field, value string }{{"kind", kind}, {"name", name}} {
		if f.value == "" {
			errs = append(errs, field.Required(fldPath.Child(f.field), ""))
			continue
		}
		for _, msg := range path.IsValidPathSegmentName(f.value) {
			errs = append(errs, field.Invalid(fldPath.Child(f.field), f.value, msg))
		}
	}
	return errs
}

func validateHPAv2(h *autoscalingv2.HorizontalPodAutoscaler) field.ErrorList {
	errs := validateMeta(&h.ObjectMeta, true, nameIsDNSSubdomain)
	return append(errs, validateHPAv2Spec(&h.Spec)...)
}

func validateHPAv2Spec(s *autoscalingv2.HorizontalPodAutoscalerSpec) field.ErrorList {
	errs := validateHPAReplicas(s.MinReplicas, s.MaxReplicas, s.ScaleTargetRef.Kind, s.ScaleTargetRef.Name, specPath)
	for i := range s.Metrics {
		errs = append(errs, validateMetricSpec(&s.Metrics[i], specPath.Child("metrics").Index(i))...)
	}
	if b := s.Behavior; b != nil {
		errs = append(errs, validateScalingRules(b.ScaleUp, specPath.Child("behavior", "scaleUp"))...)
		errs = append(errs, validateScalingRules(b.ScaleDown, specPath.Child("behavior", "scaleDown"))...)
	}
	return errs
}

func validateHPAv2Update(h, old *autoscalingv2.HorizontalPodAutoscaler) field.ErrorList {
	return append(validateMetaUpdate(&h.ObjectMeta, &old.ObjectMeta), validateHPAv2Spec(&h.Spec)...)
}

func validateHPAv2Status(h, old *autoscalingv2.HorizontalPodAutoscaler) field.ErrorList {
	errs := validateMetaUpdate(&h.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateNonnegative(int64(h.Status.CurrentReplicas), field.NewPath("status", "currentReplicas"))...)
	return append(errs, validateNonnegative(int64(h.Status.DesiredReplicas), field.NewPath("status", "desiredReplicas"))...)
}

func validateScalingRules(r *autoscalingv2.HPAScalingRules, fldPath *field.Path) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	if w := r.StabilizationWindowSeconds; w != nil {
		if *w < 0 {
			errs = append(errs, field.Invalid(fldPath.Child("stabilizationWindowSeconds"), w, "must be greater than or equal to zero"))
		}
		if *w > maxStabilizationWindowSeconds {
			errs = append(errs, field.Invalid(fldPath.Child("stabilizationWindowSeconds"), w, fmt.Sprintf("must be less than or equal to %v", maxStabilizationWindowSeconds)))
		}
	}
	selects := []autoscalingv2.ScalingPolicySelect{autoscalingv2.DisabledPolicySelect, autoscalingv2.MaxChangePolicySelect, autoscalingv2.MinChangePolicySelect}
	if sp := r.SelectPolicy; sp != nil && !sets.New(selects...).Has(*sp) {
		errs = append(errs, field.NotSupported(fldPath.Child("selectPolicy"), sp, selects))
	}
	pp := fldPath.Child("policies")
	if len(r.Policies) == 0 {
		errs = append(errs, field.Required(pp, "must specify at least one Policy"))
	}
	for i, p := range r.Policies {
		ip := pp.Index(i)
		if p.Type != autoscalingv2.PodsScalingPolicy && p.Type != autoscalingv2.PercentScalingPolicy {
			errs = append(errs, field.NotSupported(ip.Child("type"), p.Type, []autoscalingv2.HPAScalingPolicyType{autoscalingv2.PercentScalingPolicy, autoscalingv2.PodsScalingPolicy}))
		}
		if p.Value <= 0 {
			errs = append(errs, field.Invalid(ip.Child("value"), p.Value, "must be greater than zero"))
		}
		if p.PeriodSeconds <= 0 {
			errs = append(errs, field.Invalid(ip.Child("periodSeconds"), p.PeriodSeconds, "must be greater than zero"))
		}
		if p.PeriodSeconds > maxPeriodSeconds {
			errs = append(errs, field.Invalid(ip.Child("periodSeconds"), p.PeriodSeconds, fmt.Sprintf("must be less than or equal to %v", maxPeriodSeconds)))
		}
	}
	return errs
}

func validateMetricSpec(m *autoscalingv2.MetricSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if m.Type == "" {
		errs = append(errs, field.Required(fldPath.Child("type"), "must specify a metric source type"))
	}
	if !sets.New(metricSourceTypes...).Has(m.Type) {
		errs = append(errs, field.NotSupported(fldPath.Child("type"), m.Type, metricSourceTypes))
	}
	present := []string{}
	add := func(set bool, name string, check func() field.ErrorList) {
		if !set {
			return
		}
		present = append(present, name)
		if len(present) == 1 {
			errs = append(errs, check()...)
		}
	}
	add(m.Object != nil, "object", func() field.ErrorList {
		p := fldPath.Child("object")
		e := validateCrossVersionObjectReference(m.Object.DescribedObject.Kind, m.Object.DescribedObject.Name, p.Child("describedObject"))
		e = append(e, validateMetricIdentifier(m.Object.Metric, p.Child("metric"))...)
		e = append(e, validateMetricTarget(m.Object.Target, p.Child("target"))...)
		if m.Object.Target.Value == nil && m.Object.Target.AverageValue == nil {
			e = append(e, field.Required(p.Child("target", "averageValue"), "must set either a target value or averageValue"))
		}
		return e
	})
	add(m.External != nil, "external", func() field.ErrorList {
		p := fldPath.Child("external")
		e := validateMetricIdentifier(m.External.Metric, p.Child("metric"))
		e = append(e, validateMetricTarget(m.External.Target, p.Child("target"))...)
		t := m.External.Target
		if t.Value == nil && t.AverageValue == nil {
			e = append(e, field.Required(p.Child("target", "averageValue"), "must set either a target value for metric or a per-pod target"))
		}
		if t.Value != nil && t.AverageValue != nil {
			e = append(e, field.Forbidden(p.Child("target", "value"), "may not set both a target value for metric and a per-pod target"))
		}
		return e
	})
	add(m.Pods != nil, "pods", func() field.ErrorList {
		p := fldPath.Child("pods")
		e := validateMetricIdentifier(m.Pods.Metric, p.Child("metric"))
		e = append(e, validateMetricTarget(m.Pods.Target, p.Child("target"))...)
		if m.Pods.Target.AverageValue == nil {
			e = append(e, field.Required(p.Child("target", "averageValue"), "must specify a positive target averageValue"))
		}
		return e
	})
	add(m.Resource != nil, "resource", func() field.ErrorList {
		p := fldPath.Child("resource")
		var e field.ErrorList
		if m.Resource.Name == "" {
			e = append(e, field.Required(p.Child("name"), "must specify a resource name"))
		}
		return append(e, validateResourceTarget(m.Resource.Target, p)...)
	})
	add(m.ContainerResource != nil, "containerResource", func() field.ErrorList {
		p := fldPath.Child("containerResource")
		var e field.ErrorList
		if m.ContainerResource.Name == "" {
			e = append(e, field.Required(p.Child("name"), "must specify a resource name"))
		} else {
			e = append(e, validateContainerResourceName(m.ContainerResource.Name, p.Child("name"))...)
		}
		if m.ContainerResource.Container == "" {
			e = append(e, field.Required(p.Child("container"), "must specify a container"))
		} else {
			e = append(e, validateDNS1123Label(m.ContainerResource.Container, p.Child("container"))...)
		}
		return append(e, validateResourceTarget(m.ContainerResource.Target, p)...)
	})
	expected := map[autoscalingv2.MetricSourceType]string{
		autoscalingv2.ObjectMetricSourceType: "object", autoscalingv2.PodsMetricSourceType: "pods",
		autoscalingv2.ResourceMetricSourceType: "resource", autoscalingv2.ExternalMetricSourceType: "external",
		autoscalingv2.ContainerResourceMetricSourceType: "containerResource",
	}[m.Type]
	if expected != "" && !contains(present, expected) {
		errs = append(errs, field.Required(fldPath.Child(expected), "must populate information for the given metric source"))
	}
	if len(present) != 1 {
		for _, name := range present {
			if name != expected {
				errs = append(errs, field.Forbidden(fldPath.Child(name), "must populate the given metric source only"))
			}
		}
	}
	return errs
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func validateResourceTarget(t autoscalingv2.MetricTarget, p *field.Path) field.ErrorList {
	e := validateMetricTarget(t, p.Child("target"))
	if t.AverageUtilization == nil && t.AverageValue == nil {
		e = append(e, field.Required(p.Child("target", "averageUtilization"), "must set either a target raw value or a target utilization"))
	}
	if t.AverageUtilization != nil && t.AverageValue != nil {
		e = append(e, field.Forbidden(p.Child("target", "averageValue"), "may not set both a target raw value and a target utilization"))
	}
	return e
}

func validateMetricTarget(t autoscalingv2.MetricTarget, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Type == "" {
		errs = append(errs, field.Required(fldPath.Child("type"), "must specify a metric target type"))
	}
	if t.Type != autoscalingv2.UtilizationMetricType && t.Type != autoscalingv2.ValueMetricType && t.Type != autoscalingv2.AverageValueMetricType {
		errs = append(errs, field.Invalid(fldPath.Child("type"), t.Type, "must be either Utilization, Value, or AverageValue"))
	}
	if t.Value != nil && t.Value.Sign() != 1 {
		errs = append(errs, field.Invalid(fldPath.Child("value"), t.Value, "must be positive"))
	}
	if t.AverageValue != nil && t.AverageValue.Sign() != 1 {
		errs = append(errs, field.Invalid(fldPath.Child("averageValue"), t.AverageValue, "must be positive"))
	}
	if t.AverageUtilization != nil && *t.AverageUtilization < 1 {
		errs = append(errs, field.Invalid(fldPath.Child("averageUtilization"), t.AverageUtilization, "must be greater than 0"))
	}
	return errs
}

func validateMetricIdentifier(id autoscalingv2.MetricIdentifier, fldPath *field.Path) field.ErrorList {
	if id.Name == "" {
		return field.ErrorList{field.Required(fldPath.Child("name"), "must specify a metric name")}
	}
	var errs field.ErrorList
	for _, msg := range path.IsValidPathSegmentName(id.Name) {
		errs = append(errs, field.Invalid(fldPath.Child("name"), id.Name, msg))
	}
	return errs
}

func validateHPAv1(h *autoscalingv1.HorizontalPodAutoscaler) field.ErrorList {
	errs := validateMeta(&h.ObjectMeta, true, nameIsDNSSubdomain)
	return append(errs, validateHPAv1Spec(&h.Spec)...)
}

// validateHPAv1Spec: v1's CPU target is a Resource metric's utilization.
func validateHPAv1Spec(s *autoscalingv1.HorizontalPodAutoscalerSpec) field.ErrorList {
	errs := validateHPAReplicas(s.MinReplicas, s.MaxReplicas, s.ScaleTargetRef.Kind, s.ScaleTargetRef.Name, specPath)
	if t := s.TargetCPUUtilizationPercentage; t != nil && *t < 1 {
		errs = append(errs, field.Invalid(specPath.Child("targetCPUUtilizationPercentage"), t, "must be greater than 0"))
	}
	return errs
}

func validateHPAv1Update(h, old *autoscalingv1.HorizontalPodAutoscaler) field.ErrorList {
	return append(validateMetaUpdate(&h.ObjectMeta, &old.ObjectMeta), validateHPAv1Spec(&h.Spec)...)
}

func validateHPAv1Status(h, old *autoscalingv1.HorizontalPodAutoscaler) field.ErrorList {
	errs := validateMetaUpdate(&h.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateNonnegative(int64(h.Status.CurrentReplicas), field.NewPath("status", "currentReplicas"))...)
	return append(errs, validateNonnegative(int64(h.Status.DesiredReplicas), field.NewPath("status", "desiredReplicas"))...)
}
