package apiserver

import (
	"encoding/json"
	"mime"
	"net/http"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apidiscoveryv2beta1 "k8s.io/api/apidiscovery/v2beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/isle-cluster/isle/control/registry"
)

// aggregatedVersion returns "v2" or "v2beta1" if the client accepts
// aggregated discovery, in its order of preference; "" otherwise.
func aggregatedVersion(r *http.Request) string {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		if mt == "application/json" && params["g"] == "apidiscovery.k8s.io" && params["as"] == "APIGroupDiscoveryList" &&
			(params["v"] == "v2" || params["v"] == "v2beta1") {
			return params["v"]
		}
		if mt == "application/json" && params["as"] == "" {
			return ""
		}
	}
	return ""
}

// serveDiscovery serves /api, /apis, /api/v1, /apis/G and /apis/G/V.
// It reports whether the path was one of those.
func (s *Server) serveDiscovery(w http.ResponseWriter, r *http.Request) bool {
	p := strings.Trim(r.URL.Path, "/")
	parts := strings.Split(p, "/")
	switch {
	case p == "api":
		if v := aggregatedVersion(r); v != "" {
			s.writeAggregated(w, v, true)
			return true
		}
		writeBody(w, http.StatusOK, output{}, &metav1.APIVersions{
			TypeMeta: metav1.TypeMeta{Kind: "APIVersions"},
			Versions: []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{
				{ClientCIDR: "0.0.0.0/0", ServerAddress: s.cfg.AdvertiseAddr}},
		})
	case p == "apis":
		if v := aggregatedVersion(r); v != "" {
			s.writeAggregated(w, v, false)
			return true
		}
		list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
		for _, g := range s.groups() {
			if g.Name != "" {
				list.Groups = append(list.Groups, g)
			}
		}
		writeBody(w, http.StatusOK, output{}, list)
	case p == "api/v1":
		s.writeResourceList(w, r, schema.GroupVersion{Version: "v1"})
	case len(parts) == 2 && parts[0] == "apis":
		for _, g := range s.groups() {
			if g.Name == parts[1] && g.Name != "" {
				g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
				writeBody(w, http.StatusOK, output{}, &g)
				return true
			}
		}
		s.writeError(w, r, notFound())
	case len(parts) == 3 && parts[0] == "apis":
		s.writeResourceList(w, r, schema.GroupVersion{Group: parts[1], Version: parts[2]})
	default:
		return false
	}
	return true
}

// groups lists the served groups with their versions, preferred first.
func (s *Server) groups() []metav1.APIGroup {
	var out []metav1.APIGroup
	idx := map[string]int{}
	for _, gv := range s.store.Resources().GroupVersions() {
		v := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
		i, ok := idx[gv.Group]
		if !ok {
			idx[gv.Group] = len(out)
			out = append(out, metav1.APIGroup{Name: gv.Group, PreferredVersion: v})
			i = len(out) - 1
		}
		out[i].Versions = append(out[i].Versions, v)
	}
	if s.cfg.Usage != nil {
		out = append(out, metricsGroup())
	}
	return append(out, reviewGroups()...)
}

// nonResource reports whether path is outside the API's resources and
// decided by the authorizers as a path: discovery, /openapi, /metrics.
func nonResource(path string) bool {
	p := strings.Trim(path, "/")
	parts := strings.Split(p, "/")
	switch {
	case p == "metrics", p == "api", p == "apis", p == "api/v1", p == "openapi/v2", p == "openapi/v3", strings.HasPrefix(p, "openapi/v3/"),
		"/"+p == oidcConfigPath, "/"+p == jwksPath, isMapPath("/" + p):
		return true
	}
	return parts[0] == "apis" && (len(parts) == 2 || len(parts) == 3)
}

func (s *Server) writeResourceList(w http.ResponseWriter, r *http.Request, gv schema.GroupVersion) {
	if gv == metricsGV && s.cfg.Usage != nil {
		writeBody(w, http.StatusOK, output{}, metricsResourceList())
		return
	}
	if isReviewGroup(gv.Group) {
		if list, ok := reviewResourceList(gv); ok {
			writeBody(w, http.StatusOK, output{}, list)
			return
		}
		s.writeError(w, r, notFound())
		return
	}
	rs := s.store.Resources().InGroupVersion(gv)
	if len(rs) == 0 {
		s.writeError(w, r, notFound())
		return
	}
	list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv.String()}
	for _, res := range rs {
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name: res.Resource, SingularName: res.Singular, Namespaced: res.Namespaced, Kind: res.Kind,
			Verbs: res.Verbs(), ShortNames: res.ShortNames, Categories: res.Categories,
		})
		for _, sub := range subresources(res) {
			list.APIResources = append(list.APIResources, metav1.APIResource{
				Name: res.Resource + "/" + sub.name, Namespaced: res.Namespaced, Kind: sub.kind, Verbs: sub.verbs,
				Group: sub.group, Version: sub.version,
			})
		}
	}
	writeBody(w, http.StatusOK, output{}, list)
}

