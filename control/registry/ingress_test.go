package registry_test

import (
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/isle-cluster/isle/control/registry"
)

func newIngress(name string) *networkingv1.Ingress {
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{
			Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}},
	}
}

// An Ingress that names no class gets the default IngressClass; one that
// names a class, by field or legacy annotation, keeps it; with no default
// class, none is set.
func TestIngressDefaultClass(t *testing.T) {
	e := newEnv(t)
	ings := e.res(t, "networking.k8s.io", "v1", "ingresses")
	classes := e.res(t, "networking.k8s.io", "v1", "ingressclasses")
	class := func(t *testing.T, name string) *string {
		t.Helper()
		return e.get(t, ings, "default", name).(*networkingv1.Ingress).Spec.IngressClassName
	}
	create := func(t *testing.T, ing *networkingv1.Ingress) {
		t.Helper()
		if _, err := e.Create(e.ctx, ings, "default", ing, registry.WriteOptions{}); err != nil {
			t.Fatalf("create ingress %s: %v", ing.Name, err)
		}
	}

	create(t, newIngress("before"))
	if c := class(t, "before"); c != nil {
		t.Fatalf("with no default class, ingressClassName = %q, want unset", *c)
	}

	for _, ic := range []*networkingv1.IngressClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Spec: networkingv1.IngressClassSpec{Controller: "example.com/other"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "isle", Annotations: map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}},
			Spec: networkingv1.IngressClassSpec{Controller: "isle.dev/ingress"}},
	} {
		if _, err := e.Create(e.ctx, classes, "", ic, registry.WriteOptions{}); err != nil {
			t.Fatalf("create ingress class %s: %v", ic.Name, err)
		}
	}
	create(t, newIngress("plain"))
	if c := class(t, "plain"); c == nil || *c != "isle" {
		t.Fatalf("ingressClassName = %v, want the default class isle", c)
	}
	named := newIngress("named")
	named.Spec.IngressClassName = ptr("other")
	create(t, named)
	if c := class(t, "named"); c == nil || *c != "other" {
		t.Fatalf("ingressClassName = %v, want the named other", c)
	}
	legacy := newIngress("legacy")
	legacy.Annotations = map[string]string{"kubernetes.io/ingress.class": "other"}
	create(t, legacy)
	if c := class(t, "legacy"); c != nil {
		t.Fatalf("an Ingress with the legacy class annotation got ingressClassName %q", *c)
	}

	// Of two defaults, the newer wins.
	time.Sleep(1100 * time.Millisecond) // creation timestamps have whole seconds
	if _, err := e.Create(e.ctx, classes, "", &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: "newer", Annotations: map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}},
		Spec:       networkingv1.IngressClassSpec{Controller: "example.com/newer"}}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	create(t, newIngress("after"))
	if c := class(t, "after"); c == nil || *c != "newer" {
		t.Fatalf("ingressClassName = %v, want the newer default", c)
	}
}
