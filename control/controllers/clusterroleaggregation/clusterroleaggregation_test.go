package clusterroleaggregation_test

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/isle-cluster/isle/control/controllers/internal/tabletest"
)

func TestAggregation(t *testing.T) {
	e := tabletest.New(t)
	crs := e.Res(t, "rbac.authorization.k8s.io", "v1", "clusterroles")
	role := func(name string, labels map[string]string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
		return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Rules: rules}
	}
	get := rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	list := rbacv1.PolicyRule{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	crds := rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"example.com"}, Resources: []string{"widgets"}}
	agg := role("monitoring", nil)
	agg.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"aggregate-to-monitoring": "true"}}}}
	// What a user wrote into the aggregated role's rules is replaced.
	agg.Rules = []rbacv1.PolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}}
	e.MustCreate(t, crs, "", role("pods-b", map[string]string{"aggregate-to-monitoring": "true"}, list, get))
	e.MustCreate(t, crs, "", role("pods-a", map[string]string{"aggregate-to-monitoring": "true"}, get))
	e.MustCreate(t, crs, "", role("other", map[string]string{"aggregate-to-view": "true"}, crds))
	e.MustCreate(t, crs, "", agg)
	rules := func(want ...rbacv1.PolicyRule) func() bool {
		return func() bool {
			obj, err := e.Get(e.Ctx, crs, "", "monitoring", metav1.GetOptions{})
			return err == nil && equality.Semantic.DeepEqual(obj.(*rbacv1.ClusterRole).Rules, want)
		}
	}
	// pods-a before pods-b, each rule once.
	tabletest.Eventually(t, "monitoring has pods-a's and pods-b's rules", rules(get, list))

	// A role labelled later joins; one unlabelled leaves.
	if _, err := e.Mutate(e.Ctx, crs, "", "other", "", func(o runtime.Object) error {
		o.(*rbacv1.ClusterRole).Labels["aggregate-to-monitoring"] = "true"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	tabletest.Eventually(t, "monitoring has other's rule too, first by name", rules(crds, get, list))
	if _, _, err := e.Delete(e.Ctx, crs, "", "pods-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	tabletest.Eventually(t, "monitoring without pods-b's list rule", rules(crds, get))
}
