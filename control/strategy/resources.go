package strategy

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Resource names and quantities, as Kubernetes' core helper and
// validation see them.

const (
	isNegativeErrorMsg    = "must be greater than or equal to 0"
	isNotPositiveErrorMsg = "must be greater than zero"
	isNotIntegerErrorMsg  = "must be an integer"
	hugePagesPrefix       = "hugepages-"
	requestsPrefix        = "requests."
)

var standardResources = sets.New(
	"cpu", "memory", "ephemeral-storage",
	"requests.cpu", "requests.memory", "requests.ephemeral-storage",
	"limits.cpu", "limits.memory", "limits.ephemeral-storage",
	"pods", "resourcequotas", "services", "replicationcontrollers", "secrets", "configmaps",
	"persistentvolumeclaims", "storage", "requests.storage", "services.nodeports", "services.loadbalancers",
)

var integerResources = sets.New(
	"pods", "resourcequotas", "services", "replicationcontrollers", "secrets", "configmaps",
	"persistentvolumeclaims", "services.nodeports", "services.loadbalancers",
)

func isHugePageResourceName(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), hugePagesPrefix)
}

func isStandardResourceName(name corev1.ResourceName) bool {
	s := string(name)
	return standardResources.Has(s) || strings.HasPrefix(s, hugePagesPrefix) || strings.HasPrefix(s, requestsPrefix+hugePagesPrefix)
}

func isStandardContainerResourceName(name corev1.ResourceName) bool {
	return name == corev1.ResourceCPU || name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage || isHugePageResourceName(name)
}

// isNativeResource: unqualified or in the kubernetes.io domain.
func isNativeResource(name corev1.ResourceName) bool {
	s := string(name)
	return !strings.Contains(s, "/") || strings.Contains(s, "kubernetes.io/")
}

func isExtendedResourceName(name corev1.ResourceName) bool {
	if isNativeResource(name) || strings.HasPrefix(string(name), requestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(requestsPrefix+string(name))) == 0
}

func isOvercommitAllowed(name corev1.ResourceName) bool {
	return isNativeResource(name) && !isHugePageResourceName(name)
}

func isIntegerResourceName(name corev1.ResourceName) bool {
	return integerResources.Has(string(name)) || isExtendedResourceName(name)
}

// validateResourceName checks a compute resource name.
func validateResourceName(name corev1.ResourceName, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(string(name)) {
		errs = append(errs, field.Invalid(fldPath, name, msg))
	}
	if len(errs) != 0 {
		return errs
	}
	if !strings.Contains(string(name), "/") && !isStandardResourceName(name) {
		errs = append(errs, field.Invalid(fldPath, name, "must be a standard resource type or fully qualified"))
	}
	return errs
}

// validateContainerResourceName checks a resource name in a container's
// requests or limits.
func validateContainerResourceName(name corev1.ResourceName, fldPath *field.Path) field.ErrorList {
	errs := validateResourceName(name, fldPath)
	if !strings.Contains(string(name), "/") {
		if !isStandardContainerResourceName(name) {
			return append(errs, field.Invalid(fldPath, name, "must be a standard resource for containers"))
		}
	} else if !isNativeResource(name) && !isExtendedResourceName(name) {
		return append(errs, field.Invalid(fldPath, name, "doesn't follow extended resource name standard"))
	}
	return errs
}

func validateNonnegativeQuantity(q resource.Quantity, fldPath *field.Path) field.ErrorList {
	if q.Cmp(resource.Quantity{}) < 0 {
		return field.ErrorList{field.Invalid(fldPath, q.String(), isNegativeErrorMsg)}
	}
	return nil
}

func validatePositiveQuantity(q resource.Quantity, fldPath *field.Path) field.ErrorList {
	if q.Cmp(resource.Quantity{}) <= 0 {
		return field.ErrorList{field.Invalid(fldPath, q.String(), isNotPositiveErrorMsg)}
	}
	return nil
}

