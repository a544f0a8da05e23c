package authz

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRuleAllows(t *testing.T) {
	res := func(verb, group, resource, sub, name string) Attributes {
		return Attributes{Verb: verb, ResourceRequest: true, APIGroup: group, Resource: resource, Subresource: sub, Name: name}
	}
	path := func(verb, p string) Attributes { return Attributes{Verb: verb, Path: p} }
	pods := rbacv1.PolicyRule{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	tests := []struct {
		name string
		rule rbacv1.PolicyRule
		a    Attributes
		want bool
	}{
		{"verb and resource", pods, res("get", "", "pods", "", "x"), true},
		{"other verb", pods, res("delete", "", "pods", "", "x"), false},
		{"other group", pods, res("get", "apps", "pods", "", "x"), false},
		{"a subresource is not the resource", pods, res("get", "", "pods", "log", "x"), false},
		{"resource/subresource", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods/log"}}, res("get", "", "pods", "log", "x"), true},
		{"*/subresource", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"*"}, Resources: []string{"*/scale"}}, res("get", "apps", "deployments", "scale", ""), true},
		{"*/subresource is no resource", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"*"}, Resources: []string{"*/scale"}}, res("get", "apps", "deployments", "", ""), false},
		{"all", rbacv1.PolicyRule{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}, res("escalate", "rbac.authorization.k8s.io", "roles", "", "r"), true},
		{"names", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"a"}}, res("get", "", "secrets", "", "a"), true},
		{"other name", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"a"}}, res("get", "", "secrets", "", "b"), false},
		{"names never allow a list of all", rbacv1.PolicyRule{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"a"}}, res("list", "", "secrets", "", ""), false},
		{"a resource rule is no path rule", pods, path("get", "/api"), false},
		{"path", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/api"}}, path("get", "/api"), true},
		{"path prefix", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/apis/*"}}, path("get", "/apis/apps/v1"), true},
		{"path prefix is not the parent", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/apis/*"}}, path("get", "/apis"), false},
		{"path other verb", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"*"}}, path("post", "/metrics"), false},
		{"a path rule is no resource rule", rbacv1.PolicyRule{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}, res("get", "", "pods", "", ""), false},
	}
	for _, tc := range tests {
		if got := RuleAllows(&tc.a, &tc.rule); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestAppliesTo(t *testing.T) {
	sa := &User{Name: "system:serviceaccount:team:bot", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:team"}}
	alice := &User{Name: "alice", Groups: []string{"students"}}
	tests := []struct {
		u        *User
		subjects []rbacv1.Subject
		ns       string
		want     bool
	}{
		{alice, []rbacv1.Subject{{Kind: "User", Name: "alice"}}, "", true},
		{alice, []rbacv1.Subject{{Kind: "User", Name: "bob"}, {Kind: "Group", Name: "students"}}, "", true},
		{alice, []rbacv1.Subject{{Kind: "Group", Name: "teachers"}}, "", false},
		{sa, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "bot"}}, "team", true},
		{sa, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "bot"}}, "other", false},
		{sa, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "bot"}}, "", false},
		{sa, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "bot", Namespace: "team"}}, "", true},
		{sa, []rbacv1.Subject{{Kind: "Group", Name: "system:serviceaccounts:team"}}, "", true},
	}
	for i, tc := range tests {
		if got := appliesTo(tc.u, tc.subjects, tc.ns); got != tc.want {
			t.Errorf("%d: %s %v in %q: %v, want %v", i, tc.u.Name, tc.subjects, tc.ns, got, tc.want)
		}
	}
}

func TestPodRefs(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{
		NodeName:         "n",
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull"}},
		Volumes: []corev1.Volume{
			{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "vol"}}},
			{Name: "c", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}},
			{Name: "d", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "claim"}}},
			{Name: "e", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
			{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "psec"}}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}},
			}}}},
		},
		InitContainers: []corev1.Container{{Name: "i", EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "initenv"}}}}}},
		Containers: []corev1.Container{{Name: "c", Env: []corev1.EnvVar{
			{Name: "A", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "envcm"}, Key: "k"}}},
			{Name: "B", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "vol"}, Key: "k"}}},
		}}},
	}}
	var got []string
	for _, r := range podRefsOf(p).refs {
		got = append(got, []string{"secret", "configmap", "claim", "serviceaccount"}[r.kind]+":"+r.namespace+"/"+r.name)
	}
	slices.Sort(got)
	want := []string{"claim:ns/claim", "claim:ns/p-e", "configmap:ns/cm", "configmap:ns/envcm", "configmap:ns/kube-root-ca.crt",
		"secret:ns/initenv", "secret:ns/psec", "secret:ns/pull", "secret:ns/vol", "serviceaccount:ns/default"}
	if !slices.Equal(got, want) {
		t.Errorf("refs %v\nwant %v", got, want)
	}
}

// TestAdmitNode is NodeRestriction's table.
func TestAdmitNode(t *testing.T) {
	n := &NodeAuthorizer{IsServer: func(name string) bool { return name == "srv" }}
	node := func(name string, labels map[string]string, cidr string, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{PodCIDR: cidr, Taints: taints}}
	}
	as := func(name string) *User { return &User{Name: NodeUserPrefix + name, Groups: []string{GroupNodes}} }
	admin := corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name     string
		u        *User
		obj, old *corev1.Node
		err      string
	}{
		{"create with its labels", as("a"), node("a", map[string]string{"kubernetes.io/hostname": "a", "kubernetes.io/arch": "arm64", "isle.dev/role": "agent", "topology.kubernetes.io/zone": "shelf", "node.kubernetes.io/instance-type": "pi4"}, ""), nil, ""},
		{"create with another's hostname", as("a"), node("a", map[string]string{"kubernetes.io/hostname": "b"}, ""), nil, "kubernetes.io/hostname to its own name"},
		{"create with a restricted label", as("a"), node("a", map[string]string{"node-restriction.kubernetes.io/pool": "x"}, ""), nil, "not allowed to set the following labels: node-restriction.kubernetes.io/pool"},
		{"create with a k8s.io label", as("a"), node("a", map[string]string{"example.k8s.io/x": "y"}, ""), nil, "example.k8s.io/x"},
		{"create with a pod CIDR", as("a"), node("a", nil, "10.42.1.0/24"), nil, "pod CIDR"},
		{"create as control plane", as("a"), node("a", map[string]string{"node-role.kubernetes.io/control-plane": ""}, ""), nil, "not a server"},
		{"a server creates as control plane", as("srv"), node("srv", map[string]string{"node-role.kubernetes.io/control-plane": "", "isle.dev/role": "server"}, ""), nil, ""},
		{"create with taints", as("a"), node("a", nil, "", admin), nil, ""},
		{"update keeping what the control plane set", as("a"), node("a", map[string]string{"x": "y"}, "10.42.1.0/24", admin), node("a", nil, "10.42.1.0/24", admin), ""},
		{"update a restricted label the administrator set", as("a"), node("a", nil, ""), node("a", map[string]string{"node-restriction.kubernetes.io/pool": "x"}, ""), "not allowed to modify labels: node-restriction.kubernetes.io/pool"},
		{"keep a restricted label", as("a"), node("a", map[string]string{"node-restriction.kubernetes.io/pool": "x", "y": "z"}, ""), node("a", map[string]string{"node-restriction.kubernetes.io/pool": "x"}, ""), ""},
		{"remove a taint", as("a"), node("a", nil, ""), node("a", nil, "", admin), "not allowed to modify taints"},
		{"change the pod CIDR", as("a"), node("a", nil, "10.42.2.0/24"), node("a", nil, "10.42.1.0/24"), "pod CIDR"},
		{"a server it was stays", as("a"), node("a", map[string]string{"isle.dev/role": "server", "z": "1"}, ""), node("a", map[string]string{"isle.dev/role": "server"}, ""), ""},
		{"an administrator", &User{Name: "root", Groups: []string{GroupMasters}}, node("a", map[string]string{"node-restriction.kubernetes.io/pool": "x"}, "10.42.9.0/24"), node("a", nil, ""), ""},
	}
	for _, tc := range tests {
		err := n.AdmitNode(tc.u, tc.obj, tc.old)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.err)
		}
	}
}

func TestCompactString(t *testing.T) {
	got := CompactString(rbacv1.PolicyRule{Verbs: []string{"get", "list"}, APIGroups: []string{"apps"}, Resources: []string{"deployments"}})
	if want := `{APIGroups:["apps"], Resources:["deployments"], Verbs:["get" "list"]}`; got != want {
		t.Errorf("%s, want %s", got, want)
	}
}

func TestSelectsOnly(t *testing.T) {
	for sel, want := range map[string]bool{
		"isle.dev/local-path-node=a":         true,
		"isle.dev/local-path-node==a,x=y":    true,
		"isle.dev/local-path-node in (a)":    true,
		"isle.dev/local-path-node in (a,b)":  false,
		"isle.dev/local-path-node!=a":        false,
		"isle.dev/local-path-node=b":         false,
		"":                                   false,
		"isle.dev/local-path-node":           false,
		"x=y":                                false,
		"isle.dev/local-path-node=a,!broken": true,
	} {
		if got := selectsOnly(sel, "isle.dev/local-path-node", "a"); got != want {
			t.Errorf("%q: %v, want %v", sel, got, want)
		}
	}
}

// policyIndex is an index holding the bootstrap policy, 100 ClusterRoles
// and 500 RoleBindings over 50 namespaces (a classroom of 50 students
// with 10 bindings each), as a busy cluster has them.
func policyIndex() *Index {
	x := NewIndex(nil, nil)
	for _, r := range BootstrapClusterRoles() {
		x.clusterRoles[r.Name] = &r
	}
	for _, b := range BootstrapClusterRoleBindings() {
		x.crbs[b.Name] = &b
	}
	for i := range 100 - len(x.clusterRoles) {
		name := fmt.Sprintf("chart-%d", i)
		x.clusterRoles[name] = &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{"example.com"}, Resources: []string{fmt.Sprintf("widgets%d", i)}},
			{Verbs: []string{"create", "update"}, APIGroups: []string{""}, Resources: []string{"configmaps", "events"}},
		}}
		x.crbs[name] = &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "operator", Namespace: fmt.Sprintf("chart-%d", i)}}}
	}
	for s := range 50 {
		ns := fmt.Sprintf("student-%d", s)
		for b := range 10 {
			name := fmt.Sprintf("b%d", b)
			role := []string{"view", "edit", "admin"}[b%3]
			setOrDeleteIn(x.rbs, ns, name, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				RoleRef:  rbacv1.RoleRef{Kind: "ClusterRole", Name: role},
				Subjects: []rbacv1.Subject{{Kind: "User", Name: fmt.Sprintf("student-%d-%d", s, b)}}}, false)
		}
	}
	// The aggregated roles hold their parts' rules, as the controller
	// makes them.
	agg := func(name string, parts ...string) {
		for _, p := range parts {
			x.clusterRoles[name].Rules = append(x.clusterRoles[name].Rules, x.clusterRoles[p].Rules...)
		}
	}
	agg("view", "system:aggregate-to-view")
	agg("edit", "system:aggregate-to-edit", "view")
	agg("admin", "system:aggregate-to-admin", "edit")
	return x
}

// BenchmarkAuthorize is one RBAC decision with policyIndex: a student
// listing pods in its namespace (allowed by a RoleBinding) and in
// another's (refused after every rule was looked at).
func BenchmarkAuthorize(b *testing.B) {
	chain := &Chain{RBAC: &RBAC{Index: policyIndex()}, Node: &NodeAuthorizer{Index: NewIndex(nil, nil)}}
	u := &User{Name: "student-7-4", Groups: []string{GroupAuthenticated}}
	for _, tc := range []struct {
		name string
		ns   string
		want Decision
	}{{"allowed", "student-7", Allow}, {"refused", "student-8", NoOpinion}} {
		a := Attributes{User: u, Verb: "list", ResourceRequest: true, Resource: "pods", Namespace: tc.ns}
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if d, _ := chain.Authorize(a); d != tc.want {
					b.Fatalf("decision %v, want %v", d, tc.want)
				}
			}
		})
	}
}

// TestNodeAuthorizerBehindStore: a board that has just seen its pod bound
// asks before the graph has followed the store; the store decides then,
// and a node's refusals read its pods from the store at most once a
// second.
func TestNodeAuthorizerBehindStore(t *testing.T) {
	x := NewIndex(nil, nil)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: corev1.PodSpec{NodeName: "a",
		Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}}}}}
	scans := 0
	x.readPod = func(ns, name string) *corev1.Pod {
		if ns == pod.Namespace && name == pod.Name {
			return pod
		}
		return nil
	}
	x.readPodsOn = func(node string) []*corev1.Pod {
		scans++
		if node == pod.Spec.NodeName {
			return []*corev1.Pod{pod}
		}
		return nil
	}
	n := &NodeAuthorizer{Index: x}
	as := func(node, verb, resource, sub, name string) Decision {
		d, _ := n.Authorize(Attributes{User: &User{Name: NodeUserPrefix + node, Groups: []string{GroupNodes}}, Verb: verb,
			ResourceRequest: true, APIVersion: "v1", Resource: resource, Subresource: sub, Namespace: "ns", Name: name})
		return d
	}
	if d := as("a", "update", "pods", "status", "p"); d != Allow {
		t.Errorf("its pod's status, bound in the store only: %v, want Allow", d)
	}
	if d := as("b", "update", "pods", "status", "p"); d == Allow {
		t.Error("another node's pod's status: allowed")
	}
	if d := as("a", "delete", "pods", "", "q"); d == Allow {
		t.Error("a pod in neither graph nor store: allowed")
	}
	if d := as("a", "get", "secrets", "", "s"); d != Allow || scans != 1 {
		t.Errorf("its new pod's Secret: %v after %d scans, want Allow after 1", d, scans)
	}
	if d := as("a", "get", "secrets", "", "other"); d == Allow || scans != 1 {
		t.Errorf("a Secret no pod names, within a second of the last scan: %v after %d scans, want a refusal without a scan", d, scans)
	}
	if d := as("b", "get", "secrets", "", "s"); d == Allow || scans != 2 {
		t.Errorf("another node's pod's Secret: %v after %d scans, want a refusal after a scan of its own", d, scans)
	}
	x.mu.Lock()
	x.setPod(pod, false)
	x.mu.Unlock()
	if d := as("a", "get", "secrets", "", "s"); d != Allow || scans != 2 {
		t.Errorf("with the graph caught up: %v after %d scans, want Allow without a scan", d, scans)
	}
}
