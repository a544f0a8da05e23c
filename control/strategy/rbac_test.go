package strategy

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestRoleValidation(t *testing.T) {
	valid := func() *rbacv1.ClusterRole {
		return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "system:reader", ResourceVersion: "1"},
			Rules: []rbacv1.PolicyRule{
				{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}},
				{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}},
			}}
	}
	for _, tt := range []struct {
		name   string
		change func(*rbacv1.ClusterRole)
		want   []wantErr
	}{
		{"valid", func(*rbacv1.ClusterRole) {}, nil},
		{"no verbs", func(r *rbacv1.ClusterRole) { r.Rules[0].Verbs = nil }, []wantErr{{field.ErrorTypeRequired, "rules[0].verbs", "at least one value"}}},
		{"no api group", func(r *rbacv1.ClusterRole) { r.Rules[0].APIGroups = nil }, []wantErr{{field.ErrorTypeRequired, "rules[0].apiGroups", "at least one api group"}}},
		{"no resource", func(r *rbacv1.ClusterRole) { r.Rules[0].Resources = nil }, []wantErr{{field.ErrorTypeRequired, "rules[0].resources", "at least one resource"}}},
		{"both", func(r *rbacv1.ClusterRole) { r.Rules[1].Resources = []string{"pods"} },
			[]wantErr{{field.ErrorTypeInvalid, "rules[1].nonResourceURLs", "both regular resources and non-resource URLs"}}},
		{"name with a slash", func(r *rbacv1.ClusterRole) { r.Name = "a/b" }, []wantErr{{field.ErrorTypeInvalid, "metadata.name", "may not contain '/'"}}},
		{"empty aggregation", func(r *rbacv1.ClusterRole) { r.AggregationRule = &rbacv1.AggregationRule{} },
			[]wantErr{{field.ErrorTypeRequired, "aggregationRule.clusterRoleSelectors", "at least one clusterRoleSelector"}}},
		{"bad selector", func(r *rbacv1.ClusterRole) {
			r.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"bad key!": "x"}}}}
		}, []wantErr{{field.ErrorTypeInvalid, "aggregationRule.clusterRoleSelectors[0].matchLabels", "name part must consist of"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := valid()
			tt.change(r)
			checkErrs(t, ClusterRole.ValidateCreate(r), tt.want...)
		})
	}
	// A Role's rules are namespaced: no non-resource URLs.
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "default"}, Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/metrics"}}}}
	checkErrs(t, Role.ValidateCreate(role), wantErr{field.ErrorTypeInvalid, "rules[0].nonResourceURLs", "namespaced rules cannot apply to non-resource URLs"})
}

func TestBindingValidation(t *testing.T) {
	valid := func() *rbacv1.RoleBinding {
		b := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "read-pods", Namespace: "default", ResourceVersion: "1"},
			RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "pod-reader"},
			Subjects: []rbacv1.Subject{{Kind: "User", Name: "jane"}, {Kind: "Group", Name: "students"},
				{Kind: "ServiceAccount", Name: "robot", Namespace: "default"}}}
		RoleBinding.PrepareForCreate(b)
		return b
	}
	if b := valid(); b.RoleRef.APIGroup != rbacv1.GroupName || b.Subjects[0].APIGroup != rbacv1.GroupName || b.Subjects[2].APIGroup != "" {
		t.Fatalf("defaults: %+v", b)
	}
	for _, tt := range []struct {
		name   string
		change func(*rbacv1.RoleBinding)
		want   []wantErr
	}{
		{"valid", func(*rbacv1.RoleBinding) {}, nil},
		{"role ref of another group", func(b *rbacv1.RoleBinding) { b.RoleRef.APIGroup = "apps" }, []wantErr{{field.ErrorTypeNotSupported, "roleRef.apiGroup", ""}}},
		{"role ref of another kind", func(b *rbacv1.RoleBinding) { b.RoleRef.Kind = "Deployment" }, []wantErr{{field.ErrorTypeNotSupported, "roleRef.kind", ""}}},
		{"role ref without a name", func(b *rbacv1.RoleBinding) { b.RoleRef.Name = "" }, []wantErr{{field.ErrorTypeRequired, "roleRef.name", ""}}},
		{"subject without a name", func(b *rbacv1.RoleBinding) { b.Subjects[0].Name = "" }, []wantErr{{field.ErrorTypeRequired, "subjects[0].name", ""}}},
		{"subject of another kind", func(b *rbacv1.RoleBinding) { b.Subjects[1].Kind = "Robot" }, []wantErr{{field.ErrorTypeNotSupported, "subjects[1].kind", ""}}},
		{"user of another group", func(b *rbacv1.RoleBinding) { b.Subjects[0].APIGroup = "x" }, []wantErr{{field.ErrorTypeNotSupported, "subjects[0].apiGroup", ""}}},
		{"service account name", func(b *rbacv1.RoleBinding) { b.Subjects[2].Name = "Robot_1" }, []wantErr{{field.ErrorTypeInvalid, "subjects[2].name", ""}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := valid()
			tt.change(b)
			checkErrs(t, RoleBinding.ValidateCreate(b), tt.want...)
		})
	}
	// The roleRef never changes.
	old, b := valid(), valid()
	b.RoleRef.Name = "other"
	checkErrs(t, RoleBinding.ValidateUpdate(b, old), wantErr{field.ErrorTypeInvalid, "roleRef", "cannot change roleRef"})
	// A ClusterRoleBinding binds ClusterRoles, and its service accounts
	// name their namespace.
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "view"}, RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "x"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "robot"}}}
	ClusterRoleBinding.PrepareForCreate(crb)
	checkErrs(t, ClusterRoleBinding.ValidateCreate(crb),
		wantErr{field.ErrorTypeNotSupported, "roleRef.kind", ""}, wantErr{field.ErrorTypeRequired, "subjects[0].namespace", ""})
}
