package authz

import (
	"context"
	"errors"
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-helpers/auth/rbac/validation"

	"github.com/isle-cluster/isle/control/registry"
)

// The bootstrap policy: the ClusterRoles and ClusterRoleBindings
// kube-apiserver creates at start (its bootstrappolicy), for what a
// Kubernetes user expects to find: cluster-admin for system:masters, the
// user-facing admin, edit and view with their aggregation labels, and the
// roles every authenticated (or anonymous) user holds. isle's own parts
// need none: its controllers run inside the API server and its boards use
// the Node authorizer.

// Labels and annotations of the bootstrap policy, as upstream's.
const (
	labelBootstrapping   = "kubernetes.io/bootstrapping"
	bootstrappingDefault = "rbac-defaults"
	// AnnotationAutoupdate "false" on a bootstrap object keeps it as its
	// owner changed it: it is not reconciled at start.
	AnnotationAutoupdate = "rbac.authorization.kubernetes.io/autoupdate"
	aggregateToAdmin     = "rbac.authorization.k8s.io/aggregate-to-admin"
	aggregateToEdit      = "rbac.authorization.k8s.io/aggregate-to-edit"
	aggregateToView      = "rbac.authorization.k8s.io/aggregate-to-view"
)

var (
	readVerbs  = []string{"get", "list", "watch"}
	writeVerbs = []string{"create", "delete", "deletecollection", "patch", "update"}
	allVerbs   = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
)

func rule(verbs []string, group string, resources ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, APIGroups: []string{group}, Resources: resources}
}

func urls(verbs []string, paths ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, NonResourceURLs: paths}
}

func clusterRole(name string, labels map[string]string, rules ...rbacv1.PolicyRule) rbacv1.ClusterRole {
	l := map[string]string{labelBootstrapping: bootstrappingDefault}
	for k, v := range labels {
		l[k] = v
	}
	return rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l,
		Annotations: map[string]string{AnnotationAutoupdate: "true"}}, Rules: rules}
}

func aggregated(name, selectLabel string, labels map[string]string) rbacv1.ClusterRole {
	r := clusterRole(name, labels)
	r.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{selectLabel: "true"}}}}
	return r
}

