package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// User is an authenticated identity.
type User struct {
	Name   string
	Groups []string
}

// Well-known groups and name prefixes, as in Kubernetes.
const (
	GroupMasters     = "system:masters"
	GroupNodes       = "system:nodes"
	NodeUserPrefix   = "system:node:"
	NodeLeaseNS      = "kube-node-lease"
	unauthorizedText = "Unauthorized"
)

// TokenAuthenticator resolves a bearer token to a user.
type TokenAuthenticator func(ctx context.Context, token string) (*User, bool)

// authenticate returns the request's user: a client certificate the TLS
// layer verified against the cluster CA (CN = name, O = groups), or a
// bearer token. nil means anonymous.
func (s *Server) authenticate(r *http.Request) *User {
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		c := r.TLS.VerifiedChains[0][0]
		return &User{Name: c.Subject.CommonName, Groups: c.Subject.Organization}
	}
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") && s.cfg.Tokens != nil {
		if u, ok := s.cfg.Tokens(r.Context(), strings.TrimSpace(strings.TrimPrefix(h, "Bearer "))); ok {
			return u
		}
	}
	return nil
}

func unauthorized() error {
	return apierrors.NewUnauthorized(unauthorizedText)
}

func schemaGR(resource string) schema.GroupResource { return schema.GroupResource{Resource: resource} }

// authorize decides whether u may make the resource request. Administrators
// (system:masters) may do anything. A node (system:nodes) may read
// everything, write its own Node, the status of pods bound to it, delete
// those pods (to finish their graceful deletion), write events, its own
// Lease in kube-node-lease, and the volumes only it mounts. Anyone else may do nothing yet.
func (s *Server) authorize(ctx context.Context, u *User, req request) error {
	if slices.Contains(u.Groups, GroupMasters) {
		return nil
	}
	if slices.Contains(u.Groups, GroupNodes) && strings.HasPrefix(u.Name, NodeUserPrefix) {
		if s.nodeMay(ctx, strings.TrimPrefix(u.Name, NodeUserPrefix), req) {
			return nil
		}
	}
	res := req.Resource.Resource
	if req.Subresource != "" {
		res += "/" + req.Subresource
	}
	scope := "at the cluster scope"
	if req.Namespace != "" {
		scope = fmt.Sprintf("in the namespace %q", req.Namespace)
	}
	return apierrors.NewForbidden(req.Resource.GroupVersionResource.GroupResource(), req.Name,
		fmt.Errorf("User %q cannot %s resource %q in API group %q %s", u.Name, req.Verb, res, req.Resource.Group, scope))
}

func (s *Server) nodeMay(ctx context.Context, node string, req request) bool {
	if isProxy(req) {
		return false // a node's credential reaches no pod through the API server
	}
	if oneOf(req.Verb, "get", "list", "watch") {
		return true
	}
	res := req.Resource
	switch {
	case res.Group == "" && res.Resource == "nodes":
		return req.Name == node && oneOf(req.Verb, "create", "update", "patch")
	case res.Group == "" && res.Resource == "events":
		return oneOf(req.Verb, "create", "update", "patch")
	case res.Group == "coordination.k8s.io" && res.Resource == "leases":
		return req.Namespace == NodeLeaseNS && req.Name == node
	case res.Group == "" && res.Resource == "pods":
		if !(req.Subresource == "status" && oneOf(req.Verb, "update", "patch")) && !(req.Subresource == "" && req.Verb == "delete") {
			return false
		}
		obj, err := s.store.Get(ctx, res, req.Namespace, req.Name, metav1.GetOptions{ResourceVersion: "0"})
		if err != nil {
			return false
		}
		return obj.(*corev1.Pod).Spec.NodeName == node
	case res.Group == "" && res.Resource == "persistentvolumes":
		// A volume only this node mounts (isle's local-path volumes): its
		// agent removes the cleanup finalizer once it removed the data.
		if req.Subresource != "" || !oneOf(req.Verb, "update", "patch") {
			return false
		}
		obj, err := s.store.Get(ctx, res, "", req.Name, metav1.GetOptions{ResourceVersion: "0"})
		if err != nil {
			return false
		}
		return volumeOnlyOn(obj.(*corev1.PersistentVolume), node)
	}
	return false
}

// volumeOnlyOn reports whether pv's required node affinity admits only the
// node (kubernetes.io/hostname In [node]).
func volumeOnlyOn(pv *corev1.PersistentVolume, node string) bool {
	na := pv.Spec.NodeAffinity
	if na == nil || na.Required == nil || len(na.Required.NodeSelectorTerms) == 0 {
		return false
	}
	for _, term := range na.Required.NodeSelectorTerms {
		ok := false
		for _, e := range term.MatchExpressions {
			if e.Key == corev1.LabelHostname && e.Operator == corev1.NodeSelectorOpIn && len(e.Values) == 1 && e.Values[0] == node {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}
