package authz

import (
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
)

// RBAC is kube-apiserver's RBAC authorizer over the index: a request is
// allowed when a rule of a role bound to its user allows it: the
// ClusterRoles of the ClusterRoleBindings, and in the request's namespace
// the Roles and ClusterRoles of its RoleBindings.
type RBAC struct{ Index *Index }

// Authorize decides a; RBAC never denies, it only has no opinion.
func (z *RBAC) Authorize(a Attributes) (Decision, string) {
	if a.ResourceRequest && a.Verb == "create" && a.Subresource == "" {
		a.Name = "" // as kube-apiserver, which authorizes a create before it reads the name
	}
	allowed := false
	z.Index.visitRules(a.User, a.Namespace, func(rule *rbacv1.PolicyRule) bool {
		allowed = RuleAllows(&a, rule)
		return !allowed
	})
	if allowed {
		return Allow, ""
	}
	return NoOpinion, ""
}

// visitRules calls visit with each rule that applies to u in namespace
// ("" for the cluster's rules alone) until visit returns false. A binding
// of a role that does not exist grants nothing.
func (x *Index) visitRules(u *User, namespace string, visit func(*rbacv1.PolicyRule) bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	each := func(rules []rbacv1.PolicyRule) bool {
		for i := range rules {
			if !visit(&rules[i]) {
				return false
			}
		}
		return true
	}
	for _, b := range x.crbs {
		if !appliesTo(u, b.Subjects, "") || b.RoleRef.Kind != "ClusterRole" {
			continue
		}
		if r := x.clusterRoles[b.RoleRef.Name]; r != nil && !each(r.Rules) {
			return
		}
	}
	if namespace == "" {
		return
	}
	for _, b := range x.rbs[namespace] {
		if !appliesTo(u, b.Subjects, namespace) {
			continue
		}
		var rules []rbacv1.PolicyRule
		switch b.RoleRef.Kind {
		case "ClusterRole":
			if r := x.clusterRoles[b.RoleRef.Name]; r != nil {
				rules = r.Rules
			}
		case "Role":
			if r := x.roles[namespace][b.RoleRef.Name]; r != nil {
				rules = r.Rules
			}
		}
		if !each(rules) {
			return
		}
	}
}

// RulesFor are the rules that apply to u in namespace, in the order
// visited (SelfSubjectRulesReview, the escalation check).
func (x *Index) RulesFor(u *User, namespace string) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	x.visitRules(u, namespace, func(r *rbacv1.PolicyRule) bool {
		out = append(out, *r)
		return true
	})
	return out
}

// appliesTo reports whether one of subjects is u; a ServiceAccount
// subject without a namespace is of the binding's.
func appliesTo(u *User, subjects []rbacv1.Subject, bindingNamespace string) bool {
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			if u.Name == s.Name {
				return true
			}
		case rbacv1.GroupKind:
			if u.InGroup(s.Name) {
				return true
			}
		case rbacv1.ServiceAccountKind:
			ns := s.Namespace
			if ns == "" {
				ns = bindingNamespace
			}
			if ns != "" && isServiceAccount(u.Name, ns, s.Name) {
				return true
			}
		}
	}
	return false
}

// isServiceAccount reports whether user is ServiceAccountUser(ns, name),
// without making that string (a decision looks at every binding).
func isServiceAccount(user, ns, name string) bool {
	rest, ok := strings.CutPrefix(user, ServiceAccountPrefix)
	return ok && len(rest) == len(ns)+1+len(name) && rest[:len(ns)] == ns && rest[len(ns)] == ':' && rest[len(ns)+1:] == name
}

// RuleAllows reports whether rule allows a, as upstream's
// rbac.RuleAllows: verbs, API groups, resources ("*", "resource/sub",
// "*/sub") and names for a resource request; verbs and non-resource URLs
// (exact, "*", or a prefix ending in "*") otherwise.
func RuleAllows(a *Attributes, rule *rbacv1.PolicyRule) bool {
	if !has(rule.Verbs, a.Verb) {
		return false
	}
	if !a.ResourceRequest {
		for _, u := range rule.NonResourceURLs {
			if u == rbacv1.NonResourceAll || u == a.Path || strings.HasSuffix(u, "*") && strings.HasPrefix(a.Path, strings.TrimSuffix(u, "*")) {
				return true
			}
		}
		return false
	}
	if !has(rule.APIGroups, a.APIGroup) {
		return false
	}
	combined := a.Resource
	if a.Subresource != "" {
		combined += "/" + a.Subresource
	}
	matched := false
	for _, r := range rule.Resources {
		if r == rbacv1.ResourceAll || r == combined || a.Subresource != "" && r == "*/"+a.Subresource {
			matched = true
			break
		}
	}
	if !matched {
		return false
	}
	if len(rule.ResourceNames) == 0 {
		return true
	}
	for _, n := range rule.ResourceNames {
		if n == a.Name && a.Name != "" {
			return true
		}
	}
	return false
}

// has reports whether set holds s or "*".
func has(set []string, s string) bool {
	for _, v := range set {
		if v == s || v == rbacv1.VerbAll {
			return true
		}
	}
	return false
}

// CompactString is a rule as kube-apiserver prints it in an escalation
// error: {APIGroups:["apps"], Resources:["deployments"], Verbs:["get" "list"]}.
func CompactString(r rbacv1.PolicyRule) string {
	var parts []string
	add := func(name string, vals []string) {
		if len(vals) > 0 {
			parts = append(parts, fmt.Sprintf("%s:%q", name, vals))
		}
	}
	add("APIGroups", r.APIGroups)
	add("Resources", r.Resources)
	add("NonResourceURLs", r.NonResourceURLs)
	add("ResourceNames", r.ResourceNames)
	add("Verbs", r.Verbs)
	return "{" + strings.Join(parts, ", ") + "}"
}
