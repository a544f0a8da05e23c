package apiserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/isle-cluster/isle/control/authz"
	"github.com/isle-cluster/isle/control/satoken"
)

// User is an authenticated identity.
type User = authz.User

const unauthorizedText = "Unauthorized"

// TokenAuthenticator resolves a bearer token to a user.
type TokenAuthenticator func(ctx context.Context, token string) (*User, bool)

// authenticate returns the request's user: a client certificate the TLS
// layer verified against the cluster CA (CN = name, O = groups), or a
// bearer token; every one is in system:authenticated. nil means
// anonymous.
func (s *Server) authenticate(r *http.Request) *User {
	var u *User
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		c := r.TLS.VerifiedChains[0][0]
		if s.cfg.CertRevoked != nil && s.cfg.CertRevoked(c) {
			return nil
		}
		u = &User{Name: c.Subject.CommonName, Groups: slices.Clone(c.Subject.Organization)}
	} else if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		token := strings.TrimSpace(strings.TrimPrefix(h, "Bearer "))
		var found *User
		switch {
		case s.cfg.ServiceAccounts != nil && satoken.LooksLikeJWT(token):
			found, _ = s.serviceAccountUser(r.Context(), token, []string{APIAudience})
		case s.cfg.Tokens != nil:
			found, _ = s.cfg.Tokens(r.Context(), token)
		}
		if found == nil {
			return nil
		}
		u = &User{Name: found.Name, UID: found.UID, Groups: slices.Clone(found.Groups), Extra: found.Extra}
	}
	if u == nil {
		return nil
	}
	if !u.InGroup(authz.GroupAuthenticated) {
		u.Groups = append(u.Groups, authz.GroupAuthenticated)
	}
	return u
}

func unauthorized() error {
	return apierrors.NewUnauthorized(unauthorizedText)
}

func schemaGR(resource string) schema.GroupResource { return schema.GroupResource{Resource: resource} }

// attributes are what a resource request asks, for the authorizers: a
// list's or watch's field selector metadata.name=NAME names the object,
// as in kube-apiserver.
func attributes(r *http.Request, u *User, req request) authz.Attributes {
	a := authz.Attributes{User: u, Verb: req.Verb, ResourceRequest: true, APIGroup: req.Resource.Group,
		APIVersion: req.GV.Version, Resource: req.Resource.Resource, Subresource: req.Subresource,
		Namespace: req.Namespace, Name: req.Name}
	if oneOf(req.Verb, "list", "watch") {
		q := r.URL.Query()
		a.LabelSelector = q.Get("labelSelector")
		if sel, err := fields.ParseSelector(q.Get("fieldSelector")); err == nil {
			if name, ok := sel.RequiresExactMatch("metadata.name"); ok {
				a.Name = name
			}
		}
	}
	return a
}

// authorize decides whether u may make the resource request.
func (s *Server) authorize(r *http.Request, u *User, req request) error {
	return s.decide(attributes(r, u, req))
}

// authorizePath decides whether u may make a request of a path outside
// the API's resources (discovery, /openapi, /metrics).
func (s *Server) authorizePath(r *http.Request, u *User) error {
	verb := strings.ToLower(r.Method)
	if r.Method == http.MethodHead {
		verb = "get"
	}
	return s.decide(authz.Attributes{User: u, Verb: verb, Path: r.URL.Path})
}

// authzWait bounds how long a request waits for the authorizers to have
// read the store once (a server that just started).
const authzWait = 10 * time.Second

// authzReady waits until the authorizers can decide a request of u
// (system:masters need not wait): 503 if they cannot within authzWait.
func (s *Server) authzReady(r *http.Request, u *User) error {
	if s.cfg.Authz == nil || u.InGroup(authz.GroupMasters) {
		return nil
	}
	t := time.NewTimer(authzWait)
	defer t.Stop()
	select {
	case <-s.cfg.Authz.Synced():
		return nil
	case <-r.Context().Done():
		return r.Context().Err()
	case <-t.C:
		return apierrors.NewServiceUnavailable("the authorizer has not read the store yet; try again")
	}
}

// decide asks the authorizer chain, and words a refusal as kube-apiserver
// does. Without a chain, only system:masters may do anything.
func (s *Server) decide(a authz.Attributes) error {
	d, why := authz.Deny, ""
	if s.cfg.Authz != nil {
		d, why = s.cfg.Authz.Authorize(a)
	} else if a.User.InGroup(authz.GroupMasters) {
		d = authz.Allow
	}
	if d == authz.Allow {
		return nil
	}
	msg := authz.Forbidden(a, why)
	if !a.ResourceRequest {
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden,
			Reason: metav1.StatusReasonForbidden, Message: "forbidden: " + msg}}
	}
	return apierrors.NewForbidden(schema.GroupResource{Group: a.APIGroup, Resource: a.Resource}, a.Name, errors.New(msg))
}

