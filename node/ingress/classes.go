package ingress

import (
	"cmp"
	"slices"

	networkingv1 "k8s.io/api/networking/v1"
)

// legacyClassAnnotation is the deprecated way of naming an Ingress's
// class, still honoured when spec.ingressClassName is unset.
const legacyClassAnnotation = "kubernetes.io/ingress.class"

// servedIngresses returns the Ingresses of classes this controller serves,
// oldest first (creationTimestamp, then namespace/name): where Ingresses
// conflict, the first one wins.
func servedIngresses(ings []*networkingv1.Ingress, classes []*networkingv1.IngressClass) []*networkingv1.Ingress {
	served := make(map[string]bool)
	hasDefault := false
	for _, ic := range classes {
		if ic == nil || ic.Spec.Controller != ControllerName {
			continue
		}
		served[ic.Name] = true
		if ic.Annotations[networkingv1.AnnotationIsDefaultIngressClass] == "true" {
			hasDefault = true
		}
	}
	var out []*networkingv1.Ingress
	for _, ing := range ings {
		if ing == nil {
			continue
		}
		if class := ingressClass(ing); class != "" && served[class] || class == "" && hasDefault {
			out = append(out, ing)
		}
	}
	slices.SortFunc(out, func(a, b *networkingv1.Ingress) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// ingressClass is the class an Ingress names, "" for none.
func ingressClass(ing *networkingv1.Ingress) string {
	if n := ing.Spec.IngressClassName; n != nil && *n != "" {
		return *n
	}
	return ing.Annotations[legacyClassAnnotation]
}

// TLSSecrets are the Secrets (namespace/name, sorted) that the Ingresses
// of the classes this controller serves name for TLS: what a board must
// read to serve them.
func TLSSecrets(ings []*networkingv1.Ingress, classes []*networkingv1.IngressClass) []string {
	var out []string
	for _, ing := range servedIngresses(ings, classes) {
		for _, t := range ing.Spec.TLS {
			if t.SecretName != "" {
				out = append(out, ing.Namespace+"/"+t.SecretName)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
