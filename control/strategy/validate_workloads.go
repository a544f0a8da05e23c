package strategy

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validation of apps/v1 Deployments, ReplicaSets and DaemonSets.

const selectorMismatch = "`selector` does not match template `labels`"

// validateSelectorAndTemplate checks a controller's selector (required,
// non-empty, valid) and that it selects the template's labels; ok is false
// when the selector cannot be used at all.
func validateSelectorAndTemplate(sel *metav1.LabelSelector, tmpl *corev1.PodTemplateSpec, emptyMsg string, fldPath *field.Path) (errs field.ErrorList, ok bool) {
	if sel == nil {
		errs = append(errs, field.Required(fldPath.Child("selector"), ""))
	} else {
		errs = append(errs, metavalidation.ValidateLabelSelector(sel, labelSelectorStrict, fldPath.Child("selector"))...)
		if len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(fldPath.Child("selector"), sel, emptyMsg))
		}
	}
	selector, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return append(errs, field.Invalid(fldPath.Child("selector"), sel, "invalid label selector")), false
	}
	// A nil selector selects nothing, so it does not match either.
	if !selector.Empty() && !selector.Matches(labels.Set(tmpl.Labels)) {
		errs = append(errs, field.Invalid(fldPath.Child("template", "metadata", "labels"), tmpl.Labels, selectorMismatch))
	}
	return errs, true
}

// validateTemplateAlways checks the template of a controller whose pods
// must run forever.
func validateTemplateAlways(tmpl *corev1.PodTemplateSpec, kind string, fldPath *field.Path) field.ErrorList {
	errs := validatePodTemplateSpec(tmpl, fldPath)
	if tmpl.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(fldPath.Child("spec", "restartPolicy"), tmpl.Spec.RestartPolicy, []string{string(corev1.RestartPolicyAlways)}))
	}
	if tmpl.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("spec", "activeDeadlineSeconds"), "activeDeadlineSeconds in "+kind+" is not Supported"))
	}
	return errs
}

func validateDeployment(d *appsv1.Deployment) field.ErrorList {
	errs := validateMeta(&d.ObjectMeta, true, nameIsDNSSubdomain)
	return append(errs, validateDeploymentSpec(&d.Spec, specPath)...)
}

func validateDeploymentSpec(s *appsv1.DeploymentSpec, fldPath *field.Path) field.ErrorList {
	errs := validateNonnegative(int64(deref(s.Replicas, 1)), fldPath.Child("replicas"))
	selErrs, ok := validateSelectorAndTemplate(s.Selector, &s.Template, "empty selector is invalid for deployment", fldPath)
	errs = append(errs, selErrs...)
	if ok {
		errs = append(errs, validateTemplateAlways(&s.Template, "ReplicaSet", fldPath.Child("template"))...)
	}
	errs = append(errs, validateDeploymentStrategy(&s.Strategy, fldPath.Child("strategy"))...)
	errs = append(errs, validateNonnegative(int64(s.MinReadySeconds), fldPath.Child("minReadySeconds"))...)
	if s.RevisionHistoryLimit != nil {
		errs = append(errs, validateNonnegative(int64(*s.RevisionHistoryLimit), fldPath.Child("revisionHistoryLimit"))...)
	}
	if s.ProgressDeadlineSeconds != nil {
		errs = append(errs, validateNonnegative(int64(*s.ProgressDeadlineSeconds), fldPath.Child("progressDeadlineSeconds"))...)
		if *s.ProgressDeadlineSeconds <= s.MinReadySeconds {
			errs = append(errs, field.Invalid(fldPath.Child("progressDeadlineSeconds"), s.ProgressDeadlineSeconds, "must be greater than minReadySeconds"))
		}
	}
	return errs
}

