package crd

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/isle-cluster/isle/control/registry"
)

// Finalizer holds a deleted CRD until its objects are gone.
const Finalizer = "customresourcecleanup.apiextensions.k8s.io"

// Resource is the registry's entry of the CustomResourceDefinition kind.
func Resource() *registry.Resource {
	return &registry.Resource{
		GroupVersionResource: GroupVersion.WithResource("customresourcedefinitions"),
		Kind:                 "CustomResourceDefinition",
		Singular:             "customresourcedefinition",
		ShortNames:           []string{"crd", "crds"},
		Categories:           []string{"api-extensions"},
		New:                  func() runtime.Object { return &CustomResourceDefinition{} },
		NewList:              func() runtime.Object { return &CustomResourceDefinitionList{} },
		Strategy:             strategy{},
		Table:                crdTable{},
		Status:               true,
		Warnings:             Warnings,
	}
}

// strategy is the CustomResourceDefinition kind's write rules.
type strategy struct{}

// PrepareForCreate defaults a new CRD and resets its status; the
// finalizer holds it, once deleted, until its objects are gone.
func (strategy) PrepareForCreate(obj runtime.Object) {
	c := obj.(*CustomResourceDefinition)
	defaults(c)
	c.Status = CustomResourceDefinitionStatus{StoredVersions: []string{}}
	if !slices.Contains(c.Finalizers, Finalizer) {
		c.Finalizers = append(c.Finalizers, Finalizer)
	}
}

// PrepareForUpdate defaults and keeps the status.
func (strategy) PrepareForUpdate(obj, old runtime.Object) {
	c := obj.(*CustomResourceDefinition)
	defaults(c)
	c.Status = old.(*CustomResourceDefinition).Status
}

// PrepareForStatusUpdate: a status write changes the status alone.
func (strategy) PrepareForStatusUpdate(obj, old runtime.Object) {}

func defaults(c *CustomResourceDefinition) {
	n := &c.Spec.Names
	if n.Singular == "" {
		n.Singular = strings.ToLower(n.Kind)
	}
	if n.ListKind == "" && n.Kind != "" {
		n.ListKind = n.Kind + "List"
	}
	if c.Spec.Conversion == nil {
		c.Spec.Conversion = &CustomResourceConversion{Strategy: NoneConverter}
	}
	if w := c.Spec.Conversion.Webhook; w != nil && w.ClientConfig != nil && w.ClientConfig.Service != nil && w.ClientConfig.Service.Port == nil {
		port := int32(443)
		w.ClientConfig.Service.Port = &port
	}
}

func validateMeta(c *CustomResourceDefinition) field.ErrorList {
	return apivalidation.ValidateObjectMetaAccessor(c, false, path.ValidatePathSegmentName, field.NewPath("metadata"))
}

// ValidateCreate validates a new CRD.
func (strategy) ValidateCreate(obj runtime.Object) field.ErrorList {
	c := obj.(*CustomResourceDefinition)
	errs, _ := validateCRD(c)
	return append(validateMeta(c), errs...)
}

// ValidateUpdate validates an update: a CRD's group and scope stay, and
// a version objects are stored in stays until it leaves storedVersions.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	c, o := obj.(*CustomResourceDefinition), old.(*CustomResourceDefinition)
	errs, _ := validateCRD(c)
	errs = append(validateMeta(c), errs...)
	errs = append(errs, apivalidation.ValidateObjectMetaAccessorUpdate(c, o, field.NewPath("metadata"))...)
	if c.Spec.Group != o.Spec.Group {
		errs = append(errs, field.Invalid(field.NewPath("spec", "group"), c.Spec.Group, "field is immutable"))
	}
	if c.Spec.Scope != o.Spec.Scope {
		errs = append(errs, field.Invalid(field.NewPath("spec", "scope"), c.Spec.Scope, "field is immutable"))
	}
	for _, stored := range o.Status.StoredVersions {
		if !slices.ContainsFunc(c.Spec.Versions, func(v CustomResourceDefinitionVersion) bool { return v.Name == stored }) {
			errs = append(errs, field.Invalid(field.NewPath("status", "storedVersions"), o.Status.StoredVersions,
				fmt.Sprintf("must have the same number of versions as spec.versions: %s is stored and must stay in spec.versions", stored)))
		}
	}
	return errs
}

// ValidateStatusUpdate validates the status: accepted names and the
// stored versions, which must be versions of the spec.
func (strategy) ValidateStatusUpdate(obj, old runtime.Object) field.ErrorList {
	c := obj.(*CustomResourceDefinition)
	errs := validateMeta(c)
	if c.Status.AcceptedNames.Plural != "" {
		errs = append(errs, validateNames(&c.Status.AcceptedNames, field.NewPath("status", "acceptedNames"))...)
	}
	for i, v := range c.Status.StoredVersions {
		if !slices.ContainsFunc(c.Spec.Versions, func(sv CustomResourceDefinitionVersion) bool { return sv.Name == v }) {
			errs = append(errs, field.Invalid(field.NewPath("status", "storedVersions").Index(i), v, "must appear in spec.versions"))
		}
	}
	return errs
}

// BeginDelete: the finalizer holds the CRD while its objects go.
func (strategy) BeginDelete(runtime.Object, metav1.DeleteOptions) (int64, bool) { return 0, false }

// HeldBack: only by the finalizer.
func (strategy) HeldBack(runtime.Object) bool { return false }

// Warnings are what a CRD asks that isle stores without doing.
func Warnings(obj runtime.Object) []string {
	c, ok := obj.(*CustomResourceDefinition)
	if !ok {
		return nil
	}
	_, w := validateCRD(c)
	return w
}

// crdTable prints CRDs as kubectl shows them: NAME, CREATED AT.
type crdTable struct{}

func (crdTable) Columns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "Created At", Type: "date", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	}
}

func (crdTable) Rows(obj runtime.Object, now time.Time) ([]metav1.TableRow, error) {
	row := func(c *CustomResourceDefinition) metav1.TableRow {
		return metav1.TableRow{Cells: []any{c.Name, c.CreationTimestamp.UTC().Format(time.RFC3339)}}
	}
	switch o := obj.(type) {
	case *CustomResourceDefinition:
		return []metav1.TableRow{row(o)}, nil
	case *CustomResourceDefinitionList:
		rows := make([]metav1.TableRow, 0, len(o.Items))
		for i := range o.Items {
			rows = append(rows, row(&o.Items[i]))
		}
		return rows, nil
	}
	return nil, fmt.Errorf("crd: print %s: not a CustomResourceDefinition", reflect.TypeOf(obj))
}
