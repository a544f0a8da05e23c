package registry_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/control/strategy"
)

// A pod's priority comes from its PriorityClass, as Kubernetes' Priority
// admission plugin has it.
func TestPodPriorityAdmission(t *testing.T) {
	e := newEnv(t)
	pods := e.res(t, "", "v1", "pods")
	classes := e.res(t, "scheduling.k8s.io", "v1", "priorityclasses")
	for _, pc := range strategy.SystemPriorityClasses() {
		if _, err := e.Create(e.ctx, classes, "", pc, registry.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	never := corev1.PreemptNever
	create := func(pc *schedulingv1.PriorityClass) error {
		_, err := e.Create(e.ctx, classes, "", pc, registry.WriteOptions{})
		return err
	}
	if err := create(&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "batch"}, Value: 100, PreemptionPolicy: &never}); err != nil {
		t.Fatal(err)
	}
	pod := func(name, class string, prio *int32) (*corev1.Pod, error) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{PriorityClassName: class, Priority: prio,
			Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
		out, err := e.Create(e.ctx, pods, "default", p, registry.WriteOptions{})
		if err != nil {
			return nil, err
		}
		return out.(*corev1.Pod), nil
	}
	check := func(name, class string, prio *int32, want int32, wantClass string, wantPolicy corev1.PreemptionPolicy) {
		t.Helper()
		p, err := pod(name, class, prio)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if *p.Spec.Priority != want || p.Spec.PriorityClassName != wantClass || *p.Spec.PreemptionPolicy != wantPolicy {
			t.Errorf("%s: priority %d class %q policy %s, want %d %q %s", name, *p.Spec.Priority, p.Spec.PriorityClassName, *p.Spec.PreemptionPolicy, want, wantClass, wantPolicy)
		}
	}
	check("plain", "", nil, 0, "", corev1.PreemptLowerPriority)
	check("batch", "batch", nil, 100, "batch", corev1.PreemptNever)
	check("critical", "system-cluster-critical", nil, 2000000000, "system-cluster-critical", corev1.PreemptLowerPriority)
	hundred := int32(100)
	check("same-value", "batch", &hundred, 100, "batch", corev1.PreemptNever)
	refused := func(name, class string, prio *int32, want string) {
		t.Helper()
		_, err := pod(name, class, prio)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a 403 saying %q", name, err, want)
		}
	}
	refused("missing", "gold", nil, "no PriorityClass with name gold was found")
	five := int32(5)
	refused("own-value", "batch", &five, "the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 100")
	lower := corev1.PreemptLowerPriority
	if _, err := e.Create(e.ctx, pods, "default", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "own-policy"},
		Spec: corev1.PodSpec{PriorityClassName: "batch", PreemptionPolicy: &lower,
			Containers: []corev1.Container{{Name: "c", Image: "img"}}}}, registry.WriteOptions{}); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), "the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; priority admission controller computed Never") {
		t.Errorf("own-policy: %v, want a 403", err)
	}

	// The global default: pods naming no class get it; one only.
	if err := create(&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "normal"}, Value: 10, GlobalDefault: true}); err != nil {
		t.Fatal(err)
	}
	check("defaulted", "", nil, 10, "normal", corev1.PreemptLowerPriority)
	if err := create(&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "another"}, Value: 20, GlobalDefault: true}); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), "PriorityClass normal is already marked as default. Only one default can exist") {
		t.Errorf("a second global default: %v", err)
	}
	// Reserved names and values.
	for _, c := range []struct {
		pc   *schedulingv1.PriorityClass
		want string
	}{
		{&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "system-mine"}, Value: 1}, "priority class names with 'system-' prefix are reserved for system use only"},
		{&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "huge"}, Value: 1000000001}, "maximum allowed value of a user defined priority is 1000000000"},
	} {
		if err := create(c.pc); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want 422 saying %q", c.pc.Name, err, c.want)
		}
	}
}
