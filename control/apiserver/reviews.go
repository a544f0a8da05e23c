package apiserver

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	authenticationv1 "k8s.io/api/authentication/v1"
	authenticationv1beta1 "k8s.io/api/authentication/v1beta1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/isle-cluster/isle/control/authz"
	"github.com/isle-cluster/isle/control/satoken"
)

// The review APIs: objects that are created, answered and never stored.
// authentication.k8s.io: SelfSubjectReview (`kubectl auth whoami`, v1 and
// the v1beta1 kubectl 1.27 asks for) and TokenReview; authorization.k8s.io:
// SubjectAccessReview, LocalSubjectAccessReview, SelfSubjectAccessReview
// (`kubectl auth can-i`) and SelfSubjectRulesReview (`kubectl auth can-i
// --list`), each answered by the authorizer chain, as kube-apiserver does.

// review is one review resource.
type review struct {
	group, resource, kind string
	versions              []string
	namespaced            bool
	// answer fills in the status of in, a decoded review of u (ns is the
	// URL's namespace of a namespaced one).
	answer func(ctx context.Context, s *Server, u *User, ns string, in runtime.Object) error
}

const (
	authnGroup = authenticationv1.GroupName
	authzGroup = authorizationv1.GroupName
)

var reviews = []review{
	{group: authnGroup, resource: "selfsubjectreviews", kind: "SelfSubjectReview", versions: []string{"v1", "v1beta1"}, answer: answerSelfSubjectReview},
	{group: authnGroup, resource: "tokenreviews", kind: "TokenReview", versions: []string{"v1"}, answer: answerTokenReview},
	{group: authzGroup, resource: "subjectaccessreviews", kind: "SubjectAccessReview", versions: []string{"v1"}, answer: answerSubjectAccessReview},
	{group: authzGroup, resource: "localsubjectaccessreviews", kind: "LocalSubjectAccessReview", versions: []string{"v1"}, namespaced: true, answer: answerLocalSubjectAccessReview},
	{group: authzGroup, resource: "selfsubjectaccessreviews", kind: "SelfSubjectAccessReview", versions: []string{"v1"}, answer: answerSelfSubjectAccessReview},
	{group: authzGroup, resource: "selfsubjectrulesreviews", kind: "SelfSubjectRulesReview", versions: []string{"v1"}, answer: answerSelfSubjectRulesReview},
}

// reviewGroups are the groups of the reviews, with their versions,
// preferred first.
func reviewGroups() []metav1.APIGroup {
	var out []metav1.APIGroup
	for _, rv := range reviews {
		i := slices.IndexFunc(out, func(g metav1.APIGroup) bool { return g.Name == rv.group })
		if i < 0 {
			out = append(out, metav1.APIGroup{Name: rv.group})
			i = len(out) - 1
		}
		for _, v := range rv.versions {
			gv := metav1.GroupVersionForDiscovery{GroupVersion: rv.group + "/" + v, Version: v}
			if !slices.Contains(out[i].Versions, gv) {
				out[i].Versions = append(out[i].Versions, gv)
			}
		}
		out[i].PreferredVersion = out[i].Versions[0]
	}
	return out
}

func isReviewGroup(group string) bool {
	return group == authnGroup || group == authzGroup
}

// reviewResourceList is the discovery document of gv, if reviews are in it.
func reviewResourceList(gv schema.GroupVersion) (*metav1.APIResourceList, bool) {
	list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv.String()}
	for _, rv := range reviews {
		if rv.group == gv.Group && slices.Contains(rv.versions, gv.Version) {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: rv.resource, Namespaced: rv.namespaced, Kind: rv.kind, Verbs: []string{"create"}})
		}
	}
	return list, len(list.APIResources) > 0
}

// reviewGroupDiscovery is group's aggregated discovery document.
func reviewGroupDiscovery(group string) apidiscoveryv2.APIGroupDiscovery {
	gd := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: group}}
	for _, g := range reviewGroups() {
		if g.Name != group {
			continue
		}
		for _, v := range g.Versions {
			vd := apidiscoveryv2.APIVersionDiscovery{Version: v.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
			for _, rv := range reviews {
				if rv.group != group || !slices.Contains(rv.versions, v.Version) {
					continue
				}
				scope := apidiscoveryv2.ScopeCluster
				if rv.namespaced {
					scope = apidiscoveryv2.ScopeNamespace
				}
				vd.Resources = append(vd.Resources, apidiscoveryv2.APIResourceDiscovery{Resource: rv.resource, Scope: scope, Verbs: []string{"create"},
					ResponseKind: &metav1.GroupVersionKind{Group: group, Version: v.Version, Kind: rv.kind}})
			}
			gd.Versions = append(gd.Versions, vd)
		}
	}
	return gd
}

