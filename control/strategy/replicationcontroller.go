package strategy

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ReplicationController is the strategy of core/v1 ReplicationControllers,
// the ReplicaSets of old manifests: a status write keeps their labels.
var ReplicationController = &Kind[*corev1.ReplicationController]{namespaced: true, defaults: defaultReplicationController,
	create: validateReplicationController, update: validateReplicationControllerUpdate, status: validateReplicationControllerStatus,
	statusMeta: keepLabels}

// ReplicationControllerReplicas returns a ReplicationController's desired
// and current replicas and its selector, for its scale subresource.
func ReplicationControllerReplicas(obj runtime.Object) (spec, status int32, selector *metav1.LabelSelector) {
	o := obj.(*corev1.ReplicationController)
	return deref(o.Spec.Replicas, 0), o.Status.Replicas, &metav1.LabelSelector{MatchLabels: o.Spec.Selector}
}

// SetReplicationControllerReplicas sets a ReplicationController's desired
// replicas.
func SetReplicationControllerReplicas(obj runtime.Object, n int32) {
	obj.(*corev1.ReplicationController).Spec.Replicas = &n
}

// defaultReplicationController: as upstream's, the selector and the
// object's labels default to the template's labels, replicas to 1.
func defaultReplicationController(rc *corev1.ReplicationController) {
	if t := rc.Spec.Template; t != nil {
		if t.Labels != nil {
			if len(rc.Spec.Selector) == 0 {
				rc.Spec.Selector = maps.Clone(t.Labels)
			}
			if len(rc.Labels) == 0 {
				rc.Labels = maps.Clone(t.Labels)
			}
		}
		defaultPodTemplate(t)
	}
	if rc.Spec.Replicas == nil {
		rc.Spec.Replicas = ptrTo(int32(1))
	}
}

func validateReplicationController(rc *corev1.ReplicationController) field.ErrorList {
	errs := validateMeta(&rc.ObjectMeta, true, nameIsDNSSubdomain)
	return append(errs, validateReplicationControllerSpec(&rc.Spec, specPath)...)
}

func validateReplicationControllerSpec(s *corev1.ReplicationControllerSpec, fldPath *field.Path) field.ErrorList {
	errs := validateNonnegative(int64(deref(s.Replicas, 1)), fldPath.Child("replicas"))
	errs = append(errs, validateNonnegative(int64(s.MinReadySeconds), fldPath.Child("minReadySeconds"))...)
	sp := fldPath.Child("selector")
	if len(s.Selector) == 0 {
		errs = append(errs, field.Required(sp, ""))
	}
	errs = append(errs, metavalidation.ValidateLabels(s.Selector, sp)...)
	tp := fldPath.Child("template")
	if s.Template == nil {
		return append(errs, field.Required(tp, ""))
	}
	if len(s.Selector) > 0 && !labels.SelectorFromSet(s.Selector).Matches(labels.Set(s.Template.Labels)) {
		errs = append(errs, field.Invalid(tp.Child("metadata", "labels"), s.Template.Labels, selectorMismatch))
	}
	return append(errs, validateTemplateAlways(s.Template, "ReplicationController", tp)...)
}

func validateReplicationControllerUpdate(rc, old *corev1.ReplicationController) field.ErrorList {
	errs := validateMetaUpdate(&rc.ObjectMeta, &old.ObjectMeta)
	return append(errs, validateReplicationControllerSpec(&rc.Spec, specPath)...)
}

func validateReplicationControllerStatus(rc, old *corev1.ReplicationController) field.ErrorList {
	s := rc.Status
	errs := validateMetaUpdate(&rc.ObjectMeta, &old.ObjectMeta)
	return append(errs, validateReplicaCounts(s.Replicas, s.FullyLabeledReplicas, s.ReadyReplicas, s.AvailableReplicas, s.ObservedGeneration)...)
}