// BootstrapClusterRoles are the bootstrap policy's ClusterRoles.
func BootstrapClusterRoles() []rbacv1.ClusterRole {
	get := []string{"get"}
	create := []string{"create"}
	return []rbacv1.ClusterRole{
		clusterRole("cluster-admin", nil,
			rule([]string{"*"}, "*", "*"), urls([]string{"*"}, "*")),
		clusterRole("system:discovery", nil,
			urls(get, "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/")),
		clusterRole("system:public-info-viewer", nil,
			urls(get, "/healthz", "/livez", "/readyz", "/version", "/version/")),
		clusterRole("system:basic-user", nil,
			rule(create, "authorization.k8s.io", "selfsubjectaccessreviews", "selfsubjectrulesreviews"),
			rule(create, "authentication.k8s.io", "selfsubjectreviews")),
		clusterRole("system:monitoring", nil,
			urls(get, "/metrics", "/metrics/slis", "/livez", "/readyz", "/healthz", "/livez/*", "/readyz/*", "/healthz/*")),
		clusterRole("system:service-account-issuer-discovery", nil,
			urls(get, "/.well-known/openid-configuration", "/.well-known/openid-configuration/", "/openid/v1/jwks", "/openid/v1/jwks/")),
		// isle's own: the island's map, a page that shows what its user
		// may list (package islemap).
		clusterRole("isle:map-viewer", nil, urls(get, "/isle/map", "/isle/map/*")),
		clusterRole("system:auth-delegator", nil,
			rule(create, "authentication.k8s.io", "tokenreviews"),
			rule(create, "authorization.k8s.io", "subjectaccessreviews")),
		aggregated("admin", aggregateToAdmin, nil),
		aggregated("edit", aggregateToEdit, map[string]string{aggregateToAdmin: "true"}),
		aggregated("view", aggregateToView, map[string]string{aggregateToEdit: "true"}),
		clusterRole("system:aggregate-to-admin", map[string]string{aggregateToAdmin: "true"},
			rule(create, "authorization.k8s.io", "localsubjectaccessreviews"),
			rule(allVerbs, rbacv1.GroupName, "rolebindings", "roles")),
		clusterRole("system:aggregate-to-edit", map[string]string{aggregateToEdit: "true"},
			rule([]string{"impersonate"}, "", "serviceaccounts"),
			rule(writeVerbs, "", "pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"),
			rule(create, "", "pods/eviction"),
			rule(writeVerbs, "", "configmaps", "events", "persistentvolumeclaims", "replicationcontrollers",
				"replicationcontrollers/scale", "secrets", "serviceaccounts", "services", "services/proxy"),
			rule(create, "", "serviceaccounts/token"),
			rule(writeVerbs, "apps", "daemonsets", "deployments", "deployments/rollback", "deployments/scale",
				"replicasets", "replicasets/scale", "statefulsets", "statefulsets/scale"),
			rule(writeVerbs, "autoscaling", "horizontalpodautoscalers"),
			rule(writeVerbs, "batch", "cronjobs", "jobs"),
			rule(writeVerbs, "policy", "poddisruptionbudgets"),
			rule(writeVerbs, "networking.k8s.io", "ingresses", "networkpolicies"),
			rule(readVerbs, "", "secrets", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "services/proxy")),
		clusterRole("system:aggregate-to-view", map[string]string{aggregateToView: "true"},
			rule(readVerbs, "", "configmaps", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "pods",
				"replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "services", "services/status"),
			rule(readVerbs, "", "bindings", "events", "limitranges", "namespaces/status", "pods/log", "pods/status",
				"replicationcontrollers/status", "resourcequotas", "resourcequotas/status"),
			rule(readVerbs, "", "namespaces"),
			rule(readVerbs, "discovery.k8s.io", "endpointslices"),
			rule(readVerbs, "apps", "controllerrevisions", "daemonsets", "daemonsets/status", "deployments", "deployments/scale",
				"deployments/status", "replicasets", "replicasets/scale", "replicasets/status", "statefulsets",
				"statefulsets/scale", "statefulsets/status"),
			rule(readVerbs, "autoscaling", "horizontalpodautoscalers", "horizontalpodautoscalers/status"),
			rule(readVerbs, "batch", "cronjobs", "cronjobs/status", "jobs", "jobs/status"),
			rule(readVerbs, "policy", "poddisruptionbudgets", "poddisruptionbudgets/status"),
			rule(readVerbs, "networking.k8s.io", "ingresses", "ingresses/status", "networkpolicies")),
	}
}

func clusterRoleBinding(name, role string, subjects ...rbacv1.Subject) rbacv1.ClusterRoleBinding {
	return rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels:      map[string]string{labelBootstrapping: bootstrappingDefault},
		Annotations: map[string]string{AnnotationAutoupdate: "true"}},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}, Subjects: subjects}
}

func group(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
}

// BootstrapClusterRoleBindings are the bootstrap policy's bindings.
func BootstrapClusterRoleBindings() []rbacv1.ClusterRoleBinding {
	return []rbacv1.ClusterRoleBinding{
		clusterRoleBinding("cluster-admin", "cluster-admin", group(GroupMasters)),
		clusterRoleBinding("system:discovery", "system:discovery", group(GroupAuthenticated)),
		clusterRoleBinding("system:basic-user", "system:basic-user", group(GroupAuthenticated)),
		clusterRoleBinding("system:public-info-viewer", "system:public-info-viewer", group(GroupAuthenticated), group(GroupUnauthenticated)),
		clusterRoleBinding("system:monitoring", "system:monitoring", group("system:monitoring")),
		clusterRoleBinding("isle:map-viewer", "isle:map-viewer", group(GroupAuthenticated)),
		clusterRoleBinding("system:service-account-issuer-discovery", "system:service-account-issuer-discovery", group(GroupServiceAccounts)),
	}
}

