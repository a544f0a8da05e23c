package strategy

import (
	"strings"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Name rules of the served kinds, as Kubernetes has them.
var (
	nameIsDNSSubdomain = apivalidation.NameIsDNSSubdomain
	nameIsDNSLabel     = apivalidation.NameIsDNSLabel
	// Service names are DNS-1035 labels (they become DNS names and
	// environment variable prefixes).
	nameIsDNS1035Label = apivalidation.NameIsDNS1035Label
)

const fieldImmutable = apivalidation.FieldImmutableErrorMsg

var metadataPath = field.NewPath("metadata")

// standardFinalizers are the unqualified finalizer names Kubernetes knows.
var standardFinalizers = map[string]bool{
	"kubernetes":                     true,
	metav1.FinalizerOrphanDependents: true,
	metav1.FinalizerDeleteDependents: true,
}

// validateMeta validates an object's metadata on create.
func validateMeta(m *metav1.ObjectMeta, namespaced bool, nameFn apivalidation.ValidateNameFunc) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(m, namespaced, nameFn, metadataPath)
	return append(errs, validateKubeFinalizers(m.Finalizers)...)
}

// validateMetaUpdate validates an object's metadata on update.
func validateMetaUpdate(m, old *metav1.ObjectMeta) field.ErrorList {
	errs := apivalidation.ValidateObjectMetaUpdate(m, old, metadataPath)
	return append(errs, validateKubeFinalizers(m.Finalizers)...)
}

func validateKubeFinalizers(finalizers []string) field.ErrorList {
	var errs field.ErrorList
	for i, f := range finalizers {
		errs = append(errs, validateKubeFinalizerName(f, metadataPath.Child("finalizers").Index(i))...)
	}
	return errs
}

// validateKubeFinalizerName rejects unqualified names that are not standard.
func validateKubeFinalizerName(name string, fldPath *field.Path) field.ErrorList {
	if !strings.Contains(name, "/") && !standardFinalizers[name] {
		return field.ErrorList{field.Invalid(fldPath, name, "name is neither a standard finalizer name nor is it fully qualified")}
	}
	return nil
}

// validateTemplateMeta validates the metadata of a pod template.
func validateTemplateMeta(m *metav1.ObjectMeta, fldPath *field.Path) field.ErrorList {
	errs := metavalidation.ValidateLabels(m.Labels, fldPath.Child("labels"))
	return append(errs, apivalidation.ValidateAnnotations(m.Annotations, fldPath.Child("annotations"))...)
}

func validateNonnegative(v int64, fldPath *field.Path) field.ErrorList {
	return apivalidation.ValidateNonnegativeField(v, fldPath)
}

func validateImmutable(newVal, oldVal any, fldPath *field.Path) field.ErrorList {
	return apivalidation.ValidateImmutableField(newVal, oldVal, fldPath)
}

func validateDNS1123Label(value string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(value) {
		errs = append(errs, field.Invalid(fldPath, value, msg))
	}
	return errs
}

func validateDNS1123Subdomain(value string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(value) {
		errs = append(errs, field.Invalid(fldPath, value, msg))
	}
	return errs
}

func validateQualifiedName(value string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(value) {
		errs = append(errs, field.Invalid(fldPath, value, msg))
	}
	return errs
}

// validateName checks value with a name rule, reporting at fldPath.
func validateName(value string, nameFn apivalidation.ValidateNameFunc, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range nameFn(value, false) {
		errs = append(errs, field.Invalid(fldPath, value, msg))
	}
	return errs
}

// labelSelectorStrict are the options for selectors of new objects.
var labelSelectorStrict = metavalidation.LabelSelectorValidationOptions{}

func ptrTo[T any](v T) *T { return &v }

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
