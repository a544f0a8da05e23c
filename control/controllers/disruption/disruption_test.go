package disruption_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/isle-cluster/isle/control/controllers/internal/tabletest"
)

func TestBudgetStatus(t *testing.T) {
	e := tabletest.New(t)
	e.Namespace(t, "db")
	pods := e.Res(t, "", "v1", "pods")
	pdbs := e.Res(t, "policy", "v1", "poddisruptionbudgets")
	sts := e.Res(t, "apps", "v1", "statefulsets")
	// A StatefulSet of four asks for four pods; three exist, two Ready.
	set := e.MustCreate(t, sts, "db", &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "pg"}, Spec: appsv1.StatefulSetSpec{
		Replicas: ptr(int32(4)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pg"}},
		// A template no pod can be made from (no image): the test makes the
		// set's pods (not named as its own, so never claimed).
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "pg"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}}})
	owner := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "pg", UID: set.GetUID(), Controller: ptr(true)}}
	for i, ready := range []bool{true, true, false} {
		name := []string{"pg-a", "pg-b", "pg-c"}[i]
		e.MustCreate(t, pods, "db", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "pg"}, OwnerReferences: owner},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "postgres"}}}})
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		if _, err := e.Mutate(e.Ctx, pods, "db", name, "status", func(o runtime.Object) error {
			p := o.(*corev1.Pod)
			p.Status.Phase, p.Status.Conditions = corev1.PodRunning, []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pg"}}
	for _, c := range []struct {
		name                               string
		min, max                           *intstr.IntOrString
		expected, desired, healthy, allows int32
		reason                             string
	}{
		// minAvailable as a number: the pods the selector matches.
		{"min-one", ptr(intstr.FromInt32(1)), nil, 3, 1, 2, 1, policyv1.SufficientPodsReason},
		{"min-two", ptr(intstr.FromInt32(2)), nil, 3, 2, 2, 0, policyv1.InsufficientPodsReason},
		// A percentage or maxUnavailable: the controller's four replicas.
		{"min-half", ptr(intstr.FromString("50%")), nil, 4, 2, 2, 0, policyv1.InsufficientPodsReason},
		{"max-three", nil, ptr(intstr.FromInt32(3)), 4, 1, 2, 1, policyv1.SufficientPodsReason},
	} {
		e.MustCreate(t, pdbs, "db", &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: c.name},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: c.min, MaxUnavailable: c.max, Selector: sel}})
		tabletest.Eventually(t, c.name+"'s status", func() bool {
			obj, err := e.Get(e.Ctx, pdbs, "db", c.name, metav1.GetOptions{})
			if err != nil {
				return false
			}
			p := obj.(*policyv1.PodDisruptionBudget)
			st := p.Status
			return st.ObservedGeneration == p.Generation && st.ExpectedPods == c.expected && st.DesiredHealthy == c.desired &&
				st.CurrentHealthy == c.healthy && st.DisruptionsAllowed == c.allows && len(st.Conditions) == 1 && st.Conditions[0].Reason == c.reason
		})
	}
	// A pod without a controller under a percentage: nothing allowed.
	e.MustCreate(t, pods, "db", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stray", Labels: map[string]string{"app": "pg"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "postgres"}}}})
	tabletest.Eventually(t, "max-three unable to count", func() bool {
		obj, _ := e.Get(e.Ctx, pdbs, "db", "max-three", metav1.GetOptions{})
		st := obj.(*policyv1.PodDisruptionBudget).Status
		return st.DisruptionsAllowed == 0 && len(st.Conditions) == 1 && st.Conditions[0].Reason == policyv1.SyncFailedReason
	})
}

func ptr[T any](v T) *T { return &v }
