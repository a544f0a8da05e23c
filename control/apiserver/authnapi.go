package apiserver

import (
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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// authentication.k8s.io: SelfSubjectReview (`kubectl auth whoami`), create
// only and never stored: the answer is the requester's own user as this
// server authenticated it, with system:authenticated among its groups as
// kube-apiserver adds it. Served as v1 and as v1beta1, which kubectl 1.27
// asks for.

const authnGroup = authenticationv1.GroupName

// authnVersions are the served versions, preferred first.
var authnVersions = []string{"v1", "v1beta1"}

const selfSubjectReviews = "selfsubjectreviews"

// GroupAuthenticated is every authenticated user's group.
const GroupAuthenticated = "system:authenticated"

func authnAPIGroup() metav1.APIGroup {
	g := metav1.APIGroup{Name: authnGroup}
	for _, v := range authnVersions {
		g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{GroupVersion: authnGroup + "/" + v, Version: v})
	}
	g.PreferredVersion = g.Versions[0]
	return g
}

func isAuthnVersion(gv schema.GroupVersion) bool {
	return gv.Group == authnGroup && slices.Contains(authnVersions, gv.Version)
}

func authnResourceList(gv schema.GroupVersion) *metav1.APIResourceList {
	return &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv.String(),
		APIResources: []metav1.APIResource{{Name: selfSubjectReviews, Namespaced: false, Kind: "SelfSubjectReview", Verbs: []string{"create"}}}}
}

func authnGroupDiscovery() apidiscoveryv2.APIGroupDiscovery {
	gd := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: authnGroup}}
	for _, v := range authnVersions {
		gd.Versions = append(gd.Versions, apidiscoveryv2.APIVersionDiscovery{Version: v, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent,
			Resources: []apidiscoveryv2.APIResourceDiscovery{{Resource: selfSubjectReviews, Scope: apidiscoveryv2.ScopeCluster, Verbs: []string{"create"},
				ResponseKind: &metav1.GroupVersionKind{Group: authnGroup, Version: v, Kind: "SelfSubjectReview"}}}})
	}
	return gd
}

// authnCodecs decode the reviews as JSON, YAML or protobuf (kubectl's).
var authnCodecs = func() serializer.CodecFactory {
	scheme := runtime.NewScheme()
	utilruntime.Must(authenticationv1.AddToScheme(scheme))
	utilruntime.Must(authenticationv1beta1.AddToScheme(scheme))
	return serializer.NewCodecFactory(scheme)
}()

// maxReviewBytes bounds a review's body: it carries nothing the answer
// uses.
const maxReviewBytes = 64 << 10

// serveSelfSubjectReview answers POST /apis/authentication.k8s.io/V/selfsubjectreviews.
func (s *Server) serveSelfSubjectReview(w http.ResponseWriter, r *http.Request, u *User) (verb, resource string) {
	resource = selfSubjectReviews + "." + authnGroup
	version, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/apis/"+authnGroup+"/"), "/")
	gr := schema.GroupResource{Group: authnGroup, Resource: selfSubjectReviews}
	if !slices.Contains(authnVersions, version) || strings.Trim(rest, "/") != selfSubjectReviews {
		s.writeError(w, r, notFound())
		return "notfound", ""
	}
	if r.Method != http.MethodPost {
		s.writeError(w, r, apierrors.NewMethodNotSupported(gr, r.Method))
		return "unsupported", resource
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReviewBytes+1))
	switch {
	case err != nil:
		s.writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("read the body: %v", err)))
		return "create", resource
	case len(body) > maxReviewBytes:
		s.writeError(w, r, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("a SelfSubjectReview of more than %d bytes", maxReviewBytes)))
		return "create", resource
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == "" {
		mt = runtime.ContentTypeJSON
	}
	info, ok := runtime.SerializerInfoForMediaType(authnCodecs.SupportedMediaTypes(), mt)
	if !ok {
		s.writeError(w, r, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "", schemaGR(""), "",
			fmt.Sprintf("the body of the request was in an unknown format (%s); accepted media types: application/json, application/yaml, application/vnd.kubernetes.protobuf", mt), 0, false))
		return "create", resource
	}
	want := schema.GroupVersionKind{Group: authnGroup, Version: version, Kind: "SelfSubjectReview"}
	if _, got, err := info.Serializer.Decode(body, &want, nil); err != nil {
		s.writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("the body is not a SelfSubjectReview: %v", err)))
		return "create", resource
	} else if got.Kind != want.Kind {
		s.writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("the body is a %s, not a SelfSubjectReview", got.Kind)))
		return "create", resource
	}
	groups := slices.Clone(u.Groups)
	if !slices.Contains(groups, GroupAuthenticated) {
		groups = append(groups, GroupAuthenticated)
	}
	answer := &authenticationv1.SelfSubjectReview{
		TypeMeta:   metav1.TypeMeta{Kind: "SelfSubjectReview", APIVersion: authnGroup + "/" + version},
		ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(time.Now().Truncate(time.Second))},
		Status:     authenticationv1.SelfSubjectReviewStatus{UserInfo: authenticationv1.UserInfo{Username: u.Name, Groups: groups}},
	}
	writeBody(w, http.StatusCreated, output{}, answer)
	return "create", resource
}
