package registry_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// A DaemonSet's template generation (deprecated.daemonset.template.generation)
// is the server's: 1 on create, one more for each update of the template,
// never what a client writes.
func TestDaemonSetTemplateGeneration(t *testing.T) {
	e := newEnv(t)
	dss := e.res(t, "apps", "v1", "daemonsets")
	lbl := map[string]string{"app": "agent"}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent"}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: lbl},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "agent:1"}}}}}}
	gen := func(obj runtime.Object) string {
		return obj.(*appsv1.DaemonSet).Annotations[appsv1.DeprecatedTemplateGeneration]
	}
	if got := gen(e.create(t, dss, "default", ds)); got != "1" {
		t.Fatalf("created with template generation %q, want 1", got)
	}
	steps := []struct {
		name   string
		change func(*appsv1.DaemonSet)
		sub    string
		want   string
	}{
		{"template changed", func(d *appsv1.DaemonSet) { d.Spec.Template.Spec.Containers[0].Image = "agent:2" }, "", "2"},
		{"spec changed but not the template", func(d *appsv1.DaemonSet) { d.Spec.MinReadySeconds = 5 }, "", "2"},
		{"a client's value is ignored", func(d *appsv1.DaemonSet) { d.Annotations[appsv1.DeprecatedTemplateGeneration] = "40" }, "", "2"},
		{"a client cannot remove it", func(d *appsv1.DaemonSet) { delete(d.Annotations, appsv1.DeprecatedTemplateGeneration) }, "", "2"},
		{"template labels changed", func(d *appsv1.DaemonSet) { d.Spec.Template.Labels["tier"] = "node" }, "", "3"},
		{"status writes keep it", func(d *appsv1.DaemonSet) { d.Status.DesiredNumberScheduled = 2 }, "status", "3"},
	}
	for _, st := range steps {
		out, err := e.Mutate(e.ctx, dss, "default", "agent", st.sub, func(obj runtime.Object) error {
			st.change(obj.(*appsv1.DaemonSet))
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got := gen(out); got != st.want {
			t.Errorf("%s: template generation %q, want %q", st.name, got, st.want)
		}
	}
	// A client may start from a later generation (a DaemonSet copied from
	// another cluster keeps its count).
	copied := ds.DeepCopy()
	copied.Name, copied.Annotations = "copied", map[string]string{appsv1.DeprecatedTemplateGeneration: "7"}
	if got := gen(e.create(t, dss, "default", copied)); got != "7" {
		t.Errorf("created with generation 7: got %q", got)
	}
	// Other kinds are left alone.
	cm := e.create(t, e.cms(t), "default", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}).(*corev1.ConfigMap)
	if _, ok := cm.Annotations[appsv1.DeprecatedTemplateGeneration]; ok {
		t.Errorf("a ConfigMap got a template generation")
	}
}
