package ingressstatus_test

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/isle-cluster/isle/control/controllers/ingressstatus"
	"github.com/isle-cluster/isle/control/controllers/internal/tabletest"
)

// The Ingresses the boards serve get the Ready boards' addresses in their
// status, kept as boards come and go; those of another class are left
// alone.
func TestIngressStatus(t *testing.T) {
	e := tabletest.New(t)
	e.Namespace(t, "default")
	nodes := e.Res(t, "", "v1", "nodes")
	ings := e.Res(t, "networking.k8s.io", "v1", "ingresses")
	e.MustCreate(t, e.Res(t, "networking.k8s.io", "v1", "ingressclasses"), "", ingressstatus.DefaultIngressClass())
	for i, name := range []string{"pi2", "pi10", "pi1"} {
		n := tabletest.ReadyNode(name)
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name},
			{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.77.0.%d", []int{12, 20, 11}[i])}}
		e.MustCreate(t, nodes, "", n)
	}
	backend := &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "hello",
		Port: networkingv1.ServiceBackendPort{Number: 80}}}
	e.MustCreate(t, ings, "default", &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "ours"},
		Spec: networkingv1.IngressSpec{DefaultBackend: backend}})
	other := "nginx"
	e.MustCreate(t, ings, "default", &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "theirs"},
		Spec: networkingv1.IngressSpec{IngressClassName: &other, DefaultBackend: backend}})

	addrs := func(name string) []string {
		obj, err := e.Get(e.Ctx, ings, "default", name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, a := range obj.(*networkingv1.Ingress).Status.LoadBalancer.Ingress {
			out = append(out, a.IP)
		}
		return out
	}
	tabletest.Eventually(t, "the ingress shows the three boards in address order", func() bool {
		return slices.Equal(addrs("ours"), []string{"10.77.0.11", "10.77.0.12", "10.77.0.20"})
	})

	if _, err := e.Mutate(e.Ctx, nodes, "", "pi2", "status", func(obj runtime.Object) error {
		n := obj.(*corev1.Node)
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == corev1.NodeReady {
				n.Status.Conditions[i].Status = corev1.ConditionUnknown
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	tabletest.Eventually(t, "the board that is not ready leaves the addresses", func() bool {
		return slices.Equal(addrs("ours"), []string{"10.77.0.11", "10.77.0.20"})
	})
	if a := addrs("theirs"); len(a) != 0 {
		t.Fatalf("the Ingress of another class got addresses %v", a)
	}
}