// Reconcile writes the bootstrap policy into the store as kube-apiserver
// does at start: what is missing is created; a role that lacks rules of
// the policy gets them, a binding that lacks subjects gets them, and what
// a user added stays; an object annotated autoupdate=false is left alone.
func Reconcile(ctx context.Context, store *registry.Store) error {
	crRes, _ := store.Resources().Lookup(rbacv1.SchemeGroupVersion.WithResource("clusterroles"))
	crbRes, _ := store.Resources().Lookup(rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings"))
	var errs []error
	for _, r := range BootstrapClusterRoles() {
		err := reconcileOne(ctx, store, crRes, &r, func(obj runtime.Object) bool {
			have := obj.(*rbacv1.ClusterRole)
			changed := false
			if covered, missing := validation.Covers(have.Rules, r.Rules); !covered {
				have.Rules, changed = append(have.Rules, missing...), true
			}
			if r.AggregationRule != nil {
				if have.AggregationRule == nil {
					have.AggregationRule, changed = &rbacv1.AggregationRule{}, true
				}
				for _, sel := range r.AggregationRule.ClusterRoleSelectors {
					if !slices.ContainsFunc(have.AggregationRule.ClusterRoleSelectors, func(s metav1.LabelSelector) bool { return equality.Semantic.DeepEqual(s, sel) }) {
						have.AggregationRule.ClusterRoleSelectors, changed = append(have.AggregationRule.ClusterRoleSelectors, sel), true
					}
				}
			}
			return mergeMeta(&have.ObjectMeta, &r.ObjectMeta) || changed
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("ClusterRole %s: %w", r.Name, err))
		}
	}
	for _, b := range BootstrapClusterRoleBindings() {
		err := reconcileOne(ctx, store, crbRes, &b, func(obj runtime.Object) bool {
			have := obj.(*rbacv1.ClusterRoleBinding)
			changed := false
			for _, sub := range b.Subjects {
				if !slices.Contains(have.Subjects, sub) {
					have.Subjects, changed = append(have.Subjects, sub), true
				}
			}
			return mergeMeta(&have.ObjectMeta, &b.ObjectMeta) || changed
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("ClusterRoleBinding %s: %w", b.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("authz: bootstrap policy: %w", err)
	}
	return nil
}

// reconcileOne creates want, or lets add put into the stored object what
// it lacks of want (add reports whether it changed anything), unless the
// stored one says autoupdate=false.
func reconcileOne(ctx context.Context, store *registry.Store, res *registry.Resource, want metav1.Object, add func(runtime.Object) bool) error {
	for attempt := 0; ; attempt++ {
		obj, err := store.Get(ctx, res, "", want.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = store.Create(ctx, res, "", want.(runtime.Object).DeepCopyObject(), registry.WriteOptions{})
		} else if err == nil {
			if obj.(metav1.Object).GetAnnotations()[AnnotationAutoupdate] == "false" || !add(obj) {
				return nil
			}
			_, err = store.Update(ctx, res, "", want.GetName(), "", obj, registry.WriteOptions{})
		}
		if (apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) || apierrors.IsNotFound(err)) && attempt < 3 {
			continue
		}
		return err
	}
}

// mergeMeta adds to have the labels and annotations of want it lacks.
func mergeMeta(have, want *metav1.ObjectMeta) bool {
	changed := false
	for k, v := range want.Labels {
		if _, ok := have.Labels[k]; !ok {
			metav1.SetMetaDataLabel(have, k, v)
			changed = true
		}
	}
	for k, v := range want.Annotations {
		if _, ok := have.Annotations[k]; !ok {
			metav1.SetMetaDataAnnotation(have, k, v)
			changed = true
		}
	}
	return changed
}
