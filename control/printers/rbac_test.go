package printers

import (
	"reflect"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func columnNames(p *Printer) []string {
	var names []string
	for _, c := range p.Columns() {
		names = append(names, c.Name)
	}
	return names
}

func TestRBACRows(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 12, 2, 7, 30, 0, 0, time.UTC))
	role := rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "view", CreationTimestamp: created}}
	if want := []string{"Name", "Created At"}; !reflect.DeepEqual(columnNames(ClusterRoles), want) {
		t.Errorf("columns %q, want %q", columnNames(ClusterRoles), want)
	}
	rows, err := ClusterRoles.Rows(&role, now)
	if err != nil || !reflect.DeepEqual(rows[0].Cells, []interface{}{"view", "2026-12-02T07:30:00Z"}) {
		t.Errorf("cells %#v, %v", rows[0].Cells, err)
	}
	b := rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "read-pods", CreationTimestamp: metav1.NewTime(now.Add(-90 * time.Second))},
		RoleRef:  rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "jane"}, {Kind: "User", Name: "joe"}, {Kind: "ServiceAccount", Name: "robot", Namespace: "lab"}}}
	if want := []string{"Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"}; !reflect.DeepEqual(columnNames(RoleBindings), want) {
		t.Errorf("columns %q, want %q", columnNames(RoleBindings), want)
	}
	rows, err = RoleBindings.Rows(&rbacv1.RoleBindingList{Items: []rbacv1.RoleBinding{b, b}}, now)
	if err != nil || len(rows) != 2 {
		t.Fatalf("rows of a list of 2: %d, %v", len(rows), err)
	}
	if want := []interface{}{"read-pods", "ClusterRole/view", "90s", "jane, joe", "", "lab/robot"}; !reflect.DeepEqual(rows[0].Cells, want) {
		t.Errorf("cells %#v, want %#v", rows[0].Cells, want)
	}
}
