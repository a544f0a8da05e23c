package apiserver_test

import (
	"slices"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSelfSubjectReview is `kubectl auth whoami`: each user gets its own
// name and groups, with system:authenticated, in v1 and v1beta1.
func TestSelfSubjectReview(t *testing.T) {
	e := newEnv(t)
	const body = `{"kind":"SelfSubjectReview","apiVersion":"authentication.k8s.io/v1","metadata":{"creationTimestamp":null},"status":{"userInfo":{}}}`
	for _, tc := range []struct {
		token, version, user string
		groups               []string
	}{
		{adminToken, "v1", "admin", []string{"system:masters", "system:authenticated"}},
		{nodeAToken, "v1", "system:node:a", []string{"system:nodes", "system:authenticated"}},
		{nobodyToken, "v1beta1", "nobody", []string{"system:authenticated"}},
	} {
		r := mustCode(t, e.do(t, req{method: "POST", path: "/apis/authentication.k8s.io/" + tc.version + "/selfsubjectreviews", token: tc.token, body: body,
			header: map[string]string{"Content-Type": "application/json"}}), 201)
		var got authenticationv1.SelfSubjectReview
		r.decode(t, &got)
		if got.APIVersion != "authentication.k8s.io/"+tc.version || got.Kind != "SelfSubjectReview" ||
			got.Status.UserInfo.Username != tc.user || !slices.Equal(got.Status.UserInfo.Groups, tc.groups) {
			t.Errorf("%s's review: %+v", tc.user, got)
		}
	}
	// Anonymous: 401; other methods and paths, bodies of other kinds: refused.
	mustCode(t, e.do(t, req{method: "POST", path: "/apis/authentication.k8s.io/v1/selfsubjectreviews", body: body}), 401)
	mustCode(t, e.admin(t, "GET", "/apis/authentication.k8s.io/v1/selfsubjectreviews", ""), 405)
	mustCode(t, e.admin(t, "POST", "/apis/authentication.k8s.io/v1/tokenreviews", body), 400)
	mustCode(t, e.admin(t, "POST", "/apis/authentication.k8s.io/v1/nosuchreviews", body), 404)
	mustCode(t, e.admin(t, "POST", "/apis/authentication.k8s.io/v2/selfsubjectreviews", body), 404)
	mustCode(t, e.admin(t, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", `{"kind":"Pod"}`), 400)
	mustCode(t, e.admin(t, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", `not json`), 400)

	// Discovery.
	var groups metav1.APIGroupList
	mustCode(t, e.admin(t, "GET", "/apis", ""), 200).decode(t, &groups)
	if !slices.ContainsFunc(groups.Groups, func(g metav1.APIGroup) bool {
		return g.Name == "authentication.k8s.io" && g.PreferredVersion.Version == "v1" && len(g.Versions) == 2
	}) {
		t.Errorf("/apis: %+v", groups)
	}
	var list metav1.APIResourceList
	mustCode(t, e.admin(t, "GET", "/apis/authentication.k8s.io/v1", ""), 200).decode(t, &list)
	if len(list.APIResources) != 2 || list.APIResources[0].Name != "selfsubjectreviews" || !slices.Equal(list.APIResources[0].Verbs, []string{"create"}) {
		t.Errorf("/apis/authentication.k8s.io/v1: %+v", list)
	}
}
