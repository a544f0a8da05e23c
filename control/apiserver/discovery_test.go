package apiserver_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apidiscoveryv2beta1 "k8s.io/api/apidiscovery/v2beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
)

func findResource(list metav1.APIResourceList, name string) (metav1.APIResource, bool) {
	for _, r := range list.APIResources {
		if r.Name == name {
			return r, true
		}
	}
	return metav1.APIResource{}, false
}

func TestDiscoveryLegacy(t *testing.T) {
	e := newEnv(t)
	allVerbs := []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

	t.Run("/api", func(t *testing.T) {
		var v metav1.APIVersions
		mustCode(t, e.admin(t, "GET", "/api", ""), 200).decode(t, &v)
		if v.Kind != "APIVersions" || !slices.Equal(v.Versions, []string{"v1"}) {
			t.Fatalf("got %+v", v)
		}
		if len(v.ServerAddressByClientCIDRs) != 1 || v.ServerAddressByClientCIDRs[0].ServerAddress != "127.0.0.1:6443" {
			t.Errorf("serverAddressByClientCIDRs %+v", v.ServerAddressByClientCIDRs)
		}
	})

	t.Run("/apis", func(t *testing.T) {
		var l metav1.APIGroupList
		mustCode(t, e.admin(t, "GET", "/apis", ""), 200).decode(t, &l)
		groups := map[string]metav1.APIGroup{}
		for _, g := range l.Groups {
			groups[g.Name] = g
		}
		if _, ok := groups[""]; ok {
			t.Errorf("the legacy group is listed under /apis")
		}
		tests := []struct {
			group     string
			preferred string
			versions  []string
		}{
			{"apps", "apps/v1", []string{"apps/v1"}},
			{"batch", "batch/v1", []string{"batch/v1"}},
			{"autoscaling", "autoscaling/v2", []string{"autoscaling/v2", "autoscaling/v1"}},
			{"networking.k8s.io", "networking.k8s.io/v1", []string{"networking.k8s.io/v1"}},
			{"discovery.k8s.io", "discovery.k8s.io/v1", []string{"discovery.k8s.io/v1"}},
			{"storage.k8s.io", "storage.k8s.io/v1", []string{"storage.k8s.io/v1"}},
			{"coordination.k8s.io", "coordination.k8s.io/v1", []string{"coordination.k8s.io/v1"}},
		}
		for _, tc := range tests {
			g, ok := groups[tc.group]
			if !ok {
				t.Errorf("group %s missing", tc.group)
				continue
			}
			var vs []string
			for _, v := range g.Versions {
				vs = append(vs, v.GroupVersion)
			}
			if g.PreferredVersion.GroupVersion != tc.preferred || !slices.Equal(vs, tc.versions) {
				t.Errorf("%s: preferred %s versions %v, want %s %v", tc.group, g.PreferredVersion.GroupVersion, vs, tc.preferred, tc.versions)
			}
		}
	})

	t.Run("/apis/apps", func(t *testing.T) {
		var g metav1.APIGroup
		mustCode(t, e.admin(t, "GET", "/apis/apps", ""), 200).decode(t, &g)
		if g.Kind != "APIGroup" || g.Name != "apps" || g.PreferredVersion.Version != "v1" {
			t.Fatalf("got %+v", g)
		}
		mustCode(t, e.admin(t, "GET", "/apis/nope", ""), 404)
	})

	resourceTests := []struct {
		path, resource string
		namespaced     bool
		kind           string
		short, cats    []string
		verbs          []string
		group, version string // of subresources served in another group
	}{
		{"/api/v1", "pods", true, "Pod", []string{"po"}, []string{"all"}, allVerbs, "", ""},
		{"/api/v1", "pods/status", true, "Pod", nil, nil, []string{"get", "patch", "update"}, "", ""},
		{"/api/v1", "pods/binding", true, "Binding", nil, nil, []string{"create"}, "", ""},
		{"/api/v1", "pods/eviction", true, "Eviction", nil, nil, []string{"create"}, "policy", "v1"},
		{"/api/v1", "pods/log", true, "Pod", nil, nil, []string{"get"}, "", ""},
		{"/api/v1", "services", true, "Service", []string{"svc"}, []string{"all"}, allVerbs, "", ""},
		{"/api/v1", "configmaps", true, "ConfigMap", []string{"cm"}, nil, allVerbs, "", ""},
		{"/api/v1", "nodes", false, "Node", []string{"no"}, nil, allVerbs, "", ""},
		{"/api/v1", "namespaces", false, "Namespace", []string{"ns"}, nil, allVerbs, "", ""},
		{"/api/v1", "namespaces/finalize", false, "Namespace", nil, nil, []string{"update"}, "", ""},
		{"/apis/apps/v1", "deployments", true, "Deployment", []string{"deploy"}, []string{"all"}, allVerbs, "", ""},
		{"/apis/apps/v1", "deployments/scale", true, "Scale", nil, nil, []string{"get", "patch", "update"}, "autoscaling", "v1"},
		{"/apis/apps/v1", "replicasets", true, "ReplicaSet", []string{"rs"}, []string{"all"}, allVerbs, "", ""},
		{"/apis/apps/v1", "daemonsets", true, "DaemonSet", []string{"ds"}, []string{"all"}, allVerbs, "", ""},
		{"/apis/batch/v1", "jobs", true, "Job", nil, []string{"all"}, allVerbs, "", ""},
		{"/apis/autoscaling/v2", "horizontalpodautoscalers", true, "HorizontalPodAutoscaler", []string{"hpa"}, []string{"all"}, allVerbs, "", ""},
		{"/apis/autoscaling/v1", "horizontalpodautoscalers", true, "HorizontalPodAutoscaler", []string{"hpa"}, []string{"all"}, allVerbs, "", ""},
	}
	lists := map[string]metav1.APIResourceList{}
	for _, tc := range resourceTests {
		t.Run(tc.path+"/"+tc.resource, func(t *testing.T) {
			list, ok := lists[tc.path]
			if !ok {
				mustCode(t, e.admin(t, "GET", tc.path, ""), 200).decode(t, &list)
				lists[tc.path] = list
			}
			if list.Kind != "APIResourceList" || list.GroupVersion != strings.TrimPrefix(strings.TrimPrefix(tc.path, "/apis/"), "/api/") {
				t.Errorf("list kind %q groupVersion %q", list.Kind, list.GroupVersion)
			}
			r, ok := findResource(list, tc.resource)
			if !ok {
				t.Fatalf("%s not in %s", tc.resource, tc.path)
			}
			if r.Namespaced != tc.namespaced || r.Kind != tc.kind || !slices.Equal(r.ShortNames, tc.short) ||
				!slices.Equal(r.Categories, tc.cats) || !slices.Equal(r.Verbs, tc.verbs) || r.Group != tc.group || r.Version != tc.version {
				t.Errorf("got %+v", r)
			}
		})
	}
	mustCode(t, e.admin(t, "GET", "/apis/apps/v9", ""), 404)
}

