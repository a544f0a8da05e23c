package authz

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-helpers/auth/rbac/validation"
)

// fullAuthority is what the aggregationRule of a ClusterRole needs, as it
// can gather anything: every verb on every resource and URL.
var fullAuthority = []rbacv1.PolicyRule{
	{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
	{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
}

// AdmitRBAC is kube-apiserver's escalation prevention for a write of an
// RBAC object by u (old is nil for a create): a role may only hold rules
// its writer holds, unless the writer may "escalate" it; a binding may only
// grant a role whose rules its writer holds, unless the writer may "bind"
// it; an aggregationRule needs every right. system:masters may write
// anything, and so may anyone a change of owners or finalizers alone.
func (c *Chain) AdmitRBAC(u *User, obj, old runtime.Object) error {
	if u.InGroup(GroupMasters) {
		return nil
	}
	if old != nil && onlyGCFieldsChanged(obj, old) {
		return nil
	}
	switch o := obj.(type) {
	case *rbacv1.Role:
		if c.may(u, "escalate", "roles", o.Namespace, o.Name) {
			return nil
		}
		return forbidden("roles", o.Name, c.confirmNoEscalation(u, o.Namespace, o.Rules))
	case *rbacv1.ClusterRole:
		if c.may(u, "escalate", "clusterroles", "", o.Name) {
			return nil
		}
		if err := c.confirmNoEscalation(u, "", o.Rules); err != nil {
			return forbidden("clusterroles", o.Name, err)
		}
		hadRule := false
		if prev, ok := old.(*rbacv1.ClusterRole); ok && prev.AggregationRule != nil {
			hadRule = true
		}
		if o.AggregationRule != nil || hadRule {
			if c.confirmNoEscalation(u, "", fullAuthority) != nil {
				return forbidden("clusterroles", o.Name, errors.New("must have cluster-admin privileges to use the aggregationRule"))
			}
		}
		return nil
	case *rbacv1.RoleBinding:
		return c.admitBinding(u, "rolebindings", o.Name, o.Namespace, o.RoleRef)
	case *rbacv1.ClusterRoleBinding:
		return c.admitBinding(u, "clusterrolebindings", o.Name, "", o.RoleRef)
	}
	return nil
}

func (c *Chain) admitBinding(u *User, resource, name, namespace string, roleRef rbacv1.RoleRef) error {
	refResource := "clusterroles"
	if roleRef.Kind == "Role" {
		refResource = "roles"
	}
	if c.may(u, "bind", refResource, namespace, roleRef.Name) {
		return nil
	}
	rules, err := c.RBAC.Index.roleRules(roleRef, namespace)
	if err != nil {
		return err
	}
	return forbidden(resource, name, c.confirmNoEscalation(u, namespace, rules))
}

// may reports whether the chain lets u do verb on the RBAC resource name.
func (c *Chain) may(u *User, verb, resource, namespace, name string) bool {
	d, _ := c.Authorize(Attributes{User: u, Verb: verb, ResourceRequest: true, APIGroup: rbacv1.GroupName,
		APIVersion: "v1", Resource: resource, Namespace: namespace, Name: name})
	return d == Allow
}

// roleRules are the rules of the role a binding in namespace refers to.
func (x *Index) roleRules(roleRef rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if roleRef.Kind == "Role" {
		if r := x.roles[namespace][roleRef.Name]; r != nil {
			return r.Rules, nil
		}
		return nil, apierrors.NewNotFound(rbacv1.Resource("roles"), roleRef.Name)
	}
	if r := x.clusterRoles[roleRef.Name]; r != nil {
		return r.Rules, nil
	}
	return nil, apierrors.NewNotFound(rbacv1.Resource("clusterroles"), roleRef.Name)
}

// confirmNoEscalation is nil if u holds every rule in namespace, and
// otherwise names the rules u lacks, as kube-apiserver does.
func (c *Chain) confirmNoEscalation(u *User, namespace string, rules []rbacv1.PolicyRule) error {
	owned := c.RBAC.Index.RulesFor(u, namespace)
	ok, missing := validation.Covers(owned, rules)
	if ok {
		return nil
	}
	lines := make([]string, 0, len(missing))
	for _, r := range missing {
		lines = append(lines, CompactString(r))
	}
	slices.Sort(lines)
	lines = slices.Compact(lines)
	return fmt.Errorf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s",
		u.Name, u.Groups, strings.Join(lines, "\n"))
}

func forbidden(resource, name string, err error) error {
	if err == nil {
		return nil
	}
	return apierrors.NewForbidden(rbacv1.Resource(resource), name, err)
}

// onlyGCFieldsChanged reports whether obj differs from old in its owner
// references and finalizers alone (the garbage collector's writes).
func onlyGCFieldsChanged(obj, old runtime.Object) bool {
	a, b := obj.DeepCopyObject(), old.DeepCopyObject()
	for _, o := range []runtime.Object{a, b} {
		m := o.(metav1.Object)
		m.SetOwnerReferences(nil)
		m.SetFinalizers(nil)
		m.SetResourceVersion("")
		m.SetManagedFields(nil)
	}
	return equality.Semantic.DeepEqual(a, b)
}
