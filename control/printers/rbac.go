package printers

import (
	"fmt"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// createdAtColumn is the CREATED AT column of the roles.
func createdAtColumn() metav1.TableColumnDefinition {
	return column("Created At", "date", metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"])
}

// Roles prints rbac.authorization.k8s.io/v1 Roles: NAME CREATED AT.
var Roles = &Printer{
	columns: []metav1.TableColumnDefinition{nameColumn(), createdAtColumn()},
	rows: typed(cells(func(r *rbacv1.Role, _ time.Time) []interface{} {
		return []interface{}{r.Name, r.CreationTimestamp.UTC().Format(time.RFC3339)}
	}), func(l *rbacv1.RoleList) []rbacv1.Role { return l.Items }),
}

// ClusterRoles prints rbac.authorization.k8s.io/v1 ClusterRoles: NAME
// CREATED AT.
var ClusterRoles = &Printer{
	columns: []metav1.TableColumnDefinition{nameColumn(), createdAtColumn()},
	rows: typed(cells(func(r *rbacv1.ClusterRole, _ time.Time) []interface{} {
		return []interface{}{r.Name, r.CreationTimestamp.UTC().Format(time.RFC3339)}
	}), func(l *rbacv1.ClusterRoleList) []rbacv1.ClusterRole { return l.Items }),
}

var bindingColumns = []metav1.TableColumnDefinition{
	nameColumn(),
	column("Role", typeString, rbacv1.RoleBinding{}.SwaggerDoc()["roleRef"]),
	ageColumn(),
	wide("Users", typeString, "Users in the roleBinding"),
	wide("Groups", typeString, "Groups in the roleBinding"),
	wide("ServiceAccounts", typeString, "ServiceAccounts in the roleBinding"),
}

// bindingCells are a binding's cells: the role as Kind/name, and its
// subjects by kind (service accounts as namespace/name).
func bindingCells(name string, created metav1.Time, ref rbacv1.RoleRef, subjects []rbacv1.Subject, now time.Time) []interface{} {
	var users, groups, sas []string
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			users = append(users, s.Name)
		case rbacv1.GroupKind:
			groups = append(groups, s.Name)
		case rbacv1.ServiceAccountKind:
			sas = append(sas, s.Namespace+"/"+s.Name)
		}
	}
	return []interface{}{name, fmt.Sprintf("%s/%s", ref.Kind, ref.Name), since(created, now),
		strings.Join(users, ", "), strings.Join(groups, ", "), strings.Join(sas, ", ")}
}

// RoleBindings prints rbac.authorization.k8s.io/v1 RoleBindings: NAME ROLE
// AGE, and USERS GROUPS SERVICEACCOUNTS wide.
var RoleBindings = &Printer{
	columns: bindingColumns,
	rows: typed(cells(func(b *rbacv1.RoleBinding, now time.Time) []interface{} {
		return bindingCells(b.Name, b.CreationTimestamp, b.RoleRef, b.Subjects, now)
	}), func(l *rbacv1.RoleBindingList) []rbacv1.RoleBinding { return l.Items }),
}

// ClusterRoleBindings prints rbac.authorization.k8s.io/v1
// ClusterRoleBindings as RoleBindings.
var ClusterRoleBindings = &Printer{
	columns: bindingColumns,
	rows: typed(cells(func(b *rbacv1.ClusterRoleBinding, now time.Time) []interface{} {
		return bindingCells(b.Name, b.CreationTimestamp, b.RoleRef, b.Subjects, now)
	}), func(l *rbacv1.ClusterRoleBindingList) []rbacv1.ClusterRoleBinding { return l.Items }),
}
