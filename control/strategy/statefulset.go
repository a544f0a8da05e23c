package strategy

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// StatefulSet is the strategy of apps/v1 StatefulSets; a status write
// keeps their labels.
var StatefulSet = &Kind[*appsv1.StatefulSet]{namespaced: true, defaults: defaultStatefulSet, create: validateStatefulSet,
	update: validateStatefulSetUpdate, status: validateStatefulSetStatus, statusMeta: keepLabels}

// StatefulSetReplicas returns a StatefulSet's desired and current replicas
// and its selector, for its scale subresource.
func StatefulSetReplicas(obj runtime.Object) (spec, status int32, selector *metav1.LabelSelector) {
	o := obj.(*appsv1.StatefulSet)
	return deref(o.Spec.Replicas, 0), o.Status.Replicas, o.Spec.Selector
}

// SetStatefulSetReplicas sets a StatefulSet's desired replicas.
func SetStatefulSetReplicas(obj runtime.Object, n int32) {
	obj.(*appsv1.StatefulSet).Spec.Replicas = &n
}

// ControllerRevision is the strategy of apps/v1 ControllerRevisions, the
// history of StatefulSets and DaemonSets: their data never changes.
var ControllerRevision = &Kind[*appsv1.ControllerRevision]{namespaced: true, create: validateControllerRevision,
	update: validateControllerRevisionUpdate, onCreate: func(*appsv1.ControllerRevision) {}}

