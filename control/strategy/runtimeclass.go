package strategy

import (
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// RuntimeClass is the strategy of node.k8s.io/v1 RuntimeClasses, as
// kube-apiserver's (pkg/apis/node/validation): the handler is a DNS-1123
// label that never changes, the pod overhead is valid resources, and the
// scheduling constraints are valid as a pod's.
var RuntimeClass = &Kind[*nodev1.RuntimeClass]{create: validateRuntimeClass, update: validateRuntimeClassUpdate}

func validateRuntimeClass(rc *nodev1.RuntimeClass) field.ErrorList {
	errs := validateMeta(&rc.ObjectMeta, false, nameIsDNSSubdomain)
	errs = append(errs, validateDNS1123Label(rc.Handler, field.NewPath("handler"))...)
	if rc.Overhead != nil {
		// The overhead is checked as the limits of a container.
		errs = append(errs, validateResourceRequirements(&corev1.ResourceRequirements{Limits: rc.Overhead.PodFixed}, field.NewPath("overhead"))...)
	}
	if s := rc.Scheduling; s != nil {
		sp := field.NewPath("scheduling")
		errs = append(errs, metavalidation.ValidateLabels(s.NodeSelector, sp.Child("nodeSelector"))...)
		tp := sp.Child("tolerations")
		errs = append(errs, validateTolerations(s.Tolerations, tp)...)
		// Unlike a pod's, the tolerations must differ in key, operator,
		// value or effect.
		seen := map[corev1.Toleration]bool{}
		for i, t := range s.Tolerations {
			key := corev1.Toleration{Key: t.Key, Operator: t.Operator, Value: t.Value, Effect: t.Effect}
			if seen[key] {
				errs = append(errs, field.Duplicate(tp.Index(i), t))
			}
			seen[key] = true
		}
	}
	return errs
}

func validateRuntimeClassUpdate(rc, old *nodev1.RuntimeClass) field.ErrorList {
	errs := validateRuntimeClass(rc)
	errs = append(errs, validateMetaUpdate(&rc.ObjectMeta, &old.ObjectMeta)...)
	return append(errs, validateImmutable(rc.Handler, old.Handler, field.NewPath("handler"))...)
}
