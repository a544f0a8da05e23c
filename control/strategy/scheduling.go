package strategy

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// PriorityClass is the strategy of scheduling.k8s.io/v1 PriorityClasses.
var PriorityClass = &Kind[*schedulingv1.PriorityClass]{defaults: defaultPriorityClass, create: validatePriorityClass,
	update: validatePriorityClassUpdate, onCreate: func(*schedulingv1.PriorityClass) {}}

// The priorities of user classes end here; above are the system ones.
const highestUserPriority = 1000000000

// SystemPriorityClasses are the classes every cluster has, as
// kube-apiserver makes them.
func SystemPriorityClasses() []*schedulingv1.PriorityClass {
	var out []*schedulingv1.PriorityClass
	for _, name := range []string{"system-node-critical", "system-cluster-critical"} {
		pc := &schedulingv1.PriorityClass{Value: builtinPriorities[name],
			Description: "Used for system critical pods that must not be moved from their current node."}
		if name == "system-cluster-critical" {
			pc.Description = "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary."
		}
		pc.Name = name
		defaultPriorityClass(pc)
		out = append(out, pc)
	}
	return out
}

func defaultPriorityClass(pc *schedulingv1.PriorityClass) {
	if pc.PreemptionPolicy == nil {
		pc.PreemptionPolicy = ptrTo(corev1.PreemptLowerPriority)
	}
}

func validatePriorityClass(pc *schedulingv1.PriorityClass) field.ErrorList {
	errs := validateMeta(&pc.ObjectMeta, false, nameIsDNSSubdomain)
	if strings.HasPrefix(pc.Name, "system-") {
		if v, ok := builtinPriorities[pc.Name]; !ok || v != pc.Value || pc.GlobalDefault {
			why := fmt.Sprintf("%v is not a known system priority class", pc.Name)
			if ok {
				why = fmt.Sprintf("value of %v PriorityClass must be %v", pc.Name, v)
			}
			errs = append(errs, field.Forbidden(metadataPath.Child("name"),
				"priority class names with 'system-' prefix are reserved for system use only. error: "+why))
		}
	} else if pc.Value > highestUserPriority {
		errs = append(errs, field.Forbidden(field.NewPath("value"), fmt.Sprintf("maximum allowed value of a user defined priority is %v", highestUserPriority)))
	}
	if p := pc.PreemptionPolicy; p != nil && *p != corev1.PreemptLowerPriority && *p != corev1.PreemptNever {
		errs = append(errs, field.NotSupported(field.NewPath("preemptionPolicy"), *p, []corev1.PreemptionPolicy{corev1.PreemptLowerPriority, corev1.PreemptNever}))
	}
	return errs
}

func validatePriorityClassUpdate(pc, old *schedulingv1.PriorityClass) field.ErrorList {
	errs := validateMetaUpdate(&pc.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validatePriorityClass(pc)...)
	if pc.Value != old.Value {
		errs = append(errs, field.Forbidden(field.NewPath("value"), "may not be changed in an update."))
	}
	if deref(pc.PreemptionPolicy, "") != deref(old.PreemptionPolicy, "") {
		errs = append(errs, field.Invalid(field.NewPath("preemptionPolicy"), pc.PreemptionPolicy, fieldImmutable))
	}
	return errs
}