func validateDeploymentStrategy(st *appsv1.DeploymentStrategy, fldPath *field.Path) field.ErrorList {
	switch st.Type {
	case appsv1.RecreateDeploymentStrategyType:
		if st.RollingUpdate != nil {
			return field.ErrorList{field.Forbidden(fldPath.Child("rollingUpdate"), "may not be specified when strategy `type` is '"+string(appsv1.RecreateDeploymentStrategyType)+"'")}
		}
	case appsv1.RollingUpdateDeploymentStrategyType:
		if st.RollingUpdate == nil {
			return field.ErrorList{field.Required(fldPath.Child("rollingUpdate"), "this should be defaulted and never be nil")}
		}
		ru, p := st.RollingUpdate, fldPath.Child("rollingUpdate")
		unavail, surge := deref(ru.MaxUnavailable, intstr.FromInt32(0)), deref(ru.MaxSurge, intstr.FromInt32(0))
		errs := validatePositiveIntOrPercent(unavail, p.Child("maxUnavailable"))
		errs = append(errs, validatePositiveIntOrPercent(surge, p.Child("maxSurge"))...)
		if intOrPercentValue(unavail) == 0 && intOrPercentValue(surge) == 0 {
			errs = append(errs, field.Invalid(p.Child("maxUnavailable"), unavail, "may not be 0 when `maxSurge` is 0"))
		}
		return append(errs, isNotMoreThan100Percent(unavail, p.Child("maxUnavailable"))...)
	default:
		return field.ErrorList{field.NotSupported(fldPath, st, []string{string(appsv1.RecreateDeploymentStrategyType), string(appsv1.RollingUpdateDeploymentStrategyType)})}
	}
	return nil
}

func validatePositiveIntOrPercent(v intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	switch v.Type {
	case intstr.String:
		var errs field.ErrorList
		for _, msg := range validation.IsValidPercent(v.StrVal) {
			errs = append(errs, field.Invalid(fldPath, v, msg))
		}
		return errs
	case intstr.Int:
		return validateNonnegative(int64(v.IntValue()), fldPath)
	default:
		return field.ErrorList{field.Invalid(fldPath, v, "must be an integer or percentage (e.g '5%%')")}
	}
}

func percentValue(v intstr.IntOrString) (int, bool) {
	if v.Type != intstr.String || len(validation.IsValidPercent(v.StrVal)) != 0 {
		return 0, false
	}
	n, _ := strconv.Atoi(v.StrVal[:len(v.StrVal)-1])
	return n, true
}

func intOrPercentValue(v intstr.IntOrString) int {
	if n, ok := percentValue(v); ok {
		return n
	}
	return v.IntValue()
}

func isNotMoreThan100Percent(v intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	if n, ok := percentValue(v); ok && n > 100 {
		return field.ErrorList{field.Invalid(fldPath, v, "must not be greater than 100%")}
	}
	return nil
}

func validateDeploymentUpdate(d, old *appsv1.Deployment) field.ErrorList {
	errs := validateMetaUpdate(&d.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateDeploymentSpec(&d.Spec, specPath)...)
	return append(errs, validateImmutable(d.Spec.Selector, old.Spec.Selector, specPath.Child("selector"))...)
}

func validateDeploymentStatus(d, old *appsv1.Deployment) field.ErrorList {
	s, p := d.Status, field.NewPath("status")
	errs := validateMetaUpdate(&d.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateNonnegative(s.ObservedGeneration, p.Child("observedGeneration"))...)
	errs = append(errs, nonnegativeCounts(p, map[string]int32{"replicas": s.Replicas, "updatedReplicas": s.UpdatedReplicas,
		"readyReplicas": s.ReadyReplicas, "availableReplicas": s.AvailableReplicas, "unavailableReplicas": s.UnavailableReplicas},
		"replicas", "updatedReplicas", "readyReplicas", "availableReplicas", "unavailableReplicas")...)
	errs = append(errs, notAboveReplicas(p, s.Replicas, map[string]int32{"updatedReplicas": s.UpdatedReplicas,
		"readyReplicas": s.ReadyReplicas, "availableReplicas": s.AvailableReplicas}, "updatedReplicas", "readyReplicas", "availableReplicas")...)
	if s.AvailableReplicas > s.ReadyReplicas {
		errs = append(errs, field.Invalid(p.Child("availableReplicas"), s.AvailableReplicas, "cannot be greater than readyReplicas"))
	}
	return append(errs, validateCollisionCount(s.CollisionCount, old.Status.CollisionCount, p)...)
}

