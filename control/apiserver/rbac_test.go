package apiserver_test

import (
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/isle-cluster/isle/control/authz"
)

const rbacPath = "/apis/rbac.authorization.k8s.io/v1/"

func binding(name, role, kind, subjectKind, subject string) string {
	return `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"` + name + `"},` +
		`"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"` + kind + `","name":"` + role + `"},` +
		`"subjects":[{"kind":"` + subjectKind + `","name":"` + subject + `"}]}`
}

// canI is a SelfSubjectAccessReview of token's user.
func (e *env) canI(t *testing.T, token, verb, resource, ns string) bool {
	t.Helper()
	resource, group, _ := strings.Cut(resource, ".")
	body := `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"resourceAttributes":{"verb":"` + verb +
		`","group":"` + group + `","resource":"` + resource + `","namespace":"` + ns + `"}}}`
	var got authorizationv1.SelfSubjectAccessReview
	mustCode(t, e.as(t, token, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body), 201).decode(t, &got)
	return got.Status.Allowed
}

// TestRBAC enforces RBAC for users who are neither administrators nor
// nodes: the bootstrap policy, bindings in a namespace, the review APIs,
// escalation prevention and impersonation.
func TestRBAC(t *testing.T) {
	e := newEnv(t)
	for _, ns := range []string{"team", "other"} {
		mustCode(t, e.admin(t, "POST", "/api/v1/namespaces", `{"metadata":{"name":"`+ns+`"}}`), 201)
	}
	// The bootstrap policy: discovery and the self reviews for everyone.
	mustCode(t, e.as(t, nobodyToken, "GET", "/api", ""), 200)
	mustCode(t, e.as(t, nobodyToken, "GET", "/apis/apps/v1", ""), 200)
	if st := mustCode(t, e.as(t, nobodyToken, "GET", "/metrics", ""), 403).status(t); st.Message != `forbidden: User "nobody" cannot get path "/metrics"` {
		t.Errorf("/metrics: %q", st.Message)
	}
	st := mustCode(t, e.as(t, nobodyToken, "GET", "/api/v1/namespaces/team/pods", ""), 403).status(t)
	if st.Message != `pods is forbidden: User "nobody" cannot list resource "pods" in API group "" in the namespace "team"` {
		t.Errorf("403: %q", st.Message)
	}
	if e.canI(t, nobodyToken, "list", "pods", "team") {
		t.Fatal("nobody may list pods before any binding")
	}

	// nobody is an admin of team.
	mustCode(t, e.admin(t, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/team/rolebindings", binding("nobody-admin", "admin", "ClusterRole", "User", "nobody")), 201)
	eventually(t, "nobody may list pods in team", func() bool { return e.canI(t, nobodyToken, "list", "pods", "team") })
	mustCode(t, e.as(t, nobodyToken, "GET", "/api/v1/namespaces/team/pods", ""), 200)
	mustCode(t, e.as(t, nobodyToken, "GET", "/api/v1/namespaces/other/pods", ""), 403)
	mustCode(t, e.as(t, nobodyToken, "GET", "/api/v1/pods", ""), 403)
	for _, c := range []struct {
		verb, resource, ns string
		want               bool
	}{
		{"create", "deployments.apps", "team", true},
		{"delete", "secrets", "team", true},
		{"create", "rolebindings.rbac.authorization.k8s.io", "team", true},
		{"list", "nodes", "", false},
		{"create", "deployments.apps", "other", false},
		{"create", "clusterroles.rbac.authorization.k8s.io", "", false},
	} {
		if got := e.canI(t, nobodyToken, c.verb, c.resource, c.ns); got != c.want {
			t.Errorf("nobody can-i %s %s in %q: %v, want %v", c.verb, c.resource, c.ns, got, c.want)
		}
	}

	// --list: the rules nobody holds in team.
	var rr authorizationv1.SelfSubjectRulesReview
	mustCode(t, e.as(t, nobodyToken, "POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
		`{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectRulesReview","spec":{"namespace":"team"}}`), 201).decode(t, &rr)
	if !slices.ContainsFunc(rr.Status.ResourceRules, func(r authorizationv1.ResourceRule) bool {
		return slices.Contains(r.Resources, "roles") && slices.Contains(r.Verbs, "create")
	}) || !slices.ContainsFunc(rr.Status.NonResourceRules, func(r authorizationv1.NonResourceRule) bool { return slices.Contains(r.NonResourceURLs, "/api") }) || rr.Status.Incomplete {
		t.Errorf("rules of nobody in team: %+v", rr.Status)
	}

	// SubjectAccessReview: an administrator asks about nobody; nobody may
	// not ask about others.
	sar := `{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"nobody","resourceAttributes":{"verb":"get","resource":"pods","namespace":"team"}}}`
	var sr authorizationv1.SubjectAccessReview
	mustCode(t, e.admin(t, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", sar), 201).decode(t, &sr)
	if !sr.Status.Allowed {
		t.Errorf("SubjectAccessReview: %+v", sr.Status)
	}
	mustCode(t, e.as(t, nobodyToken, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", sar), 403)
	mustCode(t, e.admin(t, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews",
		`{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"resourceAttributes":{"verb":"get"}}}`), 422)
	// LocalSubjectAccessReview: admin of team may ask in team.
	lsar := `{"apiVersion":"authorization.k8s.io/v1","kind":"LocalSubjectAccessReview","metadata":{"namespace":"team"},"spec":{"user":"someone","resourceAttributes":{"verb":"get","resource":"pods","namespace":"team"}}}`
	var lr authorizationv1.LocalSubjectAccessReview
	mustCode(t, e.as(t, nobodyToken, "POST", "/apis/authorization.k8s.io/v1/namespaces/team/localsubjectaccessreviews", lsar), 201).decode(t, &lr)
	if lr.Status.Allowed {
		t.Errorf("someone may get pods in team: %+v", lr.Status)
	}
	mustCode(t, e.as(t, nobodyToken, "POST", "/apis/authorization.k8s.io/v1/namespaces/other/localsubjectaccessreviews", strings.ReplaceAll(lsar, "team", "other")), 403)

	// Escalation: nobody may grant what nobody holds, no more.
	role := func(name, rules string) string {
		return `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"` + name + `"},"rules":` + rules + `}`
	}
	mustCode(t, e.as(t, nobodyToken, "POST", rbacPath+"namespaces/team/roles", role("reader", `[{"apiGroups":[""],"resources":["pods"],"verbs":["get","list"]}]`)), 201)
	st = mustCode(t, e.as(t, nobodyToken, "POST", rbacPath+"namespaces/team/roles", role("noder", `[{"apiGroups":[""],"resources":["nodes"],"verbs":["get"]}]`)), 403).status(t)
	if !strings.Contains(st.Message, `roles.rbac.authorization.k8s.io "noder" is forbidden: user "nobody" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:`) ||
		!strings.Contains(st.Message, `{APIGroups:[""], Resources:["nodes"], Verbs:["get"]}`) {
		t.Errorf("escalating Role: %q", st.Message)
	}
	mustCode(t, e.as(t, nobodyToken, "POST", rbacPath+"namespaces/team/rolebindings", binding("b-edit", "edit", "ClusterRole", "User", "alice")), 201)
	mustCode(t, e.as(t, nobodyToken, "POST", rbacPath+"namespaces/team/rolebindings", binding("b-reader", "reader", "Role", "Group", "students")), 201)
	st = mustCode(t, e.as(t, nobodyToken, "POST", rbacPath+"namespaces/team/rolebindings", binding("b-root", "cluster-admin", "ClusterRole", "User", "alice")), 403).status(t)
	if !strings.Contains(st.Message, `rolebindings.rbac.authorization.k8s.io "b-root" is forbidden: user "nobody"`) {
		t.Errorf("escalating binding: %q", st.Message)
	}
	// The bind verb on cluster-admin lets nobody bind it anyway.
	mustCode(t, e.admin(t, "POST", rbacPath+"clusterroles", `{"metadata":{"name":"bind-root"},"rules":[{"apiGroups":["rbac.authorization.k8s.io"],"resources":["clusterroles"],"resourceNames":["cluster-admin"],"verbs":["bind"]}]}`), 201)
	mustCode(t, e.admin(t, "POST", rbacPath+"namespaces/team/rolebindings", binding("nobody-bind", "bind-root", "ClusterRole", "User", "nobody")), 201)
	eventually(t, "nobody may bind cluster-admin in team", func() bool {
		return e.as(t, nobodyToken, "POST", rbacPath+"namespaces/team/rolebindings", binding("b-root", "cluster-admin", "ClusterRole", "User", "alice")).code == 201
	})

	// Impersonation: an administrator acts as nobody; nobody may not act
	// as anyone.
	r := mustCode(t, e.admin(t, "GET", "/api/v1/namespaces/other/pods", "", "Impersonate-User", "nobody"), 403)
	if !strings.Contains(r.status(t).Message, `User "nobody" cannot list`) {
		t.Errorf("impersonated: %s", r)
	}
	mustCode(t, e.admin(t, "GET", "/api/v1/namespaces/team/pods", "", "Impersonate-User", "nobody"), 200)
	r = mustCode(t, e.as(t, nobodyToken, "GET", "/api/v1/namespaces/team/pods", "", "Impersonate-User", "admin"), 403)
	if msg := r.status(t).Message; msg != `users "admin" is forbidden: User "nobody" cannot impersonate resource "users" in API group "" at the cluster scope` {
		t.Errorf("impersonation refused: %q", msg)
	}
	mustCode(t, e.as(t, nobodyToken, "GET", "/api/v1/namespaces/team/pods", "", "Impersonate-Group", "system:masters"), 400)
	var who struct {
		Status struct {
			UserInfo struct {
				Username string   `json:"username"`
				Groups   []string `json:"groups"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	mustCode(t, e.admin(t, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", `{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`,
		"Impersonate-User", "system:serviceaccount:team:bot"), 201).decode(t, &who)
	if who.Status.UserInfo.Username != "system:serviceaccount:team:bot" ||
		!slices.Equal(who.Status.UserInfo.Groups, []string{"system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"}) {
		t.Errorf("whoami as a service account: %+v", who.Status.UserInfo)
	}

	// An administrator's aggregated ClusterRole; nobody may not make one.
	mustCode(t, e.admin(t, "POST", rbacPath+"clusterrolebindings", `{"metadata":{"name":"nobody-roles"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"crwriter"},"subjects":[{"kind":"User","name":"nobody"}]}`), 201)
	mustCode(t, e.admin(t, "POST", rbacPath+"clusterroles", `{"metadata":{"name":"crwriter"},"rules":[{"apiGroups":["rbac.authorization.k8s.io"],"resources":["clusterroles"],"verbs":["create"]}]}`), 201)
	eventually(t, "nobody may create ClusterRoles", func() bool { return e.canI(t, nobodyToken, "create", "clusterroles.rbac.authorization.k8s.io", "") })
	st = mustCode(t, e.as(t, nobodyToken, "POST", rbacPath+"clusterroles", `{"metadata":{"name":"agg"},"aggregationRule":{"clusterRoleSelectors":[{"matchLabels":{"x":"y"}}]}}`), 403).status(t)
	if !strings.Contains(st.Message, "must have cluster-admin privileges to use the aggregationRule") {
		t.Errorf("aggregationRule: %q", st.Message)
	}
}

// TestBootstrapPolicy: the policy is in the store, a rule a user removed
// comes back at the next start, and autoupdate=false keeps a change.
func TestBootstrapPolicy(t *testing.T) {
	e := newEnv(t)
	var view rbacv1.ClusterRole
	mustCode(t, e.admin(t, "GET", rbacPath+"clusterroles/system:aggregate-to-view", ""), 200).decode(t, &view)
	if view.Labels["rbac.authorization.k8s.io/aggregate-to-view"] != "true" || view.Annotations["rbac.authorization.kubernetes.io/autoupdate"] != "true" || len(view.Rules) < 5 {
		t.Errorf("system:aggregate-to-view: %+v", view.ObjectMeta)
	}
	var crb rbacv1.ClusterRoleBinding
	mustCode(t, e.admin(t, "GET", rbacPath+"clusterrolebindings/cluster-admin", ""), 200).decode(t, &crb)
	if len(crb.Subjects) != 1 || crb.Subjects[0].Name != "system:masters" {
		t.Errorf("cluster-admin binding: %+v", crb)
	}
	for _, name := range []string{"cluster-admin", "admin", "edit", "view", "system:basic-user", "system:discovery", "system:public-info-viewer"} {
		mustCode(t, e.admin(t, "GET", rbacPath+"clusterroles/"+name, ""), 200)
	}
	// A user trims two roles, one of them marked to be kept as it is.
	merge := []string{"Content-Type", "application/merge-patch+json"}
	mustCode(t, e.admin(t, "PATCH", rbacPath+"clusterroles/system:basic-user", `{"rules":[]}`, merge...), 200)
	mustCode(t, e.admin(t, "PATCH", rbacPath+"clusterroles/system:discovery",
		`{"metadata":{"annotations":{"rbac.authorization.kubernetes.io/autoupdate":"false"}},"rules":[{"verbs":["get"],"nonResourceURLs":["/version"]}]}`, merge...), 200)
	mustCode(t, e.admin(t, "PATCH", rbacPath+"clusterrolebindings/system:basic-user", `{"subjects":[{"kind":"Group","apiGroup":"rbac.authorization.k8s.io","name":"students"}]}`, merge...), 200)
	if err := authz.Reconcile(e.ctx, e.store); err != nil {
		t.Fatal(err)
	}
	var basic, discovery rbacv1.ClusterRole
	mustCode(t, e.admin(t, "GET", rbacPath+"clusterroles/system:basic-user", ""), 200).decode(t, &basic)
	mustCode(t, e.admin(t, "GET", rbacPath+"clusterroles/system:discovery", ""), 200).decode(t, &discovery)
	if len(basic.Rules) == 0 || len(discovery.Rules) != 1 {
		t.Errorf("after a restart: system:basic-user's rules %v (want them back), system:discovery's %v (want the user's)", basic.Rules, discovery.Rules)
	}
	mustCode(t, e.admin(t, "GET", rbacPath+"clusterrolebindings/system:basic-user", ""), 200).decode(t, &crb)
	if len(crb.Subjects) != 2 {
		t.Errorf("system:basic-user binding after a restart: %v, want the user's subject and system:authenticated", crb.Subjects)
	}
}
