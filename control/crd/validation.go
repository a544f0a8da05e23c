package crd

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateCRD checks a CRD as kube-apiserver does: its name is
// plural.group, its names, scope, versions (one stored, each with a
// structural schema), subresources, printer columns and conversion.
// warnings are what is accepted but not done (CEL rules).
func validateCRD(c *CustomResourceDefinition) (errs field.ErrorList, warnings []string) {
	spec := field.NewPath("spec")
	if want := c.Spec.Names.Plural + "." + c.Spec.Group; c.Name != want {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), c.Name, fmt.Sprintf("must be spec.names.plural+\".\"+spec.group (%s)", want)))
	}
	switch {
	case c.Spec.Group == "":
		errs = append(errs, field.Required(spec.Child("group"), ""))
	case len(validation.IsDNS1123Subdomain(c.Spec.Group)) > 0:
		errs = append(errs, field.Invalid(spec.Child("group"), c.Spec.Group, strings.Join(validation.IsDNS1123Subdomain(c.Spec.Group), "; ")))
	case !strings.Contains(c.Spec.Group, "."):
		errs = append(errs, field.Invalid(spec.Child("group"), c.Spec.Group, "should be a domain with at least one dot"))
	}
	if c.Spec.Scope != NamespaceScoped && c.Spec.Scope != ClusterScoped {
		errs = append(errs, field.NotSupported(spec.Child("scope"), c.Spec.Scope, []string{ClusterScoped, NamespaceScoped}))
	}
	errs = append(errs, validateNames(&c.Spec.Names, spec.Child("names"))...)
	if c.Spec.PreserveUnknownFields {
		errs = append(errs, field.Invalid(spec.Child("preserveUnknownFields"), true, "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead"))
	}
	vp := spec.Child("versions")
	if len(c.Spec.Versions) == 0 {
		errs = append(errs, field.Required(vp, "must have exactly one version marked as storage version"))
	}
	storage, seen := 0, sets.New[string]()
	for i, v := range c.Spec.Versions {
		p := vp.Index(i)
		if v.Storage {
			storage++
		}
		if seen.Has(v.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), v.Name))
		}
		seen.Insert(v.Name)
		if msgs := validation.IsDNS1035Label(v.Name); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p.Child("name"), v.Name, strings.Join(msgs, "; ")))
		}
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			errs = append(errs, field.Required(p.Child("schema", "openAPIV3Schema"), "schemas are required"))
		} else {
			s := v.Schema.OpenAPIV3Schema
			errs = append(errs, validateStructural(s, p.Child("schema", "openAPIV3Schema"))...)
			if rules := countRules(s); rules > 0 {
				warnings = append(warnings, fmt.Sprintf("%s: %d x-kubernetes-validations rules are stored but not enforced: isle has no CEL evaluator", p.Child("schema", "openAPIV3Schema"), rules))
			}
		}
		errs = append(errs, validateSubresources(v, p.Child("subresources"))...)
		for j, col := range v.AdditionalPrinterColumns {
			cp := p.Child("additionalPrinterColumns").Index(j)
			if col.Name == "" {
				errs = append(errs, field.Required(cp.Child("name"), ""))
			}
			if !slices.Contains([]string{"integer", "number", "string", "boolean", "date"}, col.Type) {
				errs = append(errs, field.NotSupported(cp.Child("type"), col.Type, []string{"boolean", "date", "integer", "number", "string"}))
			}
			if col.Format != "" && !slices.Contains([]string{"int32", "int64", "float", "double", "byte", "date", "date-time", "password"}, col.Format) {
				errs = append(errs, field.NotSupported(cp.Child("format"), col.Format, []string{"byte", "date", "date-time", "double", "float", "int32", "int64", "password"}))
			}
			if _, err := parseJSONPath(col.JSONPath); err != nil {
				errs = append(errs, field.Invalid(cp.Child("jsonPath"), col.JSONPath, "must be a simple JSON path: "+err.Error()))
			}
		}
	}
	if len(c.Spec.Versions) > 0 && storage != 1 {
		errs = append(errs, field.Invalid(vp, storage, "must have exactly one version marked as storage version"))
	}
	if conv := c.Spec.Conversion; conv != nil {
		cp := spec.Child("conversion")
		switch conv.Strategy {
		case NoneConverter:
			if conv.Webhook != nil {
				errs = append(errs, field.Forbidden(cp.Child("webhook"), "should not be set when strategy is not set to Webhook"))
			}
		case WebhookConverter:
			if conv.Webhook == nil || conv.Webhook.ClientConfig == nil {
				errs = append(errs, field.Required(cp.Child("webhook", "clientConfig"), "required when strategy is set to Webhook"))
			} else {
				errs = append(errs, validateClientConfig(conv.Webhook.ClientConfig, cp.Child("webhook", "clientConfig"))...)
				if !slices.Contains(conv.Webhook.ConversionReviewVersions, "v1") {
					errs = append(errs, field.Invalid(cp.Child("webhook", "conversionReviewVersions"), conv.Webhook.ConversionReviewVersions, "must include at least one of v1"))
				}
			}
		default:
			errs = append(errs, field.NotSupported(cp.Child("strategy"), conv.Strategy, []string{NoneConverter, WebhookConverter}))
		}
	}
	return errs, warnings
}

