package apiserver_test

import (
	"fmt"
	"testing"
)

// BenchmarkGetPodAuthorized: a GET of a pod through the whole handler as
// the administrator (system:masters) and as a user RBAC authorizes among
// 100 ClusterRoles (each bound) and 500 RoleBindings, the policy of make
// bench-api's RBAC round; impersonated as there, and with the user's own
// credential.
func BenchmarkGetPodAuthorized(b *testing.B) {
	e := newEnv(b)
	mustCode(b, e.admin(b, "POST", "/api/v1/namespaces/default/pods", podJSON("p", "a")), 201)
	rbac := "/apis/rbac.authorization.k8s.io/v1/"
	for i := range 100 {
		mustCode(b, e.admin(b, "POST", rbac+"clusterroles", fmt.Sprintf(`{"metadata":{"name":"chart-%d"},"rules":[{"apiGroups":["example.com"],"resources":["widgets%d"],"verbs":["get","list"]}]}`, i, i)), 201)
		mustCode(b, e.admin(b, "POST", rbac+"clusterrolebindings", fmt.Sprintf(`{"metadata":{"name":"chart-%d"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"chart-%d"},"subjects":[{"kind":"ServiceAccount","name":"chart-%d","namespace":"default"}]}`, i, i, i)), 201)
	}
	for i := range 50 {
		ns := fmt.Sprintf("team-%d", i)
		if i == 0 {
			ns = "default"
		} else {
			mustCode(b, e.admin(b, "POST", "/api/v1/namespaces", `{"metadata":{"name":"`+ns+`"}}`), 201)
		}
		for j := range 10 {
			mustCode(b, e.admin(b, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/"+ns+"/rolebindings",
				fmt.Sprintf(`{"metadata":{"name":"rb-%d"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"},"subjects":[{"kind":"User","name":"user-%d-%d"}]}`, j, i, j)), 201)
		}
	}
	mustCode(b, e.admin(b, "POST", rbac+"namespaces/default/rolebindings",
		`{"metadata":{"name":"nobody-edit"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"edit"},"subjects":[{"kind":"User","name":"nobody"}]}`), 201)
	eventually(b, "nobody may get pods", func() bool {
		return e.as(b, nobodyToken, "GET", "/api/v1/namespaces/default/pods/p", "").code == 200
	})
	for _, c := range []struct {
		name, token string
		header      []string
	}{
		{"admin", adminToken, nil},
		{"rbac", nobodyToken, nil},
		{"admin as rbac", adminToken, []string{"Impersonate-User", "nobody"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if r := e.as(b, c.token, "GET", "/api/v1/namespaces/default/pods/p", "", c.header...); r.code != 200 {
					b.Fatalf("%d %s", r.code, r)
				}
			}
		})
	}
}