func validateReplicaSet(rs *appsv1.ReplicaSet) field.ErrorList {
	errs := validateMeta(&rs.ObjectMeta, true, nameIsDNSSubdomain)
	return append(errs, validateReplicaSetSpec(&rs.Spec, specPath)...)
}

func validateReplicaSetSpec(s *appsv1.ReplicaSetSpec, fldPath *field.Path) field.ErrorList {
	errs := validateNonnegative(int64(deref(s.Replicas, 1)), fldPath.Child("replicas"))
	errs = append(errs, validateNonnegative(int64(s.MinReadySeconds), fldPath.Child("minReadySeconds"))...)
	selErrs, ok := validateSelectorAndTemplate(s.Selector, &s.Template, "empty selector is invalid for deployment", fldPath)
	errs = append(errs, selErrs...)
	if ok {
		errs = append(errs, validateTemplateAlways(&s.Template, "ReplicaSet", fldPath.Child("template"))...)
	}
	return errs
}

func validateReplicaSetUpdate(rs, old *appsv1.ReplicaSet) field.ErrorList {
	errs := validateMetaUpdate(&rs.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateReplicaSetSpec(&rs.Spec, specPath)...)
	return append(errs, validateImmutable(rs.Spec.Selector, old.Spec.Selector, specPath.Child("selector"))...)
}

func validateReplicaSetStatus(rs, old *appsv1.ReplicaSet) field.ErrorList {
	s := rs.Status
	errs := validateMetaUpdate(&rs.ObjectMeta, &old.ObjectMeta)
	return append(errs, validateReplicaCounts(s.Replicas, s.FullyLabeledReplicas, s.ReadyReplicas, s.AvailableReplicas, s.ObservedGeneration)...)
}

// validateReplicaCounts checks the status counts of a ReplicaSet or a
// ReplicationController.
func validateReplicaCounts(replicas, fullyLabeled, ready, available int32, observedGeneration int64) field.ErrorList {
	p := field.NewPath("status")
	errs := nonnegativeCounts(p, map[string]int32{"replicas": replicas, "fullyLabeledReplicas": fullyLabeled,
		"readyReplicas": ready, "availableReplicas": available},
		"replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas")
	errs = append(errs, validateNonnegative(observedGeneration, p.Child("observedGeneration"))...)
	errs = append(errs, notAboveReplicas(p, replicas, map[string]int32{"fullyLabeledReplicas": fullyLabeled,
		"readyReplicas": ready, "availableReplicas": available}, "fullyLabeledReplicas", "readyReplicas", "availableReplicas")...)
	if available > ready {
		errs = append(errs, field.Invalid(p.Child("availableReplicas"), available, "cannot be greater than readyReplicas"))
	}
	return errs
}

func validateDaemonSet(ds *appsv1.DaemonSet) field.ErrorList {
	errs := validateMeta(&ds.ObjectMeta, true, nameIsDNSSubdomain)
	return append(errs, validateDaemonSetSpec(&ds.Spec, specPath)...)
}

func validateDaemonSetSpec(s *appsv1.DaemonSetSpec, fldPath *field.Path) field.ErrorList {
	// Kubernetes does not report a missing DaemonSet selector as such (only
	// the template mismatch); it is reported as required here, as for the
	// other controllers and as kubectl's schema does.
	errs, _ := validateSelectorAndTemplate(s.Selector, &s.Template, "empty selector is invalid for daemonset", fldPath)
	errs = append(errs, validateTemplateAlways(&s.Template, "DaemonSet", fldPath.Child("template"))...)
	errs = append(errs, validateNonnegative(int64(s.MinReadySeconds), fldPath.Child("minReadySeconds"))...)
	errs = append(errs, validateDaemonSetUpdateStrategy(&s.UpdateStrategy, fldPath.Child("updateStrategy"))...)
	if s.RevisionHistoryLimit != nil {
		errs = append(errs, validateNonnegative(int64(*s.RevisionHistoryLimit), fldPath.Child("revisionHistoryLimit"))...)
	}
	return errs
}

