package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/isle-cluster/isle/control/authz"
	"github.com/isle-cluster/isle/control/satoken"
)

// ServiceAccountTokens issues and verifies service-account tokens
// (control/satoken, with the keys a server holds).
type ServiceAccountTokens interface {
	Issue(req satoken.Request) (token string, expires time.Time, err error)
	// IssueLegacy signs a kubernetes.io/service-account-token Secret's
	// token (satoken.IssueLegacy).
	IssueLegacy(namespace, serviceAccount, saUID, secret string) (string, error)
	Verify(token string, audiences []string) (*satoken.Claims, error)
	JWKS() jose.JSONWebKeySet
}

// APIAudience is the audience of the API server's own tokens, as
// kube-apiserver's default: its issuer.
const APIAudience = satoken.Issuer

// Extra keys of a service account's user, as kube-apiserver's.
const (
	extraPodName      = "authentication.kubernetes.io/pod-name"
	extraPodUID       = "authentication.kubernetes.io/pod-uid"
	extraNodeName     = "authentication.kubernetes.io/node-name"
	extraNodeUID      = "authentication.kubernetes.io/node-uid"
	extraCredentialID = "authentication.kubernetes.io/credential-id"
)

// OIDC discovery paths (ServiceAccountIssuerDiscovery).
const (
	oidcConfigPath = "/.well-known/openid-configuration"
	jwksPath       = "/openid/v1/jwks"
)

// serveOIDC answers the issuer discovery paths.
func (s *Server) serveOIDC(w http.ResponseWriter, r *http.Request) {
	if s.cfg.ServiceAccounts == nil {
		s.writeError(w, r, notFound())
		return
	}
	if r.URL.Path == jwksPath {
		w.Header().Set("Content-Type", "application/jwk-set+json")
		writeBody(w, http.StatusOK, output{}, s.cfg.ServiceAccounts.JWKS())
		return
	}
	writeBody(w, http.StatusOK, output{}, satoken.Discovery())
}

// serviceAccountUser authenticates a service-account token for
// audiences: signed by a key of the cluster, unexpired, and bound to a
// service account (and pod, or Secret) that still exists with the uid it
// names.
func (s *Server) serviceAccountUser(ctx context.Context, token string, audiences []string) (*User, error) {
	c, err := s.cfg.ServiceAccounts.Verify(token, audiences)
	if err != nil {
		return nil, err
	}
	k := c.Kubernetes
	get := func(resource, ns, name string) (metav1.Object, error) {
		res, ok := s.store.Resources().Lookup(corev1.SchemeGroupVersion.WithResource(resource))
		if !ok {
			return nil, fmt.Errorf("%s not served", resource)
		}
		obj, err := s.store.Get(ctx, res, ns, name, metav1.GetOptions{ResourceVersion: "0"})
		if err != nil {
			return nil, err
		}
		return obj.(metav1.Object), nil
	}
	sa, err := get("serviceaccounts", k.Namespace, k.ServiceAccount.Name)
	if err != nil || string(sa.GetUID()) != k.ServiceAccount.UID {
		return nil, fmt.Errorf("service account %s/%s is gone or was made again", k.Namespace, k.ServiceAccount.Name)
	}
	u := &User{Name: authz.ServiceAccountUser(k.Namespace, k.ServiceAccount.Name), UID: k.ServiceAccount.UID,
		Groups: []string{authz.GroupServiceAccounts, authz.GroupServiceAccounts + ":" + k.Namespace}, Extra: map[string][]string{}}
	if p := k.Pod; p != nil {
		pod, err := get("pods", k.Namespace, p.Name)
		if err != nil || string(pod.GetUID()) != p.UID || pod.GetDeletionTimestamp() != nil && pod.GetDeletionTimestamp().Add(time.Minute).Before(time.Now()) {
			return nil, fmt.Errorf("pod %s/%s the token is bound to is gone", k.Namespace, p.Name)
		}
		u.Extra[extraPodName], u.Extra[extraPodUID] = []string{p.Name}, []string{p.UID}
	}
	if sec := k.Secret; sec != nil {
		obj, err := get("secrets", k.Namespace, sec.Name)
		switch {
		case err != nil || !c.Legacy && string(obj.GetUID()) != sec.UID:
			return nil, fmt.Errorf("secret %s/%s the token is bound to is gone", k.Namespace, sec.Name)
		case c.Legacy && string(obj.(*corev1.Secret).Data[corev1.ServiceAccountTokenKey]) != token:
			// A Secret's token is valid while the Secret holds it.
			return nil, fmt.Errorf("the token of secret %s/%s was replaced", k.Namespace, sec.Name)
		}
	}
	if n := k.Node; n != nil {
		u.Extra[extraNodeName] = []string{n.Name}
		if n.UID != "" {
			u.Extra[extraNodeUID] = []string{n.UID}
		}
	}
	if c.ID != "" {
		u.Extra[extraCredentialID] = []string{"JTI=" + c.ID}
	}
	return u, nil
}