// reviewScheme knows the reviews' Go types.
var reviewScheme = func() *runtime.Scheme {
	scheme := runtime.NewScheme()
	utilruntime.Must(authenticationv1.AddToScheme(scheme))
	utilruntime.Must(authenticationv1beta1.AddToScheme(scheme))
	utilruntime.Must(authorizationv1.AddToScheme(scheme))
	return scheme
}()

// reviewCodecs decode the reviews as JSON, YAML or protobuf (kubectl's).
var reviewCodecs = serializer.NewCodecFactory(reviewScheme)

// maxReviewBytes bounds a review's body.
const maxReviewBytes = 64 << 10

// parseReviewPath finds the review of /apis/G/V/R or
// /apis/G/V/namespaces/NS/R.
func parseReviewPath(path string) (rv *review, version, ns string, found bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) < 4 || parts[0] != "apis" || !isReviewGroup(parts[1]) {
		return nil, "", "", false
	}
	group, version, rest := parts[1], parts[2], parts[3:]
	if len(rest) == 3 && rest[0] == "namespaces" {
		ns, rest = rest[1], rest[2:]
	}
	if len(rest) != 1 {
		return nil, version, ns, true
	}
	for i := range reviews {
		r := &reviews[i]
		if r.group == group && r.resource == rest[0] && slices.Contains(r.versions, version) && r.namespaced == (ns != "") {
			return r, version, ns, true
		}
	}
	return nil, version, ns, true
}

// isReviewPath reports whether path is under a review group's version.
func isReviewPath(path string) bool {
	_, _, _, found := parseReviewPath(path)
	return found
}

// serveReview answers the creation of a review.
func (s *Server) serveReview(w http.ResponseWriter, r *http.Request, u *User) (verb, resource string) {
	rv, version, ns, _ := parseReviewPath(r.URL.Path)
	if rv == nil {
		s.writeError(w, r, notFound())
		return "notfound", ""
	}
	resource = rv.resource + "." + rv.group
	gr := schema.GroupResource{Group: rv.group, Resource: rv.resource}
	if r.Method != http.MethodPost {
		s.writeError(w, r, apierrors.NewMethodNotSupported(gr, r.Method))
		return "unsupported", resource
	}
	if err := s.decide(authz.Attributes{User: u, Verb: "create", ResourceRequest: true, APIGroup: rv.group, APIVersion: version,
		Resource: rv.resource, Namespace: ns}); err != nil {
		s.writeError(w, r, err)
		return "create", resource
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReviewBytes+1))
	switch {
	case err != nil:
		s.writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("read the body: %v", err)))
		return "create", resource
	case len(body) > maxReviewBytes:
		s.writeError(w, r, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("a %s of more than %d bytes", rv.kind, maxReviewBytes)))
		return "create", resource
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == "" {
		mt = runtime.ContentTypeJSON
	}
	info, ok := runtime.SerializerInfoForMediaType(reviewCodecs.SupportedMediaTypes(), mt)
	if !ok {
		s.writeError(w, r, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "", schemaGR(""), "",
			fmt.Sprintf("the body of the request was in an unknown format (%s); accepted media types: application/json, application/yaml, application/vnd.kubernetes.protobuf", mt), 0, false))
		return "create", resource
	}
	want := schema.GroupVersionKind{Group: rv.group, Version: version, Kind: rv.kind}
	obj, got, err := info.Serializer.Decode(body, &want, nil)
	if err != nil {
		s.writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("the body is not a %s: %v", rv.kind, err)))
		return "create", resource
	}
	if got.GroupKind() != want.GroupKind() {
		s.writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("the body is a %s, not a %s", got.Kind, rv.kind)))
		return "create", resource
	}
	if err := rv.answer(r.Context(), s, u, ns, obj); err != nil {
		s.writeError(w, r, err)
		return "create", resource
	}
	obj.GetObjectKind().SetGroupVersionKind(want)
	if m, ok := obj.(metav1.Object); ok {
		m.SetCreationTimestamp(metav1.NewTime(time.Now().Truncate(time.Second)))
	}
	writeBody(w, http.StatusCreated, output{}, obj)
	return "create", resource
}

func userInfo(u *User) authenticationv1.UserInfo {
	info := authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups}
	for k, v := range u.Extra {
		if info.Extra == nil {
			info.Extra = map[string]authenticationv1.ExtraValue{}
		}
		info.Extra[k] = v
	}
	return info
}

