package agent

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The pods and Namespaces the NetworkPolicy rules follow keep only what
// the rules are made of.
func TestPolicyView(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web", UID: "u", ResourceVersion: "7", Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{"big": "x"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
		Spec: corev1.PodSpec{NodeName: "pi1", Containers: []corev1.Container{
			{Name: "app", Image: "web:1", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}, Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}},
			{Name: "sidecar", Image: "s:1"},
		}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.42.1.5", PodIPs: []corev1.PodIP{{IP: "10.42.1.5"}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady}}},
	}
	v, err := policyView(pod)
	if err != nil {
		t.Fatal(err)
	}
	got := v.(*corev1.Pod)
	if got.Name != "web" || got.Namespace != "a" || got.Labels["app"] != "web" || got.ResourceVersion != "7" || got.Spec.NodeName != "pi1" ||
		got.Status.PodIP != "10.42.1.5" || got.Status.Phase != corev1.PodRunning || len(got.Spec.Containers) != 1 ||
		got.Spec.Containers[0].Ports[0].Name != "http" {
		t.Errorf("kept too little: %+v", got)
	}
	if got.Annotations != nil || got.ManagedFields != nil || got.Spec.Containers[0].Image != "" || got.Spec.Containers[0].Env != nil ||
		got.Status.Conditions != nil {
		t.Errorf("kept too much: %+v", got)
	}
	ns, _ := policyView(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"team": "red"},
		Annotations: map[string]string{"x": "y"}}, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}}})
	if n := ns.(*corev1.Namespace); n.Labels["team"] != "red" || n.Annotations != nil || n.Spec.Finalizers != nil {
		t.Errorf("namespace: %+v", n)
	}
}