// validateResourceQuantityValue: non-negative, and whole for integer
// resources.
func validateResourceQuantityValue(name corev1.ResourceName, q resource.Quantity, fldPath *field.Path) field.ErrorList {
	errs := validateNonnegativeQuantity(q, fldPath)
	if isIntegerResourceName(name) && q.MilliValue()%1000 != 0 {
		errs = append(errs, field.Invalid(fldPath, q, isNotIntegerErrorMsg))
	}
	return errs
}

func validateBasicResource(q resource.Quantity, fldPath *field.Path) field.ErrorList {
	if q.Value() < 0 {
		return field.ErrorList{field.Invalid(fldPath, q.Value(), "must be a valid resource quantity")}
	}
	return nil
}

// hugePageSize is the page size in a hugepages-<size> resource name.
func hugePageSize(name corev1.ResourceName) (resource.Quantity, bool) {
	q, err := resource.ParseQuantity(strings.TrimPrefix(string(name), hugePagesPrefix))
	if err != nil || q.Sign() <= 0 {
		return resource.Quantity{}, false
	}
	return q, true
}

func validateHugePageValue(name corev1.ResourceName, q resource.Quantity) error {
	size, ok := hugePageSize(name)
	if !ok || q.Value()%size.Value() != 0 {
		return fmt.Errorf("%s is not positive integer multiple of %s", q.String(), name)
	}
	return nil
}

// validateResourceRequirements checks a container's requests and limits:
// names, quantities, requests no larger than limits (equal for resources
// that cannot be overcommitted) and huge pages.
func validateResourceRequirements(r *corev1.ResourceRequirements, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	limPath, reqPath := fldPath.Child("limits"), fldPath.Child("requests")
	var limCPUMem, reqCPUMem, limHuge, reqHuge bool
	for _, name := range sortedResourceNames(r.Limits) {
		q := r.Limits[name]
		p := limPath.Key(string(name))
		errs = append(errs, validateContainerResourceName(name, p)...)
		errs = append(errs, validateResourceQuantityValue(name, q, p)...)
		if isHugePageResourceName(name) {
			limHuge = true
			if err := validateHugePageValue(name, q); err != nil {
				errs = append(errs, field.Invalid(p, q.String(), err.Error()))
			}
		}
		if name == corev1.ResourceCPU || name == corev1.ResourceMemory {
			limCPUMem = true
		}
	}
	for _, name := range sortedResourceNames(r.Requests) {
		q := r.Requests[name]
		p := reqPath.Key(string(name))
		errs = append(errs, validateContainerResourceName(name, p)...)
		errs = append(errs, validateResourceQuantityValue(name, q, p)...)
		if lim, ok := r.Limits[name]; ok {
			if q.Cmp(lim) != 0 && !isOvercommitAllowed(name) {
				errs = append(errs, field.Invalid(reqPath, q.String(), fmt.Sprintf("must be equal to %s limit of %s", name, lim.String())))
			} else if q.Cmp(lim) > 0 {
				errs = append(errs, field.Invalid(reqPath, q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, lim.String())))
			}
		} else if !isOvercommitAllowed(name) {
			errs = append(errs, field.Required(limPath, "Limit must be set for non overcommitable resources"))
		}
		if isHugePageResourceName(name) {
			reqHuge = true
			if err := validateHugePageValue(name, q); err != nil {
				errs = append(errs, field.Invalid(p, q.String(), err.Error()))
			}
		}
		if name == corev1.ResourceCPU || name == corev1.ResourceMemory {
			reqCPUMem = true
		}
	}
	if !limCPUMem && !reqCPUMem && (limHuge || reqHuge) {
		errs = append(errs, field.Forbidden(fldPath, "HugePages require cpu or memory"))
	}
	return errs
}

// sortedResourceNames gives a stable order to errors about resource lists.
func sortedResourceNames(l corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(l))
	for k := range l {
		names = append(names, k)
	}
	return sets.List(sets.New(names...))
}
