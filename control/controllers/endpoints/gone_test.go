package endpoints

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/isle-cluster/isle/control/controllers/internal/ctltest"
	"github.com/isle-cluster/isle/control/registry"
)

// A Service's deletion seen while a sync that had read the Service still
// ran: that sync must leave the deletion to the sync it queued, which
// deletes the user's Endpoints (it took the deletion, and the Endpoints
// stayed for good; TestEndpointsMirroredIntoSlices failed so, once).
func TestDeletionSeenDuringASyncDeletesEndpoints(t *testing.T) {
	e := ctltest.New(t, nil)
	store, ctx := e.Store, t.Context()
	r := New(store, e.Log).newRun()
	if _, err := store.Create(ctx, r.services, "default", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 5432, Protocol: corev1.ProtocolTCP}}}}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Create(ctx, r.endpoints, "default", &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "192.0.2.7"}}, Ports: []corev1.EndpointPort{{Port: 5432}}}}},
		registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}

	// The watch saw the deletion (and queued a sync) while this sync, which
	// read the Service before it went, ran.
	r.gone["default/db"] = true
	if err := r.sync(ctx, "default/db"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.Delete(ctx, r.services, "default", "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.sync(ctx, "default/db"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Get(ctx, r.endpoints, "default", "db", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the user's Endpoints of the deleted Service: %v, want them deleted", err)
	}
	if len(r.gone) != 0 {
		t.Errorf("deletions still remembered: %v", r.gone)
	}
}