func validateDaemonSetUpdateStrategy(st *appsv1.DaemonSetUpdateStrategy, fldPath *field.Path) field.ErrorList {
	switch st.Type {
	case appsv1.OnDeleteDaemonSetStrategyType:
		return nil
	case appsv1.RollingUpdateDaemonSetStrategyType:
		if st.RollingUpdate == nil {
			return field.ErrorList{field.Required(fldPath.Child("rollingUpdate"), "")}
		}
		p := fldPath.Child("rollingUpdate")
		unavail := deref(st.RollingUpdate.MaxUnavailable, intstr.FromInt32(0))
		surge := deref(st.RollingUpdate.MaxSurge, intstr.FromInt32(0))
		errs := validatePositiveIntOrPercent(unavail, p.Child("maxUnavailable"))
		errs = append(errs, validatePositiveIntOrPercent(surge, p.Child("maxSurge"))...)
		errs = append(errs, isNotMoreThan100Percent(unavail, p.Child("maxUnavailable"))...)
		errs = append(errs, isNotMoreThan100Percent(surge, p.Child("maxSurge"))...)
		hasUnavail, hasSurge := intOrPercentValue(unavail) != 0, intOrPercentValue(surge) != 0
		switch {
		case hasUnavail && hasSurge:
			errs = append(errs, field.Invalid(p.Child("maxSurge"), st.RollingUpdate.MaxSurge, "may not be set when maxUnavailable is non-zero"))
		case !hasUnavail && !hasSurge:
			errs = append(errs, field.Required(p.Child("maxUnavailable"), "cannot be 0 when maxSurge is 0"))
		}
		return errs
	default:
		return field.ErrorList{field.NotSupported(fldPath, st, []string{string(appsv1.RollingUpdateDaemonSetStrategyType), string(appsv1.OnDeleteDaemonSetStrategyType)})}
	}
}

func validateDaemonSetUpdate(ds, old *appsv1.DaemonSet) field.ErrorList {
	errs := validateMetaUpdate(&ds.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateDaemonSetSpec(&ds.Spec, specPath)...)
	return append(errs, validateImmutable(ds.Spec.Selector, old.Spec.Selector, specPath.Child("selector"))...)
}

func validateDaemonSetStatus(ds, old *appsv1.DaemonSet) field.ErrorList {
	s, p := ds.Status, field.NewPath("status")
	errs := validateMetaUpdate(&ds.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, nonnegativeCounts(p, map[string]int32{"currentNumberScheduled": s.CurrentNumberScheduled,
		"numberMisscheduled": s.NumberMisscheduled, "desiredNumberScheduled": s.DesiredNumberScheduled, "numberReady": s.NumberReady,
		"updatedNumberScheduled": s.UpdatedNumberScheduled, "numberAvailable": s.NumberAvailable, "numberUnavailable": s.NumberUnavailable},
		"currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady", "updatedNumberScheduled", "numberAvailable", "numberUnavailable")...)
	errs = append(errs, validateNonnegative(s.ObservedGeneration, p.Child("observedGeneration"))...)
	return append(errs, validateCollisionCount(s.CollisionCount, old.Status.CollisionCount, p)...)
}

// nonnegativeCounts checks status counters, in the order given.
func nonnegativeCounts(p *field.Path, counts map[string]int32, order ...string) field.ErrorList {
	var errs field.ErrorList
	for _, name := range order {
		errs = append(errs, validateNonnegative(int64(counts[name]), p.Child(name))...)
	}
	return errs
}

func notAboveReplicas(p *field.Path, replicas int32, counts map[string]int32, order ...string) field.ErrorList {
	var errs field.ErrorList
	for _, name := range order {
		if counts[name] > replicas {
			errs = append(errs, field.Invalid(p.Child(name), counts[name], "cannot be greater than status.replicas"))
		}
	}
	return errs
}

func validateCollisionCount(cur, old *int32, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if cur != nil {
		errs = append(errs, validateNonnegative(int64(*cur), p.Child("collisionCount"))...)
	}
	if old != nil && (cur == nil || *cur < *old) {
		errs = append(errs, field.Invalid(p.Child("collisionCount"), deref(cur, 0), "cannot be decremented"))
	}
	return errs
}
