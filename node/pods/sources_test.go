package pods

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// WithoutManagedFields drops an object's managedFields and keeps the rest;
// what has no metadata passes unchanged.
func TestWithoutManagedFields(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Labels: map[string]string{"app": "web"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}},
		Spec: corev1.ServiceSpec{ClusterIP: "10.43.0.20"}}
	got, err := WithoutManagedFields(svc)
	if err != nil {
		t.Fatal(err)
	}
	s := got.(*corev1.Service)
	if s.ManagedFields != nil || s.Name != "web" || s.Labels["app"] != "web" || s.Spec.ClusterIP != "10.43.0.20" {
		t.Errorf("WithoutManagedFields = %+v, want the Service without its managedFields alone", s)
	}
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/web"}
	if got, err := WithoutManagedFields(tomb); err != nil || got != tomb {
		t.Errorf("WithoutManagedFields(%v) = %v, %v: want it unchanged", tomb, got, err)
	}
}
