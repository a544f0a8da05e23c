package strategy

import (
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Role, ClusterRole, RoleBinding and ClusterRoleBinding are the strategies
// of rbac.authorization.k8s.io/v1, with kube-apiserver's defaults
// (pkg/apis/rbac/v1) and validation (pkg/apis/rbac/validation): names are
// path segments; a rule has verbs and either API groups and resources or,
// in a ClusterRole only, non-resource URLs; an aggregation rule has a
// valid selector; a binding's roleRef names a Role or ClusterRole of
// rbac.authorization.k8s.io and never changes, and its subjects are
// ServiceAccounts (with a namespace in a ClusterRoleBinding), Users or
// Groups.
var (
	Role = &Kind[*rbacv1.Role]{namespaced: true, create: validateRole,
		update: func(r, old *rbacv1.Role) field.ErrorList {
			return append(validateRole(r), validateMetaUpdate(&r.ObjectMeta, &old.ObjectMeta)...)
		}}
	ClusterRole = &Kind[*rbacv1.ClusterRole]{create: validateClusterRole,
		update: func(r, old *rbacv1.ClusterRole) field.ErrorList {
			return append(validateClusterRole(r), validateMetaUpdate(&r.ObjectMeta, &old.ObjectMeta)...)
		}}
	RoleBinding = &Kind[*rbacv1.RoleBinding]{namespaced: true,
		defaults: func(b *rbacv1.RoleBinding) { defaultBinding(&b.RoleRef, b.Subjects) },
		create: func(b *rbacv1.RoleBinding) field.ErrorList {
			return validateBinding(&b.ObjectMeta, b.RoleRef, b.Subjects, true)
		},
		update: func(b, old *rbacv1.RoleBinding) field.ErrorList {
			return validateBindingUpdate(&b.ObjectMeta, &old.ObjectMeta, b.RoleRef, old.RoleRef, b.Subjects, true)
		}}
	ClusterRoleBinding = &Kind[*rbacv1.ClusterRoleBinding]{
		defaults: func(b *rbacv1.ClusterRoleBinding) { defaultBinding(&b.RoleRef, b.Subjects) },
		create: func(b *rbacv1.ClusterRoleBinding) field.ErrorList {
			return validateBinding(&b.ObjectMeta, b.RoleRef, b.Subjects, false)
		},
		update: func(b, old *rbacv1.ClusterRoleBinding) field.ErrorList {
			return validateBindingUpdate(&b.ObjectMeta, &old.ObjectMeta, b.RoleRef, old.RoleRef, b.Subjects, false)
		}}
)

// nameIsPathSegment is kube-apiserver's ValidateRBACName.
var nameIsPathSegment = path.ValidatePathSegmentName

func validateRole(r *rbacv1.Role) field.ErrorList {
	errs := validateMeta(&r.ObjectMeta, true, nameIsPathSegment)
	for i, rule := range r.Rules {
		errs = append(errs, validatePolicyRule(rule, true, field.NewPath("rules").Index(i))...)
	}
	return errs
}

func validateClusterRole(r *rbacv1.ClusterRole) field.ErrorList {
	errs := validateMeta(&r.ObjectMeta, false, nameIsPathSegment)
	for i, rule := range r.Rules {
		errs = append(errs, validatePolicyRule(rule, false, field.NewPath("rules").Index(i))...)
	}
	if a := r.AggregationRule; a != nil {
		ap := field.NewPath("aggregationRule", "clusterRoleSelectors")
		if len(a.ClusterRoleSelectors) == 0 {
			errs = append(errs, field.Required(ap, "at least one clusterRoleSelector required if aggregationRule is non-nil"))
		}
		for i := range a.ClusterRoleSelectors {
			errs = append(errs, metavalidation.ValidateLabelSelector(&a.ClusterRoleSelectors[i], metavalidation.LabelSelectorValidationOptions{}, ap.Index(i))...)
		}
	}
	return errs
}

func validatePolicyRule(rule rbacv1.PolicyRule, namespaced bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(rule.Verbs) == 0 {
		errs = append(errs, field.Required(p.Child("verbs"), "verbs must contain at least one value"))
	}
	if len(rule.NonResourceURLs) > 0 {
		if namespaced {
			errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), rule.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
		}
		if len(rule.APIGroups) > 0 || len(rule.Resources) > 0 || len(rule.ResourceNames) > 0 {
			errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), rule.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
		}
		return errs
	}
	if len(rule.APIGroups) == 0 {
		errs = append(errs, field.Required(p.Child("apiGroups"), "resource rules must supply at least one api group"))
	}
	if len(rule.Resources) == 0 {
		errs = append(errs, field.Required(p.Child("resources"), "resource rules must supply at least one resource"))
	}
	return errs
}

