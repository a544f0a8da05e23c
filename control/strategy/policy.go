package strategy

import (
	policyv1 "k8s.io/api/policy/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// PodDisruptionBudget is the strategy of policy/v1 PodDisruptionBudgets.
var PodDisruptionBudget = &Kind[*policyv1.PodDisruptionBudget]{namespaced: true, create: validatePodDisruptionBudget,
	update: validatePodDisruptionBudgetUpdate, status: validatePodDisruptionBudgetStatus}

var unhealthyPodEvictionPolicies = sets.New(string(policyv1.IfHealthyBudget), string(policyv1.AlwaysAllow))

func validatePodDisruptionBudget(p *policyv1.PodDisruptionBudget) field.ErrorList {
	errs := validateMeta(&p.ObjectMeta, true, nameIsPathSegment)
	return append(errs, validatePodDisruptionBudgetSpec(&p.Spec)...)
}

func validatePodDisruptionBudgetSpec(s *policyv1.PodDisruptionBudgetSpec) field.ErrorList {
	var errs field.ErrorList
	if s.MinAvailable != nil && s.MaxUnavailable != nil {
		errs = append(errs, field.Invalid(specPath, s, "minAvailable and maxUnavailable cannot be both set"))
	}
	if v := s.MinAvailable; v != nil {
		errs = append(errs, validatePositiveIntOrPercent(*v, specPath.Child("minAvailable"))...)
		errs = append(errs, isNotMoreThan100Percent(*v, specPath.Child("minAvailable"))...)
	}
	if v := s.MaxUnavailable; v != nil {
		errs = append(errs, validatePositiveIntOrPercent(*v, specPath.Child("maxUnavailable"))...)
		errs = append(errs, isNotMoreThan100Percent(*v, specPath.Child("maxUnavailable"))...)
	}
	errs = append(errs, metavalidation.ValidateLabelSelector(s.Selector, labelSelectorStrict, specPath.Child("selector"))...)
	if u := s.UnhealthyPodEvictionPolicy; u != nil && !unhealthyPodEvictionPolicies.Has(string(*u)) {
		errs = append(errs, field.NotSupported(specPath.Child("unhealthyPodEvictionPolicy"), *u, sets.List(unhealthyPodEvictionPolicies)))
	}
	return errs
}

func validatePodDisruptionBudgetUpdate(p, old *policyv1.PodDisruptionBudget) field.ErrorList {
	errs := validateMetaUpdate(&p.ObjectMeta, &old.ObjectMeta)
	return append(errs, validatePodDisruptionBudgetSpec(&p.Spec)...)
}

func validatePodDisruptionBudgetStatus(p, old *policyv1.PodDisruptionBudget) field.ErrorList {
	errs := validateMetaUpdate(&p.ObjectMeta, &old.ObjectMeta)
	s, sp := p.Status, field.NewPath("status")
	for name, v := range map[string]int32{"disruptionsAllowed": s.DisruptionsAllowed, "currentHealthy": s.CurrentHealthy,
		"desiredHealthy": s.DesiredHealthy, "expectedPods": s.ExpectedPods} {
		errs = append(errs, validateNonnegative(int64(v), sp.Child(name))...)
	}
	return errs
}