// defaultStatefulSet: upstream's defaults (maxUnavailable stays unset:
// one at a time, as without the alpha feature).
func defaultStatefulSet(s *appsv1.StatefulSet) {
	sp := &s.Spec
	if sp.PodManagementPolicy == "" {
		sp.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	}
	if sp.UpdateStrategy.Type == "" {
		sp.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
		if sp.UpdateStrategy.RollingUpdate == nil {
			sp.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
	}
	if ru := sp.UpdateStrategy.RollingUpdate; sp.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType && ru != nil && ru.Partition == nil {
		ru.Partition = ptrTo(int32(0))
	}
	if sp.PersistentVolumeClaimRetentionPolicy == nil {
		sp.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{}
	}
	if p := sp.PersistentVolumeClaimRetentionPolicy; p.WhenDeleted == "" {
		p.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if p := sp.PersistentVolumeClaimRetentionPolicy; p.WhenScaled == "" {
		p.WhenScaled = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if sp.Replicas == nil {
		sp.Replicas = ptrTo(int32(1))
	}
	if sp.RevisionHistoryLimit == nil {
		sp.RevisionHistoryLimit = ptrTo(int32(10))
	}
	defaultPodTemplate(&sp.Template)
	for i := range sp.VolumeClaimTemplates {
		defaultPersistentVolumeClaim(&sp.VolumeClaimTemplates[i])
	}
}

func validateStatefulSet(s *appsv1.StatefulSet) field.ErrorList {
	errs := validateMeta(&s.ObjectMeta, true, nameIsDNSLabel)
	return append(errs, validateStatefulSetSpec(&s.Spec, specPath, true)...)
}

var retentionPolicies = []string{string(appsv1.RetainPersistentVolumeClaimRetentionPolicyType), string(appsv1.DeletePersistentVolumeClaimRetentionPolicyType)}

// validateStatefulSetSpec checks a spec as upstream does; newName is
// whether serviceName must be a DNS label (on create: it cannot change).
// Unlike upstream, the claim templates are checked as claims, so that a
// template no claim can be made from is refused at once.
func validateStatefulSetSpec(s *appsv1.StatefulSetSpec, fldPath *field.Path, newName bool) field.ErrorList {
	var errs field.ErrorList
	switch s.PodManagementPolicy {
	case "":
		errs = append(errs, field.Required(fldPath.Child("podManagementPolicy"), ""))
	case appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement:
	default:
		errs = append(errs, field.Invalid(fldPath.Child("podManagementPolicy"), s.PodManagementPolicy,
			fmt.Sprintf("must be '%s' or '%s'", appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement)))
	}
	us := fldPath.Child("updateStrategy")
	switch s.UpdateStrategy.Type {
	case "":
		errs = append(errs, field.Required(us, ""))
	case appsv1.OnDeleteStatefulSetStrategyType:
		if s.UpdateStrategy.RollingUpdate != nil {
			errs = append(errs, field.Invalid(us.Child("rollingUpdate"), s.UpdateStrategy.RollingUpdate,
				fmt.Sprintf("only allowed for updateStrategy '%s'", appsv1.RollingUpdateStatefulSetStrategyType)))
		}
	case appsv1.RollingUpdateStatefulSetStrategyType:
		if ru := s.UpdateStrategy.RollingUpdate; ru != nil {
			rp := us.Child("rollingUpdate")
			errs = append(errs, validateNonnegative(int64(deref(ru.Partition, 0)), rp.Child("partition"))...)
			if mu := ru.MaxUnavailable; mu != nil {
				mp := rp.Child("maxUnavailable")
				errs = append(errs, validatePositiveIntOrPercent(*mu, mp)...)
				if intOrPercentValue(*mu) == 0 {
					errs = append(errs, field.Invalid(mp, *mu, "cannot be 0"))
				}
				errs = append(errs, isNotMoreThan100Percent(*mu, mp)...)
			}
		}
	default:
		errs = append(errs, field.Invalid(us, s.UpdateStrategy, fmt.Sprintf("must be '%s' or '%s'",
			appsv1.RollingUpdateStatefulSetStrategyType, appsv1.OnDeleteStatefulSetStrategyType)))
	}
	if p := s.PersistentVolumeClaimRetentionPolicy; p != nil {
		pp := fldPath.Child("persistentVolumeClaimRetentionPolicy")
		for name, v := range map[string]appsv1.PersistentVolumeClaimRetentionPolicyType{"whenDeleted": p.WhenDeleted, "whenScaled": p.WhenScaled} {
			if v != appsv1.RetainPersistentVolumeClaimRetentionPolicyType && v != appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
				errs = append(errs, field.NotSupported(pp.Child(name), v, retentionPolicies))
			}
		}
	}
	errs = append(errs, validateNonnegative(int64(deref(s.Replicas, 1)), fldPath.Child("replicas"))...)
	errs = append(errs, validateNonnegative(int64(s.MinReadySeconds), fldPath.Child("minReadySeconds"))...)
	if s.Ordinals != nil {
		errs = append(errs, validateNonnegative(int64(s.Ordinals.Start), fldPath.Child("ordinals.start"))...)
	}
	if newName && s.ServiceName != "" {
		errs = append(errs, validateDNS1123Label(s.ServiceName, fldPath.Child("serviceName"))...)
	}
	sp := fldPath.Child("selector")
	if s.Selector == nil {
		errs = append(errs, field.Required(sp, ""))
	} else {
		errs = append(errs, metavalidation.ValidateLabelSelector(s.Selector, labelSelectorStrict, sp)...)
		if len(s.Selector.MatchLabels)+len(s.Selector.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(sp, s.Selector, "empty selector is invalid for statefulset"))
		}
	}
	tp := fldPath.Child("template")
	if selector, err := metav1.LabelSelectorAsSelector(s.Selector); err != nil {
		errs = append(errs, field.Invalid(sp, s.Selector, ""))
	} else if !selector.Empty() && !selector.Matches(labels.Set(s.Template.Labels)) {
		errs = append(errs, field.Invalid(tp.Child("metadata", "labels"), s.Template.Labels, selectorMismatch))
	}
	// As upstream, the pod template is not checked as a pod (its mounts
	// name the claim templates, which are not among its volumes); its
	// labels and annotations are.
	errs = append(errs, metavalidation.ValidateLabels(s.Template.Labels, tp.Child("labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(s.Template.Annotations, tp.Child("annotations"))...)
	if s.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(tp.Child("spec", "restartPolicy"), s.Template.Spec.RestartPolicy, []string{string(corev1.RestartPolicyAlways)}))
	}
	if s.Template.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(tp.Child("spec", "activeDeadlineSeconds"), "activeDeadlineSeconds in StatefulSet is not Supported"))
	}
	vp := fldPath.Child("volumeClaimTemplates")
	names := map[string]bool{}
	for i := range s.VolumeClaimTemplates {
		c := &s.VolumeClaimTemplates[i]
		idx := vp.Index(i)
		if names[c.Name] {
			errs = append(errs, field.Duplicate(idx.Child("metadata", "name"), c.Name))
		}
		names[c.Name] = true
		errs = append(errs, validateName(c.Name, nameIsDNSSubdomain, idx.Child("metadata", "name"))...)
		errs = append(errs, validatePersistentVolumeClaimSpec(&c.Spec, idx.Child("spec"))...)
	}
	return errs
}

