package apiserver_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestEvictionHonoursBudgets plays the disruption controller's part (the
// budget's status) and checks what pods/eviction answers.
func TestEvictionHonoursBudgets(t *testing.T) {
	e := newEnv(t)
	pods, _ := e.store.Resources().Lookup(schema.GroupVersionResource{Version: "v1", Resource: "pods"})
	pdbs, _ := e.store.Resources().Lookup(policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets"))
	pod := func(name string, phase corev1.PodPhase, ready bool) {
		t.Helper()
		mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/pods",
			fmt.Sprintf(`{"metadata":{"name":%q,"labels":{"app":"db"}},"spec":{"nodeName":"pi1","containers":[{"name":"c","image":"busybox"}]}}`, name)), 201)
		if _, err := e.store.Mutate(e.ctx, pods, "default", name, "status", func(obj runtime.Object) error {
			p := obj.(*corev1.Pod)
			p.Status.Phase = phase
			st := corev1.ConditionFalse
			if ready {
				st = corev1.ConditionTrue
			}
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	budget := func(name string, allowed, healthy, desired int32) {
		t.Helper()
		if _, err := e.store.Mutate(e.ctx, pdbs, "default", name, "status", func(obj runtime.Object) error {
			p := obj.(*policyv1.PodDisruptionBudget)
			p.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: p.Generation, DisruptionsAllowed: allowed,
				CurrentHealthy: healthy, DesiredHealthy: desired, ExpectedPods: 3}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	evict := func(name string) response {
		return e.admin(t, "POST", "/api/v1/namespaces/default/pods/"+name+"/eviction",
			fmt.Sprintf(`{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":%q}}`, name))
	}
	for _, n := range []string{"db-0", "db-1", "db-2"} {
		pod(n, corev1.PodRunning, true)
	}
	pod("db-new", corev1.PodPending, false)
	pod("db-sick", corev1.PodRunning, false)
	mustCode(t, e.admin(t, "POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
		`{"metadata":{"name":"db"},"spec":{"minAvailable":2,"selector":{"matchLabels":{"app":"db"}}}}`), 201)

	// Not yet computed: 429, retried by kubectl drain.
	r := mustCode(t, evict("db-0"), 429)
	if st := r.status(t); st.Message != "Cannot evict pod as it would violate the pod's disruption budget." ||
		st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Type != "DisruptionBudget" ||
		!strings.Contains(st.Details.Causes[0].Message, "is still being processed") {
		t.Fatalf("eviction before the budget's status: %+v", st)
	}
	budget("db", 1, 3, 2)
	mustCode(t, evict("db-0"), 201)
	var p policyv1.PodDisruptionBudget
	mustCode(t, e.admin(t, "GET", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/db", ""), 200).decode(t, &p)
	if p.Status.DisruptionsAllowed != 0 || p.Status.DisruptedPods["db-0"].Time.IsZero() {
		t.Fatalf("budget after an eviction: %+v, want no disruption left and db-0 disrupted", p.Status)
	}
	r = mustCode(t, evict("db-1"), 429)
	if st := r.status(t); len(st.Details.Causes) != 1 || st.Details.Causes[0].Message != "The disruption budget db needs 2 healthy pods and has 3 currently" {
		t.Fatalf("a second eviction: %+v", st)
	}
	var pd corev1.Pod
	mustCode(t, e.admin(t, "GET", "/api/v1/namespaces/default/pods/db-1", ""), 200).decode(t, &pd)
	if pd.DeletionTimestamp != nil {
		t.Fatal("a refused eviction deleted the pod")
	}
	// A pending pod goes whatever the budget; an unhealthy one while the
	// budget is met.
	mustCode(t, evict("db-new"), 201)
	mustCode(t, evict("db-sick"), 201)
	// A dry run checks without taking.
	budget("db", 1, 3, 2)
	mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/pods/db-1/eviction",
		`{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"db-1"},"deleteOptions":{"dryRun":["All"]}}`), 201)
	mustCode(t, e.admin(t, "GET", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/db", ""), 200).decode(t, &p)
	if p.Status.DisruptionsAllowed != 1 {
		t.Fatalf("a dry run took a disruption: %+v", p.Status)
	}
	// Two budgets over a pod: 500, as kube-apiserver.
	mustCode(t, e.admin(t, "POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
		`{"metadata":{"name":"db2"},"spec":{"maxUnavailable":"50%","selector":{"matchLabels":{"app":"db"}}}}`), 201)
	r = mustCode(t, evict("db-2"), 500)
	if st := r.status(t); !strings.Contains(st.Message, "more than one PodDisruptionBudget") {
		t.Fatalf("two budgets: %+v", st)
	}
	// Both minAvailable and maxUnavailable: refused.
	r = mustCode(t, e.admin(t, "POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
		`{"metadata":{"name":"both"},"spec":{"minAvailable":1,"maxUnavailable":1}}`), 422)
	if st := r.status(t); !strings.Contains(st.Message, "minAvailable and maxUnavailable cannot be both set") {
		t.Fatalf("both set: %s", st.Message)
	}
}