func TestDiscoveryAggregated(t *testing.T) {
	e := newEnv(t)
	const (
		v2Accept     = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
		v2beta1Only  = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
		v2ContentTyp = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
		v2b1Content  = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
	)
	// wantAll lists, per document, the resources in category "all" and
	// some resources that must not be.
	type resWant struct {
		group, version, resource string
		short                    []string
		all                      bool
	}
	legacy := []resWant{
		{"", "v1", "pods", []string{"po"}, true},
		{"", "v1", "services", []string{"svc"}, true},
		{"", "v1", "configmaps", []string{"cm"}, false},
		{"", "v1", "namespaces", []string{"ns"}, false},
		{"", "v1", "nodes", []string{"no"}, false},
		{"", "v1", "secrets", nil, false},
	}
	groups := []resWant{
		{"apps", "v1", "deployments", []string{"deploy"}, true},
		{"apps", "v1", "replicasets", []string{"rs"}, true},
		{"apps", "v1", "daemonsets", []string{"ds"}, true},
		{"batch", "v1", "jobs", nil, true},
		{"autoscaling", "v2", "horizontalpodautoscalers", []string{"hpa"}, true},
		{"autoscaling", "v1", "horizontalpodautoscalers", []string{"hpa"}, true},
		{"networking.k8s.io", "v1", "ingresses", []string{"ing"}, false},
		{"coordination.k8s.io", "v1", "leases", nil, false},
	}
	tests := []struct {
		name, path, accept, contentType, apiVersion string
		want                                        []resWant
	}{
		{"api v2", "/api", v2Accept, v2ContentTyp, "apidiscovery.k8s.io/v2", legacy},
		{"apis v2", "/apis", v2Accept, v2ContentTyp, "apidiscovery.k8s.io/v2", groups},
		{"api v2beta1", "/api", v2beta1Only, v2b1Content, "apidiscovery.k8s.io/v2beta1", legacy},
		{"apis v2beta1", "/apis", v2beta1Only, v2b1Content, "apidiscovery.k8s.io/v2beta1", groups},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := mustCode(t, e.admin(t, "GET", tc.path, "", "Accept", tc.accept), 200)
			if ct := r.header.Get("Content-Type"); ct != tc.contentType {
				t.Fatalf("Content-Type %q, want %q", ct, tc.contentType)
			}
			// The two versions have the same fields; decode into the one asked for.
			var list apidiscoveryv2.APIGroupDiscoveryList
			if strings.HasSuffix(tc.apiVersion, "v2beta1") {
				var beta apidiscoveryv2beta1.APIGroupDiscoveryList
				r.decode(t, &beta)
				b, _ := json.Marshal(beta)
				_ = json.Unmarshal(b, &list)
			} else {
				r.decode(t, &list)
			}
			if list.Kind != "APIGroupDiscoveryList" || list.APIVersion != tc.apiVersion {
				t.Fatalf("kind %q apiVersion %q", list.Kind, list.APIVersion)
			}
			index := map[string]apidiscoveryv2.APIResourceDiscovery{}
			for _, g := range list.Items {
				if (g.Name == "") != (tc.path == "/api") {
					t.Errorf("group %q in %s", g.Name, tc.path)
				}
				for _, v := range g.Versions {
					if v.Freshness != apidiscoveryv2.DiscoveryFreshnessCurrent {
						t.Errorf("%s/%s freshness %q", g.Name, v.Version, v.Freshness)
					}
					for _, res := range v.Resources {
						index[g.Name+"/"+v.Version+"/"+res.Resource] = res
					}
				}
			}
			for _, w := range tc.want {
				key := w.group + "/" + w.version + "/" + w.resource
				res, ok := index[key]
				if !ok {
					t.Errorf("%s missing", key)
					continue
				}
				if got := slices.Contains(res.Categories, "all"); got != w.all {
					t.Errorf("%s: in category all = %v, want %v (categories %v)", key, got, w.all, res.Categories)
				}
				if !slices.Equal(res.ShortNames, w.short) {
					t.Errorf("%s: shortNames %v, want %v", key, res.ShortNames, w.short)
				}
				if res.ResponseKind == nil || res.ResponseKind.Version != w.version || res.ResponseKind.Group != w.group {
					t.Errorf("%s: responseKind %+v", key, res.ResponseKind)
				}
			}
			if tc.path == "/apis" {
				dep := index["apps/v1/deployments"]
				found := false
				for _, s := range dep.Subresources {
					if s.Subresource == "scale" {
						found = s.ResponseKind != nil && s.ResponseKind.Group == "autoscaling" && s.ResponseKind.Kind == "Scale"
					}
				}
				if !found {
					t.Errorf("deployments/scale subresource: %+v", dep.Subresources)
				}
				if p := index["/v1/pods"]; p.Resource != "" {
					t.Errorf("pods listed under /apis")
				}
			} else if p := index["/v1/pods"]; p.Scope != apidiscoveryv2.ScopeNamespace || index["/v1/nodes"].Scope != apidiscoveryv2.ScopeCluster {
				t.Errorf("scopes: pods %q nodes %q", p.Scope, index["/v1/nodes"].Scope)
			}
		})
	}

	t.Run("plain JSON preferred", func(t *testing.T) {
		r := mustCode(t, e.admin(t, "GET", "/api", "", "Accept", "application/json, "+v2ContentTyp), 200)
		var v metav1.APIVersions
		r.decode(t, &v)
		if v.Kind != "APIVersions" || r.header.Get("Content-Type") != "application/json" {
			t.Fatalf("got %s (%s)", r, r.header.Get("Content-Type"))
		}
	})
}

func TestVersion(t *testing.T) {
	e := newEnv(t)
	for _, path := range []string{"/version", "/version/"} {
		var v version.Info
		mustCode(t, e.do(t, req{path: path}), 200).decode(t, &v) // no credentials needed
		if v.GitVersion != "v1.33.0" || v.Major != "1" || v.Minor != "33" || v.GoVersion == "" || !strings.Contains(v.Platform, "/") {
			t.Errorf("%s: %+v", path, v)
		}
	}
}