// serveTokenRequest answers POST serviceaccounts/NAME/token: a token for
// the service account, for the audiences and time asked (an hour and the
// API server by default), bound to a pod or Secret if asked.
func (s *Server) serveTokenRequest(w http.ResponseWriter, r *http.Request, req request, body []byte) {
	gr := schema.GroupResource{Resource: "serviceaccounts"}
	if s.cfg.ServiceAccounts == nil {
		s.writeError(w, r, apierrors.NewServiceUnavailable("this API server issues no service-account tokens"))
		return
	}
	want := authenticationv1.SchemeGroupVersion.WithKind("TokenRequest")
	obj, got, err := reviewCodecs.UniversalDeserializer().Decode(body, &want, nil)
	if err != nil || got.GroupKind() != want.GroupKind() {
		s.writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("the body is not a TokenRequest: %v", err)))
		return
	}
	tr := obj.(*authenticationv1.TokenRequest)
	spec := field.NewPath("spec")
	var errs field.ErrorList
	exp := int64(satoken.DefaultExpiration / time.Second)
	if tr.Spec.ExpirationSeconds != nil {
		exp = *tr.Spec.ExpirationSeconds
	}
	switch {
	case exp < int64(satoken.MinExpiration/time.Second):
		errs = append(errs, field.Invalid(spec.Child("expirationSeconds"), exp, "may not specify a duration less than 10 minutes"))
	case exp > int64(satoken.MaxExpiration/time.Second):
		errs = append(errs, field.Invalid(spec.Child("expirationSeconds"), exp, "may not specify a duration larger than 2^32 seconds"))
	}
	if len(tr.Spec.Audiences) == 0 {
		tr.Spec.Audiences = []string{APIAudience}
	}
	if len(tr.Spec.Audiences) > 16 || slices.Contains(tr.Spec.Audiences, "") {
		errs = append(errs, field.Invalid(spec.Child("audiences"), tr.Spec.Audiences, "at most 16 audiences, none empty"))
	}
	if len(errs) > 0 {
		s.writeError(w, r, apierrors.NewInvalid(want.GroupKind(), req.Name, errs))
		return
	}
	ctx := r.Context()
	saRes, _ := s.store.Resources().Lookup(corev1.SchemeGroupVersion.WithResource("serviceaccounts"))
	saObj, err := s.store.Get(ctx, saRes, req.Namespace, req.Name, metav1.GetOptions{})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	sa := saObj.(*corev1.ServiceAccount)
	treq := satoken.Request{Namespace: req.Namespace, ServiceAccount: sa.Name, ServiceAccountUID: string(sa.UID),
		Audiences: tr.Spec.Audiences, Expiration: time.Duration(exp) * time.Second}
	if ref := tr.Spec.BoundObjectRef; ref != nil {
		bound, err := s.boundObject(ctx, req, ref)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		switch o := bound.(type) {
		case *corev1.Pod:
			if o.Spec.ServiceAccountName != sa.Name && !(o.Spec.ServiceAccountName == "" && sa.Name == "default") {
				s.writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("cannot bind a token of service account %s to pod %s: it runs as %s", sa.Name, o.Name, o.Spec.ServiceAccountName)))
				return
			}
			treq.Pod = &satoken.Ref{Name: o.Name, UID: string(o.UID)}
			if o.Spec.NodeName != "" {
				// The node's uid too, as kube-apiserver puts it in the
				// token (the user's node-uid extra).
				treq.Node = &satoken.Ref{Name: o.Spec.NodeName}
				if nodeRes, ok := s.store.Resources().Lookup(corev1.SchemeGroupVersion.WithResource("nodes")); ok {
					if n, err := s.store.Get(ctx, nodeRes, "", o.Spec.NodeName, metav1.GetOptions{ResourceVersion: "0"}); err == nil {
						treq.Node.UID = string(n.(metav1.Object).GetUID())
					}
				}
			}
		case *corev1.Secret:
			treq.Secret = &satoken.Ref{Name: o.Name, UID: string(o.UID)}
		}
	}
	if node := authz.NodeName(userFrom(ctx)); node != "" && (treq.Node == nil || treq.Node.Name != node) {
		// A node asks tokens for its own pods alone (NodeRestriction).
		s.writeError(w, r, apierrors.NewForbidden(gr, req.Name, fmt.Errorf("node %q can only create tokens bound to pods scheduled to it", node)))
		return
	}
	token, expires, err := s.cfg.ServiceAccounts.Issue(treq)
	if err != nil {
		s.writeError(w, r, apierrors.NewInternalError(err))
		return
	}
	tr.Spec.ExpirationSeconds = &exp
	tr.Status = authenticationv1.TokenRequestStatus{Token: token, ExpirationTimestamp: metav1.NewTime(expires)}
	tr.TypeMeta = metav1.TypeMeta{APIVersion: want.GroupVersion().String(), Kind: want.Kind}
	tr.Name, tr.Namespace = req.Name, req.Namespace
	tr.CreationTimestamp = metav1.NewTime(expires.Add(-time.Duration(exp) * time.Second))
	writeBody(w, http.StatusCreated, output{}, tr)
}

// boundObject is the pod or Secret a TokenRequest names, with the uid it
// names if any.
func (s *Server) boundObject(ctx context.Context, req request, ref *authenticationv1.BoundObjectReference) (metav1.Object, error) {
	path := field.NewPath("spec", "boundObjectRef")
	resource := map[string]string{"Pod": "pods", "Secret": "secrets"}[ref.Kind]
	if resource == "" || ref.APIVersion != "" && ref.APIVersion != "v1" {
		return nil, apierrors.NewInvalid(authenticationv1.SchemeGroupVersion.WithKind("TokenRequest").GroupKind(), req.Name,
			field.ErrorList{field.NotSupported(path.Child("kind"), ref.Kind, []string{"Pod", "Secret"})})
	}
	res, _ := s.store.Resources().Lookup(corev1.SchemeGroupVersion.WithResource(resource))
	obj, err := s.store.Get(ctx, res, req.Namespace, ref.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	m := obj.(metav1.Object)
	if ref.UID != "" && ref.UID != m.GetUID() {
		return nil, apierrors.NewConflict(res.GroupVersionResource.GroupResource(), ref.Name,
			fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record (%s); the object might have been deleted and then recreated", ref.UID, m.GetUID()))
	}
	return m, nil
}