// defaultBinding fills in the API groups a binding may leave out.
func defaultBinding(ref *rbacv1.RoleRef, subjects []rbacv1.Subject) {
	if ref.APIGroup == "" {
		ref.APIGroup = rbacv1.GroupName
	}
	for i := range subjects {
		if s := &subjects[i]; s.APIGroup == "" && (s.Kind == rbacv1.UserKind || s.Kind == rbacv1.GroupKind) {
			s.APIGroup = rbacv1.GroupName
		}
	}
}

func validateBinding(m *metav1.ObjectMeta, ref rbacv1.RoleRef, subjects []rbacv1.Subject, namespaced bool) field.ErrorList {
	errs := validateMeta(m, namespaced, nameIsPathSegment)
	rp := field.NewPath("roleRef")
	if ref.APIGroup != rbacv1.GroupName {
		errs = append(errs, field.NotSupported(rp.Child("apiGroup"), ref.APIGroup, []string{rbacv1.GroupName}))
	}
	switch ref.Kind {
	case "Role", "ClusterRole":
		if !namespaced && ref.Kind == "Role" {
			errs = append(errs, field.NotSupported(rp.Child("kind"), ref.Kind, []string{"ClusterRole"}))
		}
	default:
		kinds := []string{"ClusterRole"}
		if namespaced {
			kinds = []string{"Role", "ClusterRole"}
		}
		errs = append(errs, field.NotSupported(rp.Child("kind"), ref.Kind, kinds))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(rp.Child("name"), ""))
	} else {
		for _, msg := range nameIsPathSegment(ref.Name, false) {
			errs = append(errs, field.Invalid(rp.Child("name"), ref.Name, msg))
		}
	}
	sp := field.NewPath("subjects")
	for i, s := range subjects {
		errs = append(errs, validateSubject(s, namespaced, sp.Index(i))...)
	}
	return errs
}

func validateBindingUpdate(m, oldM *metav1.ObjectMeta, ref, oldRef rbacv1.RoleRef, subjects []rbacv1.Subject, namespaced bool) field.ErrorList {
	errs := validateBinding(m, ref, subjects, namespaced)
	errs = append(errs, validateMetaUpdate(m, oldM)...)
	if ref != oldRef {
		errs = append(errs, field.Invalid(field.NewPath("roleRef"), ref, "cannot change roleRef"))
	}
	return errs
}

func validateSubject(s rbacv1.Subject, namespaced bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	}
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		if s.Name != "" {
			for _, msg := range nameIsDNSSubdomain(s.Name, false) {
				errs = append(errs, field.Invalid(p.Child("name"), s.Name, msg))
			}
		}
		if s.APIGroup != "" {
			errs = append(errs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{""}))
		}
		if !namespaced && s.Namespace == "" {
			errs = append(errs, field.Required(p.Child("namespace"), ""))
		}
	case rbacv1.UserKind, rbacv1.GroupKind:
		if s.APIGroup != rbacv1.GroupName {
			errs = append(errs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{rbacv1.GroupName}))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("kind"), s.Kind, []string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
	}
	return errs
}
