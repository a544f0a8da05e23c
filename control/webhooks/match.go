package webhooks

import (
	"context"
	"errors"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/isle-cluster/isle/control/registry"
)

// hook is one webhook of a configuration, mutating or validating, with
// its selectors parsed.
type hook struct {
	// id tells the webhooks apart: configuration/name.
	id       string
	name     string
	mutating bool
	reinvoke bool // reinvocationPolicy IfNeeded
	client   admissionregistrationv1.WebhookClientConfig
	rules    []admissionregistrationv1.RuleWithOperations
	failOpen bool // failurePolicy Ignore
	exact    bool // matchPolicy Exact
	nsSel    labels.Selector
	objSel   labels.Selector
	// dryRunOK: sideEffects None or NoneOnDryRun.
	dryRunOK   bool
	timeout    int32
	versions   []string
	conditions int // matchConditions, which isle cannot evaluate (no CEL)
}

// errConditions is what a webhook with matchConditions meets: they are
// CEL, which isle does not evaluate; as for a condition that fails to
// evaluate upstream, the failure policy decides.
var errConditions = errors.New("its matchConditions are CEL expressions, which isle does not evaluate")

// exempt: the webhook configurations themselves never go to webhooks, so
// a broken webhook can always be removed.
func exempt(r *registry.Resource) bool {
	return r.Group == admissionregistrationv1.GroupName
}

// invocation is a webhook matched to a request: the resource it matched
// (an equivalent one in another version under matchPolicy Equivalent).
type invocation struct {
	h   *hook
	res *registry.Resource
}

// match reports whether h is to be called for req, and through which
// resource: its rules, then its namespace and object selectors.
func (d *Dispatcher) match(ctx context.Context, h *hook, req *registry.AdmissionRequest) (*invocation, error) {
	res := req.Resource
	if !h.matchesRules(req, res) {
		if h.exact {
			return nil, nil
		}
		res = d.equivalent(h, req)
		if res == nil {
			return nil, nil
		}
	}
	ok, err := d.matchesNamespace(ctx, h, req)
	if err != nil || !ok {
		return nil, err
	}
	if !matchesObject(h, req) {
		return nil, nil
	}
	return &invocation{h: h, res: res}, nil
}

// equivalent is a served version of the request's resource that h's
// rules match and that the request's object converts to; nil if none.
func (d *Dispatcher) equivalent(h *hook, req *registry.AdmissionRequest) *registry.Resource {
	for _, e := range d.store.Resources().All() {
		if e.Group != req.Resource.Group || e.Resource != req.Resource.Resource || e.Version == req.Resource.Version || e.Unserved {
			continue
		}
		if req.Subresource != "scale" && (e.Convert == nil && req.Resource.Convert == nil) {
			continue // no way to show the object in that version
		}
		if h.matchesRules(req, e) {
			return e
		}
	}
	return nil
}

// matchesRules: one of h's rules takes the request's operation on res.
func (h *hook) matchesRules(req *registry.AdmissionRequest, res *registry.Resource) bool {
	for _, r := range h.rules {
		if ruleMatches(r, req.Operation, res, req.Subresource) {
			return true
		}
	}
	return false
}

func ruleMatches(r admissionregistrationv1.RuleWithOperations, op string, res *registry.Resource, sub string) bool {
	if !anyOf(r.Operations, func(o admissionregistrationv1.OperationType) bool {
		return o == admissionregistrationv1.OperationAll || string(o) == op
	}) {
		return false
	}
	if !anyOf(r.APIGroups, func(g string) bool { return g == "*" || g == res.Group }) ||
		!anyOf(r.APIVersions, func(v string) bool { return v == "*" || v == res.Version }) {
		return false
	}
	if s := r.Scope; s != nil {
		// A Namespace is cluster-scoped, as its resource is.
		switch *s {
		case admissionregistrationv1.ClusterScope:
			if res.Namespaced {
				return false
			}
		case admissionregistrationv1.NamespacedScope:
			if !res.Namespaced {
				return false
			}
		}
	}
	return anyOf(r.Resources, func(want string) bool { return resourceMatches(want, res.Resource, sub) })
}

// resourceMatches matches a rule's resource entry: "pods" the main
// resource alone, "pods/status" a subresource, "pods/*" every
// subresource, "*" every main resource, "*/scale" every scale, "*/*"
// everything.
func resourceMatches(want, res, sub string) bool {
	wr, ws, hasSub := strings.Cut(want, "/")
	if wr != "*" && wr != res {
		return false
	}
	if !hasSub {
		return sub == ""
	}
	return ws == "*" || ws == sub
}

func anyOf[T any](list []T, f func(T) bool) bool {
	for _, x := range list {
		if f(x) {
			return true
		}
	}
	return false
}

// matchesNamespace applies h's namespaceSelector: to the labels of the
// request's namespace, or of the Namespace itself; a cluster-scoped
// object of another kind always matches.
func (d *Dispatcher) matchesNamespace(ctx context.Context, h *hook, req *registry.AdmissionRequest) (bool, error) {
	if h.nsSel.Empty() {
		return true, nil
	}
	if req.Resource.Group == "" && req.Resource.Resource == "namespaces" {
		return selects(h.nsSel, req.Object) || selects(h.nsSel, req.Old), nil
	}
	if !req.Resource.Namespaced {
		return true, nil
	}
	nsr, ok := d.store.Resources().Lookup(corev1.SchemeGroupVersion.WithResource("namespaces"))
	if !ok {
		return false, errors.New("webhooks: namespaces are not served")
	}
	obj, err := d.store.Get(ctx, nsr, "", req.Namespace, metav1.GetOptions{ResourceVersion: "0"})
	if err != nil {
		return false, err
	}
	return selects(h.nsSel, obj), nil
}

// matchesObject applies h's objectSelector to the object as it would be
// and as it was: either matching is a match.
func matchesObject(h *hook, req *registry.AdmissionRequest) bool {
	if h.objSel.Empty() {
		return true
	}
	return selects(h.objSel, req.Object) || selects(h.objSel, req.Old)
}

// selects: obj is there and sel matches its labels.
func selects(sel labels.Selector, obj runtime.Object) bool {
	if obj == nil {
		return false
	}
	m, err := meta.Accessor(obj)
	return err == nil && sel.Matches(labels.Set(m.GetLabels()))
}

// gvkOf is the kind an object is shown as to a webhook through res.
func gvkOf(res *registry.Resource, sub string, obj runtime.Object) schema.GroupVersionKind {
	if sub == "scale" {
		return schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}
	}
	if gvk := obj.GetObjectKind().GroupVersionKind(); gvk.Kind != "" && sub != "" {
		return gvk
	}
	return res.GroupVersion().WithKind(res.Kind)
}