func answerSelfSubjectReview(ctx context.Context, _ *Server, u *User, _ string, in runtime.Object) error {
	switch o := in.(type) {
	case *authenticationv1.SelfSubjectReview:
		o.Status.UserInfo = userInfo(u)
	case *authenticationv1beta1.SelfSubjectReview:
		o.Status.UserInfo = userInfo(u)
	}
	return nil
}

func answerTokenReview(ctx context.Context, s *Server, _ *User, _ string, in runtime.Object) error {
	tr := in.(*authenticationv1.TokenReview)
	if tr.Spec.Token == "" {
		return apierrors.NewBadRequest("token is required for TokenReview in authentication")
	}
	tr.Status = authenticationv1.TokenReviewStatus{}
	audiences := tr.Spec.Audiences
	if len(audiences) == 0 {
		audiences = []string{APIAudience}
	}
	var found *User
	switch {
	case s.cfg.ServiceAccounts != nil && satoken.LooksLikeJWT(tr.Spec.Token):
		u, err := s.serviceAccountUser(ctx, tr.Spec.Token, audiences)
		if err != nil {
			tr.Status.Error = err.Error()
			return nil
		}
		found = u
		for _, a := range audiences {
			if slices.Contains(tr.Spec.Audiences, a) || len(tr.Spec.Audiences) == 0 {
				tr.Status.Audiences = append(tr.Status.Audiences, a)
			}
		}
	case !slices.Contains(audiences, APIAudience):
		tr.Status.Error = "token audiences are invalid for the target audiences"
		return nil
	case s.cfg.Tokens != nil:
		found, _ = s.cfg.Tokens(ctx, tr.Spec.Token)
		tr.Status.Audiences = []string{APIAudience}
	}
	if found == nil {
		tr.Status.Audiences = nil
		tr.Status.Error = "invalid bearer token"
		return nil
	}
	u := &User{Name: found.Name, UID: found.UID, Groups: slices.Clone(found.Groups), Extra: found.Extra}
	if !u.InGroup(authz.GroupAuthenticated) {
		u.Groups = append(u.Groups, authz.GroupAuthenticated)
	}
	tr.Status.Authenticated, tr.Status.User = true, userInfo(u)
	return nil
}

// accessAttributes are the authorizer's attributes of a review's spec.
func accessAttributes(u *User, res *authorizationv1.ResourceAttributes, nonRes *authorizationv1.NonResourceAttributes) authz.Attributes {
	if nonRes != nil {
		return authz.Attributes{User: u, Verb: nonRes.Verb, Path: nonRes.Path}
	}
	return authz.Attributes{User: u, Verb: res.Verb, ResourceRequest: true, APIGroup: res.Group, APIVersion: res.Version,
		Resource: res.Resource, Subresource: res.Subresource, Namespace: res.Namespace, Name: res.Name}
}

// accessStatus is the chain's answer to a.
func (s *Server) accessStatus(a authz.Attributes) authorizationv1.SubjectAccessReviewStatus {
	if s.cfg.Authz == nil {
		return authorizationv1.SubjectAccessReviewStatus{Allowed: a.User.InGroup(authz.GroupMasters)}
	}
	d, why := s.cfg.Authz.Authorize(a)
	return authorizationv1.SubjectAccessReviewStatus{Allowed: d == authz.Allow, Denied: d == authz.Deny, Reason: why}
}

// checkAccessSpec is kube-apiserver's validation of a review's attributes.
func checkAccessSpec(kind string, res *authorizationv1.ResourceAttributes, nonRes *authorizationv1.NonResourceAttributes, errs field.ErrorList) error {
	spec := field.NewPath("spec")
	switch {
	case res != nil && nonRes != nil:
		errs = append(errs, field.Invalid(spec.Child("nonResourceAttributes"), nonRes, "cannot be specified in combination with resourceAttributes"))
	case res == nil && nonRes == nil:
		errs = append(errs, field.Invalid(spec.Child("resourceAttributes"), nonRes, "exactly one of nonResourceAttributes or resourceAttributes must be specified"))
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: authzGroup, Kind: kind}, "", errs)
	}
	return nil
}