// admission is what a write of u must also pass, given the object as it
// would be stored and as it was (nil on a create): a CSR records its
// requester; RBAC's escalation prevention, NodeRestriction, and the
// approve and sign verbs on a CSR's signer for its conditions and
// certificate.
func (s *Server) admission(u *User) func(ctx context.Context, obj, old runtime.Object) error {
	chain := s.cfg.Authz
	return func(_ context.Context, obj, old runtime.Object) error {
		csr, isCSR := obj.(*certificatesv1.CertificateSigningRequest)
		if isCSR && old == nil {
			csr.Spec.Username, csr.Spec.UID, csr.Spec.Groups, csr.Spec.Extra = u.Name, u.UID, slices.Clone(u.Groups), nil
			for k, v := range u.Extra {
				if csr.Spec.Extra == nil {
					csr.Spec.Extra = map[string]certificatesv1.ExtraValue{}
				}
				csr.Spec.Extra[k] = v
			}
		}
		if chain == nil || u.InGroup(authz.GroupMasters) {
			return nil
		}
		switch o := obj.(type) {
		case *corev1.Node:
			prev, _ := old.(*corev1.Node)
			if chain.Node != nil {
				return chain.Node.AdmitNode(u, o, prev)
			}
			return nil
		case *certificatesv1.CertificateSigningRequest:
			prev, _ := old.(*certificatesv1.CertificateSigningRequest)
			return s.admitCSR(u, o, prev)
		}
		return chain.AdmitRBAC(u, obj, old)
	}
}

// admitCSR is kube-apiserver's CertificateApproval and CertificateSigning:
// a change of a CSR's Approved or Denied condition needs the approve verb,
// and of its certificate the sign verb, on its signer (signers NAME, or
// DOMAIN/* for all a domain's).
func (s *Server) admitCSR(u *User, csr, old *certificatesv1.CertificateSigningRequest) error {
	if old == nil {
		return nil
	}
	may := func(verb string) bool {
		domain, _, _ := strings.Cut(csr.Spec.SignerName, "/")
		for _, name := range []string{csr.Spec.SignerName, domain + "/*"} {
			d, _ := s.cfg.Authz.Authorize(authz.Attributes{User: u, Verb: verb, ResourceRequest: true, APIGroup: certificatesv1.GroupName,
				APIVersion: "v1", Resource: "signers", Name: name})
			if d == authz.Allow {
				return true
			}
		}
		return false
	}
	gr := certificatesv1.Resource("certificatesigningrequests")
	if decided(csr) != decided(old) && !may("approve") {
		return apierrors.NewForbidden(gr, csr.Name, fmt.Errorf("user not permitted to approve requests with signerName %q", csr.Spec.SignerName))
	}
	if !bytes.Equal(csr.Status.Certificate, old.Status.Certificate) && !may("sign") {
		return apierrors.NewForbidden(gr, csr.Name, fmt.Errorf("user not permitted to sign requests with signerName %q", csr.Spec.SignerName))
	}
	return nil
}

// decided is a CSR's Approved and Denied conditions.
func decided(c *certificatesv1.CertificateSigningRequest) string {
	var out []string
	for _, cond := range c.Status.Conditions {
		if cond.Type == certificatesv1.CertificateApproved || cond.Type == certificatesv1.CertificateDenied {
			out = append(out, string(cond.Type)+"="+string(cond.Status))
		}
	}
	return strings.Join(out, ",")
}

// impersonate is the user a request acts as: u itself, or the user its
// Impersonate-* headers name when u may impersonate each part of it (the
// impersonate verb on users, groups, uids, userextras and service
// accounts), as kube-apiserver's impersonation filter does.
func (s *Server) impersonate(r *http.Request, u *User) (*User, error) {
	name := r.Header.Get("Impersonate-User")
	groups := r.Header.Values("Impersonate-Group")
	uid := r.Header.Get("Impersonate-Uid")
	extra := map[string][]string{}
	for k, vs := range r.Header {
		if key, ok := strings.CutPrefix(k, "Impersonate-Extra-"); ok {
			if k, err := url.PathUnescape(key); err == nil {
				key = k
			}
			extra[strings.ToLower(key)] = vs
		}
	}
	if name == "" {
		if len(groups) > 0 || uid != "" || len(extra) > 0 {
			return nil, apierrors.NewBadRequest("requested impersonation of groups, a uid or extra fields without impersonating a user")
		}
		return u, nil
	}
	check := func(a authz.Attributes) error {
		a.User, a.Verb, a.ResourceRequest = u, "impersonate", true
		return s.decide(a)
	}
	if ns, sa, ok := strings.Cut(strings.TrimPrefix(name, authz.ServiceAccountPrefix), ":"); ok && strings.HasPrefix(name, authz.ServiceAccountPrefix) {
		if err := check(authz.Attributes{Resource: "serviceaccounts", Namespace: ns, Name: sa}); err != nil {
			return nil, err
		}
	} else if err := check(authz.Attributes{Resource: "users", Name: name}); err != nil {
		return nil, err
	}
	for _, g := range groups {
		if err := check(authz.Attributes{Resource: "groups", Name: g}); err != nil {
			return nil, err
		}
	}
	if uid != "" {
		if err := check(authz.Attributes{APIGroup: "authentication.k8s.io", Resource: "uids", Name: uid}); err != nil {
			return nil, err
		}
	}
	for k, vs := range extra {
		for _, v := range vs {
			if err := check(authz.Attributes{APIGroup: "authentication.k8s.io", Resource: "userextras", Subresource: k, Name: v}); err != nil {
				return nil, err
			}
		}
	}
	out := &User{Name: name, UID: uid, Groups: slices.Clone(groups)}
	if len(extra) > 0 {
		out.Extra = extra
	}
	if ns, _, ok := strings.Cut(strings.TrimPrefix(name, authz.ServiceAccountPrefix), ":"); ok && strings.HasPrefix(name, authz.ServiceAccountPrefix) && len(groups) == 0 {
		out.Groups = []string{authz.GroupServiceAccounts, authz.GroupServiceAccounts + ":" + ns}
	}
	if name != authz.Anonymous && !out.InGroup(authz.GroupAuthenticated) {
		out.Groups = append(out.Groups, authz.GroupAuthenticated)
	}
	return out, nil
}
