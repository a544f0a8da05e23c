package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// benchUser is the user the RBAC round acts as (by impersonation): RBAC,
// not system:masters, authorizes each of its requests.
const benchUser = "bench-student"

// Policy sizes the RBAC round stores (issue 23): the figures of a busy
// classroom cluster.
const (
	policyClusterRoles = 100
	policyRoleBindings = 500
	policyNamespaces   = 50
)

// storePolicy stores ClusterRoles (with a ClusterRoleBinding each, to a
// service account, as charts ship them) up to policyClusterRoles in all,
// policyRoleBindings RoleBindings over policyNamespaces namespaces
// ("default" among them, 10 a namespace), and the bench user's binding
// to edit in "default"; then waits until the server authorizes the user.
func storePolicy(ctx context.Context, api *apiClient) error {
	post := func(path string, obj any) error {
		body, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		code, answer, err := api.do(ctx, http.MethodPost, path, "application/json", "application/json", body)
		if err != nil {
			return err
		}
		if code != http.StatusCreated {
			return fmt.Errorf("POST %s: %d %s", path, code, answer)
		}
		return nil
	}
	var roles struct {
		Items []json.RawMessage `json:"items"`
	}
	code, answer, err := api.get(ctx, "/apis/rbac.authorization.k8s.io/v1/clusterroles", "application/json")
	if err != nil || code != http.StatusOK || json.Unmarshal(answer, &roles) != nil {
		return fmt.Errorf("list ClusterRoles: %d %v", code, err)
	}
	rbac := "/apis/rbac.authorization.k8s.io/v1/"
	ref := func(kind, name string) map[string]string {
		return map[string]string{"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name}
	}
	for i := len(roles.Items); i < policyClusterRoles; i++ {
		name := fmt.Sprintf("chart-%d", i)
		if err := post(rbac+"clusterroles", map[string]any{"metadata": map[string]any{"name": name}, "rules": []any{
			map[string]any{"apiGroups": []string{"example.com"}, "resources": []string{fmt.Sprintf("widgets%d", i)}, "verbs": []string{"get", "list", "watch"}},
			map[string]any{"apiGroups": []string{""}, "resources": []string{"configmaps", "events"}, "verbs": []string{"create", "update"}},
		}}); err != nil {
			return err
		}
		if err := post(rbac+"clusterrolebindings", map[string]any{"metadata": map[string]any{"name": name}, "roleRef": ref("ClusterRole", name),
			"subjects": []any{map[string]string{"kind": "ServiceAccount", "name": "operator", "namespace": name}}}); err != nil {
			return err
		}
	}
	for n := range policyNamespaces {
		ns := "default"
		if n > 0 {
			ns = fmt.Sprintf("student-%d", n)
			if err := post("/api/v1/namespaces", map[string]any{"metadata": map[string]any{"name": ns}}); err != nil {
				return err
			}
		}
		for b := range policyRoleBindings / policyNamespaces {
			role := []string{"view", "edit", "admin"}[b%3]
			if err := post(rbac+"namespaces/"+ns+"/rolebindings", map[string]any{"metadata": map[string]any{"name": fmt.Sprintf("b%d", b)},
				"roleRef": ref("ClusterRole", role), "subjects": []any{map[string]string{"kind": "User", "name": fmt.Sprintf("%s-%d", ns, b)}}}); err != nil {
				return err
			}
		}
	}
	if err := post(rbac+"namespaces/default/rolebindings", map[string]any{"metadata": map[string]any{"name": benchUser},
		"roleRef": ref("ClusterRole", "edit"), "subjects": []any{map[string]string{"kind": "User", "name": benchUser}}}); err != nil {
		return err
	}
	as := *api
	as.impersonate = benchUser
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, _, err := as.get(ctx, podsPath+"?limit=1", "application/json")
		if err == nil && code == http.StatusOK {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s is not authorized to list pods 30 s after its binding: %d %v", benchUser, code, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