// statefulSetMutable is what an update of a StatefulSet's spec may change.
const statefulSetMutable = "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', " +
	"'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"

func validateStatefulSetUpdate(s, old *appsv1.StatefulSet) field.ErrorList {
	errs := validateMetaUpdate(&s.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateStatefulSetSpec(&s.Spec, specPath, false)...)
	rest := s.Spec.DeepCopy()
	rest.Replicas, rest.Template, rest.UpdateStrategy = old.Spec.Replicas, old.Spec.Template, old.Spec.UpdateStrategy
	rest.MinReadySeconds, rest.Ordinals, rest.RevisionHistoryLimit = old.Spec.MinReadySeconds, old.Spec.Ordinals, old.Spec.RevisionHistoryLimit
	rest.PersistentVolumeClaimRetentionPolicy = old.Spec.PersistentVolumeClaimRetentionPolicy
	if !equality.Semantic.DeepEqual(*rest, old.Spec) {
		errs = append(errs, field.Forbidden(specPath, statefulSetMutable))
	}
	return errs
}

func validateStatefulSetStatus(s, old *appsv1.StatefulSet) field.ErrorList {
	st, p := s.Status, field.NewPath("status")
	errs := nonnegativeCounts(p, map[string]int32{"replicas": st.Replicas, "readyReplicas": st.ReadyReplicas,
		"currentReplicas": st.CurrentReplicas, "updatedReplicas": st.UpdatedReplicas, "availableReplicas": st.AvailableReplicas},
		"replicas", "readyReplicas", "currentReplicas", "updatedReplicas", "availableReplicas")
	errs = append(errs, validateNonnegative(st.ObservedGeneration, p.Child("observedGeneration"))...)
	if st.CollisionCount != nil {
		errs = append(errs, validateNonnegative(int64(*st.CollisionCount), p.Child("collisionCount"))...)
	}
	const msg = "cannot be greater than status.replicas"
	for _, c := range []struct {
		name string
		n    int32
	}{{"readyReplicas", st.ReadyReplicas}, {"currentReplicas", st.CurrentReplicas}, {"updatedReplicas", st.UpdatedReplicas}, {"availableReplicas", st.AvailableReplicas}} {
		if c.n > st.Replicas {
			errs = append(errs, field.Invalid(p.Child(c.name), c.n, msg))
		}
	}
	if st.AvailableReplicas > st.ReadyReplicas {
		errs = append(errs, field.Invalid(p.Child("availableReplicas"), st.AvailableReplicas, "cannot be greater than status.readyReplicas"))
	}
	errs = append(errs, validateMetaUpdate(&s.ObjectMeta, &old.ObjectMeta)...)
	return append(errs, validateCollisionCount(st.CollisionCount, old.Status.CollisionCount, p.Child("collisionCount"))...)
}

func validateControllerRevision(r *appsv1.ControllerRevision) field.ErrorList {
	errs := validateMeta(&r.ObjectMeta, true, nameIsDNSSubdomain)
	if r.Data.Raw == nil && r.Data.Object == nil {
		errs = append(errs, field.Required(field.NewPath("data"), "data is mandatory"))
	}
	return append(errs, validateNonnegative(r.Revision, field.NewPath("revision"))...)
}

func validateControllerRevisionUpdate(r, old *appsv1.ControllerRevision) field.ErrorList {
	errs := validateMetaUpdate(&r.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateControllerRevision(r)...)
	if !equality.Semantic.DeepEqual(r.Data, old.Data) {
		errs = append(errs, field.Invalid(field.NewPath("data"), nil, "field is immutable"))
	}
	return errs
}
