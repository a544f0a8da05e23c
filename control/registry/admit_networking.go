package registry

import (
	"context"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// annDefaultIngressClass marks the IngressClass that Ingresses naming no
// class get (Kubernetes' DefaultIngressClass admission).
const annDefaultIngressClass = networkingv1.AnnotationIsDefaultIngressClass

// annIngressClass is the legacy way an Ingress names its class.
const annIngressClass = "kubernetes.io/ingress.class"

// IngressAdmission gives a new Ingress that names no class the default
// IngressClass.
var IngressAdmission = &Admission{
	Create: func(ctx context.Context, s *Store, obj runtime.Object) error {
		return s.admitDefaultIngressClass(ctx, obj.(*networkingv1.Ingress))
	},
}

// admitDefaultIngressClass gives a new Ingress that names no class (by
// field or legacy annotation) the default IngressClass, if there is one.
func (s *Store) admitDefaultIngressClass(ctx context.Context, ing *networkingv1.Ingress) error {
	if _, ok := ing.Annotations[annIngressClass]; ok || ing.Spec.IngressClassName != nil {
		return nil
	}
	r, _ := s.resources.Lookup(networkingv1.SchemeGroupVersion.WithResource("ingressclasses"))
	list, err := s.List(ctx, r, "", metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return err
	}
	var def *networkingv1.IngressClass
	for i := range list.(*networkingv1.IngressClassList).Items {
		ic := &list.(*networkingv1.IngressClassList).Items[i]
		if ic.Annotations[annDefaultIngressClass] != "true" {
			continue
		}
		// Of several defaults, the newest, then the first by name, as
		// Kubernetes picks it.
		if def == nil || ic.CreationTimestamp.After(def.CreationTimestamp.Time) ||
			ic.CreationTimestamp.Equal(&def.CreationTimestamp) && ic.Name < def.Name {
			def = ic
		}
	}
	if def != nil {
		ing.Spec.IngressClassName = &def.Name
	}
	return nil
}