type subresource struct {
	name, kind, group, version string
	verbs                      []string
}

func subresources(res *registry.Resource) []subresource {
	var out []subresource
	if res.Status {
		out = append(out, subresource{name: "status", kind: res.Kind, verbs: []string{"get", "patch", "update"}})
	}
	if res.Approval != nil {
		out = append(out, subresource{name: "approval", kind: res.Kind, verbs: []string{"get", "patch", "update"}})
	}
	if res.Scale != nil {
		out = append(out, subresource{name: "scale", kind: "Scale", group: "autoscaling", version: "v1", verbs: []string{"get", "patch", "update"}})
	}
	for _, e := range res.Extra {
		switch e {
		case "binding":
			out = append(out, subresource{name: e, kind: "Binding", verbs: []string{"create"}})
		case "eviction":
			out = append(out, subresource{name: e, kind: "Eviction", group: "policy", version: "v1", verbs: []string{"create"}})
		case "log":
			out = append(out, subresource{name: e, kind: "Pod", verbs: []string{"get"}})
		case "exec":
			out = append(out, subresource{name: e, kind: "PodExecOptions", verbs: []string{"create", "get"}})
		case "finalize":
			out = append(out, subresource{name: e, kind: "Namespace", verbs: []string{"update"}})
		case "token":
			out = append(out, subresource{name: e, kind: "TokenRequest", group: "authentication.k8s.io", version: "v1", verbs: []string{"create"}})
		}
	}
	return out
}

// writeAggregated writes the aggregated discovery document of the legacy
// group (/api) or of every other group (/apis).
func (s *Server) writeAggregated(w http.ResponseWriter, version string, legacy bool) {
	list := apidiscoveryv2.APIGroupDiscoveryList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: "apidiscovery.k8s.io/" + version}}
	for _, g := range s.groups() {
		if (g.Name == "") != legacy {
			continue
		}
		if g.Name == metricsGV.Group {
			list.Items = append(list.Items, metricsGroupDiscovery())
			continue
		}
		if isReviewGroup(g.Name) {
			list.Items = append(list.Items, reviewGroupDiscovery(g.Name))
			continue
		}
		gd := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g.Name}}
		for _, v := range g.Versions {
			vd := apidiscoveryv2.APIVersionDiscovery{Version: v.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
			for _, res := range s.store.Resources().InGroupVersion(schema.GroupVersion{Group: g.Name, Version: v.Version}) {
				scope := apidiscoveryv2.ScopeCluster
				if res.Namespaced {
					scope = apidiscoveryv2.ScopeNamespace
				}
				rd := apidiscoveryv2.APIResourceDiscovery{
					Resource: res.Resource, SingularResource: res.Singular, Scope: scope,
					ResponseKind: &metav1.GroupVersionKind{Group: res.Group, Version: res.Version, Kind: res.Kind},
					Verbs:        res.Verbs(), ShortNames: res.ShortNames, Categories: res.Categories,
				}
				for _, sub := range subresources(res) {
					gvk := &metav1.GroupVersionKind{Group: res.Group, Version: res.Version, Kind: sub.kind}
					if sub.version != "" {
						gvk.Group, gvk.Version = sub.group, sub.version
					}
					rd.Subresources = append(rd.Subresources, apidiscoveryv2.APISubresourceDiscovery{
						Subresource: sub.name, ResponseKind: gvk, Verbs: sub.verbs})
				}
				vd.Resources = append(vd.Resources, rd)
			}
			gd.Versions = append(gd.Versions, vd)
		}
		list.Items = append(list.Items, gd)
	}
	w.Header().Set("Content-Type", "application/json;g=apidiscovery.k8s.io;v="+version+";as=APIGroupDiscoveryList")
	w.WriteHeader(http.StatusOK)
	if version == "v2beta1" {
		// The same document under the older version's name: the fields are identical.
		b, _ := json.Marshal(list)
		var beta apidiscoveryv2beta1.APIGroupDiscoveryList
		_ = json.Unmarshal(b, &beta)
		beta.APIVersion = "apidiscovery.k8s.io/v2beta1"
		_ = json.NewEncoder(w).Encode(beta)
		return
	}
	_ = json.NewEncoder(w).Encode(list)
}
