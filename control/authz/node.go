package authz

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/isle-cluster/isle/control/wire"
)

// IngressController is the controller of the IngressClasses the boards
// serve: a board may read the TLS Secrets their Ingresses name.
const IngressController = wire.IngressController

// NodeLeaseNamespace holds the nodes' Leases.
const NodeLeaseNamespace = "kube-node-lease"

// refKind is the kind of object a pod refers to.
type refKind uint8

const (
	refSecret refKind = iota
	refConfigMap
	refClaim
	refServiceAccount
)

// ref is an object a pod refers to, in the pod's namespace.
type ref struct {
	kind      refKind
	namespace string
	name      string
}

// podRefs is what the Node authorizer keeps of a pod bound to a node.
type podRefs struct {
	node string
	refs []ref
}

// podRefsOf is what p refers to, each once: the Secrets, ConfigMaps,
// claims and service account its node must read to run it.
func podRefsOf(p *corev1.Pod) *podRefs {
	out := &podRefs{node: p.Spec.NodeName}
	seen := map[ref]bool{}
	add := func(k refKind, name string) {
		r := ref{kind: k, namespace: p.Namespace, name: name}
		if name != "" && !seen[r] {
			seen[r] = true
			out.refs = append(out.refs, r)
		}
	}
	sa := p.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	add(refServiceAccount, sa)
	for _, s := range p.Spec.ImagePullSecrets {
		add(refSecret, s.Name)
	}
	for _, v := range p.Spec.Volumes {
		switch {
		case v.Secret != nil:
			add(refSecret, v.Secret.SecretName)
		case v.ConfigMap != nil:
			add(refConfigMap, v.ConfigMap.Name)
		case v.PersistentVolumeClaim != nil:
			add(refClaim, v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			add(refClaim, p.Name+"-"+v.Name)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.Secret != nil {
					add(refSecret, s.Secret.Name)
				}
				if s.ConfigMap != nil {
					add(refConfigMap, s.ConfigMap.Name)
				}
			}
		}
	}
	env := func(c *corev1.Container) {
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil {
				add(refSecret, e.SecretRef.Name)
			}
			if e.ConfigMapRef != nil {
				add(refConfigMap, e.ConfigMapRef.Name)
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if s := e.ValueFrom.SecretKeyRef; s != nil {
				add(refSecret, s.Name)
			}
			if c := e.ValueFrom.ConfigMapKeyRef; c != nil {
				add(refConfigMap, c.Name)
			}
		}
	}
	for i := range p.Spec.InitContainers {
		env(&p.Spec.InitContainers[i])
	}
	for i := range p.Spec.Containers {
		env(&p.Spec.Containers[i])
	}
	for i := range p.Spec.EphemeralContainers {
		env((*corev1.Container)(&p.Spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	return out
}

// setPod takes a pod into the graph (or out, when deleted or unbound).
func (x *Index) setPod(p *corev1.Pod, deleted bool) {
	key := p.Namespace + "/" + p.Name
	if old := x.pods[key]; old != nil {
		refs := x.nodeRefs[old.node]
		for _, r := range old.refs {
			if refs[r]--; refs[r] <= 0 {
				delete(refs, r)
			}
		}
		if len(refs) == 0 {
			delete(x.nodeRefs, old.node)
		}
		delete(x.pods, key)
	}
	if deleted || p.Spec.NodeName == "" {
		return
	}
	pr := podRefsOf(p)
	x.pods[key] = pr
	refs := x.nodeRefs[pr.node]
	if refs == nil {
		refs = map[ref]int{}
		x.nodeRefs[pr.node] = refs
	}
	for _, r := range pr.refs {
		refs[r]++
	}
}

// podNode is the node a pod is bound to ("" if none or no such pod).
func (x *Index) podNode(namespace, name string) string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if p := x.pods[namespace+"/"+name]; p != nil {
		return p.node
	}
	return ""
}

// boundTo reports whether the pod namespace/name is bound to node, in the
// graph or else in the store: a board that has just seen its pod bound
// (by its own watch, which may be ahead of the graph's) writes its status
// at once.
func (x *Index) boundTo(namespace, name, node string) bool {
	if x.podNode(namespace, name) == node {
		return true
	}
	if x.readPod == nil {
		return false
	}
	p := x.readPod(namespace, name)
	return p != nil && p.Spec.NodeName == node
}

// refersTo reports whether a pod bound to node refers to r, in the graph
// or else in the store (as boundTo: a board reads its new pod's Secrets
// and ConfigMaps at once).
func (x *Index) refersTo(node string, r ref) bool {
	if x.nodeRefers(node, r) {
		return true
	}
	if x.readPodsOn == nil || !x.mayScan(node) {
		return false
	}
	for _, p := range x.readPodsOn(node) {
		if p.Namespace == r.namespace && p.Spec.NodeName == node && slices.Contains(podRefsOf(p).refs, r) {
			return true
		}
	}
	return false
}

// scanEvery bounds how often a node's refusals read its pods from the
// store: a board that asks for what none of its pods refers to gets the
// answer of the graph alone until then.
const scanEvery = time.Second

// mayScan reports whether node's pods may be read from the store now, and
// if so counts that it is.
func (x *Index) mayScan(node string) bool {
	now := time.Now()
	x.scanMu.Lock()
	defer x.scanMu.Unlock()
	if now.Sub(x.scanned[node]) < scanEvery {
		return false
	}
	if len(x.scanned) > maxScanned {
		clear(x.scanned) // names of nodes long gone, or a flood of them
	}
	x.scanned[node] = now
	return true
}

// maxScanned bounds the nodes whose last store read is remembered.
const maxScanned = 4096

// ingressRefs is what the Node authorizer keeps of an Ingress: its class
// and the TLS Secrets it names.
type ingressRefs struct {
	namespace string
	class     string // "" when it names none
	secrets   []string
}

func ingressRefsOf(ing *networkingv1.Ingress) ingressRefs {
	out := ingressRefs{namespace: ing.Namespace, class: ing.Annotations["kubernetes.io/ingress.class"]}
	if n := ing.Spec.IngressClassName; n != nil && *n != "" {
		out.class = *n
	}
	for _, t := range ing.Spec.TLS {
		if t.SecretName != "" && !slices.Contains(out.secrets, t.SecretName) {
			out.secrets = append(out.secrets, t.SecretName)
		}
	}
	return out
}

// nodeRefers reports whether a pod bound to node refers to r.
func (x *Index) nodeRefers(node string, r ref) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.nodeRefs[node][r] > 0
}

// nodeVolume reports whether a claim that a pod bound to node refers to is
// bound to the volume pv.
func (x *Index) nodeVolume(node, pv string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	for r := range x.nodeRefs[node] {
		if r.kind == refClaim && x.claims[r.namespace+"/"+r.name] == pv {
			return true
		}
	}
	return false
}

// ingressSecret reports whether an Ingress of a class isle's ingress
// serves names the Secret namespace/name for its TLS: every board serves
// those Ingresses, so every board may read it.
func (x *Index) ingressSecret(namespace, name string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	for _, ing := range x.ingresses {
		if ing.namespace != namespace || !slices.Contains(ing.secrets, name) {
			continue
		}
		if ing.class != "" && x.classes[ing.class] || ing.class == "" && len(x.defClass) > 0 {
			return true
		}
	}
	return false
}

// NodeAuthorizer is kube-apiserver's Node authorizer for isle's boards: a
// node's credential reads the Secrets, ConfigMaps, claims, volumes and
// service accounts of the pods bound to it (and the TLS Secrets of the
// Ingresses its ingress serves), all pods, Nodes, Services,
// EndpointSlices, Ingresses, IngressClasses and RuntimeClasses, and the
// Namespaces and NetworkPolicies its policy rules are made of; it writes
// its own Node and Lease, the status of its pods, deletes its pods (to end
// their graceful deletion), and writes Events. What else a node asks is
// left to RBAC; what it writes to its Node, NodeRestriction checks.
type NodeAuthorizer struct {
	Index *Index
	// IsServer reports whether node is a server board (a member of the
	// control plane). nil: none is.
	IsServer func(node string) bool
}

// Authorize decides a request of a node.
func (n *NodeAuthorizer) Authorize(a Attributes) (Decision, string) {
	node := NodeName(a.User)
	if node == "" || !a.ResourceRequest {
		return NoOpinion, ""
	}
	read := oneOf(a.Verb, "get", "list", "watch")
	allowIf := func(ok bool, why string) (Decision, string) {
		if ok {
			return Allow, ""
		}
		return NoOpinion, why
	}
	noRelation := fmt.Sprintf("no relationship found between node '%s' and this object", node)
	core := a.APIGroup == ""
	switch {
	case core && a.Subresource == "" && oneOf(a.Resource, "secrets", "configmaps", "persistentvolumeclaims", "serviceaccounts"):
		if !read {
			return NoOpinion, "can only read resources of this type"
		}
		if a.Name == "" {
			return NoOpinion, "can only get individual resources of this type"
		}
		kind := map[string]refKind{"secrets": refSecret, "configmaps": refConfigMap, "persistentvolumeclaims": refClaim, "serviceaccounts": refServiceAccount}[a.Resource]
		if n.Index.refersTo(node, ref{kind: kind, namespace: a.Namespace, name: a.Name}) {
			return Allow, ""
		}
		return allowIf(kind == refSecret && n.Index.ingressSecret(a.Namespace, a.Name), noRelation)
	case core && a.Resource == "serviceaccounts" && a.Subresource == "token":
		return allowIf(a.Verb == "create" && n.Index.refersTo(node, ref{kind: refServiceAccount, namespace: a.Namespace, name: a.Name}), noRelation)
	case core && a.Resource == "persistentvolumes" && a.Subresource == "":
		switch {
		case a.Verb == "get" && a.Name != "":
			return allowIf(n.Index.nodeVolume(node, a.Name), noRelation)
		case oneOf(a.Verb, "list", "watch"):
			return allowIf(selectsOnly(a.LabelSelector, wire.LabelLocalPathNode, node),
				fmt.Sprintf("can only list volumes labelled %s=%s", wire.LabelLocalPathNode, node))
		case oneOf(a.Verb, "update", "patch"):
			// A volume only this node mounts (isle's local-path volumes):
			// its agent removes the cleanup finalizer once it removed the
			// data.
			return allowIf(n.Index.volumeOnlyOn(a.Name, node), noRelation)
		}
		return NoOpinion, ""
	case core && a.Resource == "pods":
		switch a.Subresource {
		case "":
			if read {
				return Allow, ""
			}
			if a.Verb == "delete" {
				return allowIf(n.Index.boundTo(a.Namespace, a.Name, node), noRelation)
			}
		case "status":
			if oneOf(a.Verb, "update", "patch") {
				return allowIf(n.Index.boundTo(a.Namespace, a.Name, node), noRelation)
			}
		case "eviction":
			if a.Verb == "create" {
				return allowIf(n.Index.boundTo(a.Namespace, a.Name, node), noRelation)
			}
		}
		return NoOpinion, ""
	case core && a.Resource == "nodes":
		switch {
		case read && a.Subresource == "":
			return Allow, ""
		case a.Subresource == "" && oneOf(a.Verb, "create", "update", "patch"),
			a.Subresource == "status" && oneOf(a.Verb, "update", "patch"):
			return allowIf(a.Name == node, fmt.Sprintf("node '%s' cannot modify node '%s'", node, a.Name))
		}
		return NoOpinion, ""
	case (core || a.APIGroup == "events.k8s.io") && a.Resource == "events" && a.Subresource == "":
		return allowIf(oneOf(a.Verb, "create", "update", "patch"), "")
	case a.APIGroup == "coordination.k8s.io" && a.Resource == "leases" && a.Subresource == "":
		return allowIf(a.Namespace == NodeLeaseNamespace && a.Name == node && oneOf(a.Verb, "get", "create", "update", "patch", "delete"),
			"can only access node lease with the same name as the requesting node")
	case a.Subresource == "" && read && (core && a.Resource == "services" ||
		a.APIGroup == "discovery.k8s.io" && a.Resource == "endpointslices" ||
		core && a.Resource == "namespaces" ||
		a.APIGroup == "networking.k8s.io" && oneOf(a.Resource, "ingresses", "ingressclasses", "networkpolicies") ||
		a.APIGroup == "node.k8s.io" && a.Resource == "runtimeclasses"):
		return Allow, ""
	}
	return NoOpinion, ""
}

// selectsOnly reports whether a label selector requires key=value.
func selectsOnly(selector, key, value string) bool {
	sel, err := labels.Parse(selector)
	if err != nil {
		return false
	}
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		if r.Key() != key {
			continue
		}
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			if vals := r.Values(); vals.Len() == 1 && vals.Has(value) {
				return true
			}
		}
	}
	return false
}

func oneOf(s string, set ...string) bool { return slices.Contains(set, s) }

// volumeOnlyOn reports whether the PersistentVolume name's required node
// affinity admits only node (kubernetes.io/hostname In [node]).
func (x *Index) volumeOnlyOn(name, node string) bool {
	res, ok := x.store.Resources().Lookup(corev1.SchemeGroupVersion.WithResource("persistentvolumes"))
	if !ok {
		return false
	}
	obj, err := x.store.Get(context.Background(), res, "", name, metav1.GetOptions{ResourceVersion: "0"})
	if err != nil {
		return false
	}
	return wire.VolumeOnlyOn(obj.(*corev1.PersistentVolume), node)
}