// validateNames checks a CRD's names (also its accepted names).
func validateNames(n *CustomResourceDefinitionNames, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	label := func(name, v string, required bool) {
		switch {
		case v == "" && required:
			errs = append(errs, field.Required(path.Child(name), ""))
		case v != "" && len(validation.IsDNS1035Label(v)) > 0:
			errs = append(errs, field.Invalid(path.Child(name), v, strings.Join(validation.IsDNS1035Label(v), "; ")))
		}
	}
	label("plural", n.Plural, true)
	label("singular", n.Singular, false)
	for i, s := range n.ShortNames {
		if msgs := validation.IsDNS1035Label(s); len(msgs) > 0 {
			errs = append(errs, field.Invalid(path.Child("shortNames").Index(i), s, strings.Join(msgs, "; ")))
		}
	}
	for i, s := range n.Categories {
		if msgs := validation.IsDNS1035Label(s); len(msgs) > 0 {
			errs = append(errs, field.Invalid(path.Child("categories").Index(i), s, strings.Join(msgs, "; ")))
		}
	}
	kind := func(name, v string) {
		switch {
		case v == "":
			errs = append(errs, field.Required(path.Child(name), ""))
		case len(validation.IsDNS1035Label(strings.ToLower(v))) > 0:
			errs = append(errs, field.Invalid(path.Child(name), v, "may have mixed case, but should otherwise match: "+strings.Join(validation.IsDNS1035Label(strings.ToLower(v)), "; ")))
		}
	}
	kind("kind", n.Kind)
	kind("listKind", n.ListKind)
	if n.Kind != "" && n.Kind == n.ListKind {
		errs = append(errs, field.Invalid(path.Child("listKind"), n.ListKind, "kind and listKind may not be the same"))
	}
	return errs
}

func validateSubresources(v CustomResourceDefinitionVersion, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if v.Subresources == nil || v.Subresources.Scale == nil {
		return nil
	}
	sc := v.Subresources.Scale
	for name, p := range map[string]string{"specReplicasPath": sc.SpecReplicasPath, "statusReplicasPath": sc.StatusReplicasPath} {
		switch {
		case p == "":
			errs = append(errs, field.Required(path.Child("scale", name), ""))
		case !strings.HasPrefix(p, "."):
			errs = append(errs, field.Invalid(path.Child("scale", name), p, "should be a json path under .spec or .status"))
		}
	}
	if !strings.HasPrefix(sc.SpecReplicasPath, ".spec.") {
		errs = append(errs, field.Invalid(path.Child("scale", "specReplicasPath"), sc.SpecReplicasPath, "should be a json path under .spec"))
	}
	if !strings.HasPrefix(sc.StatusReplicasPath, ".status.") {
		errs = append(errs, field.Invalid(path.Child("scale", "statusReplicasPath"), sc.StatusReplicasPath, "should be a json path under .status"))
	}
	if sc.LabelSelectorPath != nil && !strings.HasPrefix(*sc.LabelSelectorPath, ".spec.") && !strings.HasPrefix(*sc.LabelSelectorPath, ".status.") {
		errs = append(errs, field.Invalid(path.Child("scale", "labelSelectorPath"), *sc.LabelSelectorPath, "should be a json path under either .spec or .status"))
	}
	return errs
}

// validateClientConfig checks a webhook's address: a Service or an
// https URL, not both.
func validateClientConfig(cc *WebhookClientConfig, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case cc.URL == nil && cc.Service == nil:
		errs = append(errs, field.Required(path, "exactly one of url or service is required"))
	case cc.URL != nil && cc.Service != nil:
		errs = append(errs, field.Required(path, "exactly one of url or service is required"))
	case cc.URL != nil:
		if !strings.HasPrefix(*cc.URL, "https://") {
			errs = append(errs, field.Invalid(path.Child("url"), *cc.URL, "'https' is the only allowed URL scheme"))
		}
	default:
		if cc.Service.Name == "" {
			errs = append(errs, field.Required(path.Child("service", "name"), "service name is required"))
		}
		if cc.Service.Namespace == "" {
			errs = append(errs, field.Required(path.Child("service", "namespace"), "service namespace is required"))
		}
		if p := cc.Service.Port; p != nil && (*p < 1 || *p > 65535) {
			errs = append(errs, field.Invalid(path.Child("service", "port"), *p, "port is not valid: must be between 1 and 65535, inclusive"))
		}
	}
	return errs
}

// countRules counts the CEL rules of a schema.
func countRules(s *JSONSchemaProps) int {
	if s == nil {
		return 0
	}
	n := len(s.XValidations)
	for _, p := range s.Properties {
		n += countRules(&p)
	}
	if s.Items != nil {
		n += countRules(s.Items.Schema)
	}
	if s.AdditionalProperties != nil {
		n += countRules(s.AdditionalProperties.Schema)
	}
	return n
}