func answerSubjectAccessReview(ctx context.Context, s *Server, _ *User, _ string, in runtime.Object) error {
	sar := in.(*authorizationv1.SubjectAccessReview)
	var errs field.ErrorList
	if sar.Spec.User == "" && len(sar.Spec.Groups) == 0 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "user"), sar.Spec.User, "at least one of user or group must be specified"))
	}
	if err := checkAccessSpec("SubjectAccessReview", sar.Spec.ResourceAttributes, sar.Spec.NonResourceAttributes, errs); err != nil {
		return err
	}
	sar.Status = s.accessStatus(accessAttributes(reviewedUser(sar.Spec.User, sar.Spec.UID, sar.Spec.Groups, sar.Spec.Extra),
		sar.Spec.ResourceAttributes, sar.Spec.NonResourceAttributes))
	return nil
}

func answerLocalSubjectAccessReview(ctx context.Context, s *Server, _ *User, ns string, in runtime.Object) error {
	sar := in.(*authorizationv1.LocalSubjectAccessReview)
	var errs field.ErrorList
	if sar.Spec.User == "" && len(sar.Spec.Groups) == 0 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "user"), sar.Spec.User, "at least one of user or group must be specified"))
	}
	if sar.Spec.NonResourceAttributes != nil {
		errs = append(errs, field.Invalid(field.NewPath("spec", "nonResourceAttributes"), sar.Spec.NonResourceAttributes, "disallowed on this kind of request"))
	}
	if err := checkAccessSpec("LocalSubjectAccessReview", sar.Spec.ResourceAttributes, nil, errs); err != nil {
		return err
	}
	if sar.Namespace == "" {
		sar.Namespace = ns
	}
	if sar.Namespace != ns {
		return apierrors.NewBadRequest(fmt.Sprintf("namespace of the request (%s) does not match the namespace of the object (%s)", ns, sar.Namespace))
	}
	if sar.Spec.ResourceAttributes.Namespace == "" {
		sar.Spec.ResourceAttributes.Namespace = ns
	}
	if sar.Spec.ResourceAttributes.Namespace != ns {
		return apierrors.NewBadRequest(fmt.Sprintf("spec.resourceAttributes.namespace must match namespace: %v", ns))
	}
	sar.Status = s.accessStatus(accessAttributes(reviewedUser(sar.Spec.User, sar.Spec.UID, sar.Spec.Groups, sar.Spec.Extra),
		sar.Spec.ResourceAttributes, nil))
	return nil
}

// reviewedUser is the user a SubjectAccessReview names.
func reviewedUser(name, uid string, groups []string, extra map[string]authorizationv1.ExtraValue) *User {
	u := &User{Name: name, UID: uid, Groups: groups}
	for k, v := range extra {
		if u.Extra == nil {
			u.Extra = map[string][]string{}
		}
		u.Extra[k] = v
	}
	return u
}

func answerSelfSubjectAccessReview(ctx context.Context, s *Server, u *User, _ string, in runtime.Object) error {
	sar := in.(*authorizationv1.SelfSubjectAccessReview)
	if err := checkAccessSpec("SelfSubjectAccessReview", sar.Spec.ResourceAttributes, sar.Spec.NonResourceAttributes, nil); err != nil {
		return err
	}
	sar.Status = s.accessStatus(accessAttributes(u, sar.Spec.ResourceAttributes, sar.Spec.NonResourceAttributes))
	return nil
}

// answerSelfSubjectRulesReview lists what RBAC grants the requester in the
// namespace; the Node authorizer's rules are not listed (incomplete).
func answerSelfSubjectRulesReview(ctx context.Context, s *Server, u *User, _ string, in runtime.Object) error {
	rr := in.(*authorizationv1.SelfSubjectRulesReview)
	rr.Status = authorizationv1.SubjectRulesReviewStatus{ResourceRules: []authorizationv1.ResourceRule{}, NonResourceRules: []authorizationv1.NonResourceRule{}}
	if s.cfg.Authz == nil {
		rr.Status.Incomplete, rr.Status.EvaluationError = true, "no authorizer"
		return nil
	}
	for _, rule := range s.cfg.Authz.RBAC.Index.RulesFor(u, rr.Spec.Namespace) {
		if len(rule.NonResourceURLs) > 0 {
			rr.Status.NonResourceRules = append(rr.Status.NonResourceRules, authorizationv1.NonResourceRule{Verbs: rule.Verbs, NonResourceURLs: rule.NonResourceURLs})
			continue
		}
		rr.Status.ResourceRules = append(rr.Status.ResourceRules, authorizationv1.ResourceRule{Verbs: rule.Verbs, APIGroups: rule.APIGroups,
			Resources: rule.Resources, ResourceNames: rule.ResourceNames})
	}
	if authz.NodeName(u) != "" {
		rr.Status.Incomplete, rr.Status.EvaluationError = true, "node authorizer does not support user rule resolution"
	}
	return nil
}
