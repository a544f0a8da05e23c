package apiserver_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/isle-cluster/isle/control/apiserver"
	"github.com/isle-cluster/isle/control/authz"
	resourcemetrics "github.com/isle-cluster/isle/control/metrics"
	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/raft/rafttest"
)

const nodeBToken = "node-b-token"

// newMetricsEnv is newEnv with a metrics cache: the API server of a
// server whose agents report usage. Nodes a (labelled zone=x) and b exist,
// and pods: web-1 on a, web-2 on b, idle (no samples) on a, in default;
// db on a in namespace data.
func newMetricsEnv(t *testing.T) *env {
	t.Helper()
	c := rafttest.NewCluster(t, rafttest.Options{Size: 1})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store := registry.New(registry.Config{Node: c.Node(c.IDs()[0]), Logger: log})
	e := &env{store: store, ctx: t.Context()}
	toks := map[string]*apiserver.User{nodeBToken: {Name: authz.NodeUserPrefix + "b", Groups: []string{authz.GroupNodes}}}
	api := apiserver.New(apiserver.Config{
		Store: store, AdvertiseAddr: "127.0.0.1:6443", Logger: log, Usage: resourcemetrics.NewCache(resourcemetrics.Config{}),
		Tokens: func(_ context.Context, tok string) (*apiserver.User, bool) {
			if u, ok := users[tok]; ok {
				return u, true
			}
			u, ok := toks[tok]
			return u, ok
		},
	})
	e.srv = httptest.NewServer(api)
	t.Cleanup(e.srv.Close)
	for _, ns := range []string{"default", "data"} {
		mustCode(t, e.admin(t, "POST", "/api/v1/namespaces", `{"metadata":{"name":"`+ns+`"}}`), 201)
	}
	mustCode(t, e.admin(t, "POST", "/api/v1/nodes", `{"metadata":{"name":"a","labels":{"zone":"x"}}}`), 201)
	mustCode(t, e.admin(t, "POST", "/api/v1/nodes", `{"metadata":{"name":"b"}}`), 201)
	mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/pods", podJSON("web-1", "a")), 201)
	mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/pods", podJSON("web-2", "b")), 201)
	mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/pods", podJSON("idle", "a")), 201)
	mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/data/pods", podJSON("db", "a")), 201)
	return e
}

func (e *env) uid(t *testing.T, ns, name string) string {
	t.Helper()
	var p corev1.Pod
	mustCode(t, e.admin(t, "GET", "/api/v1/namespaces/"+ns+"/pods/"+name, ""), 200).decode(t, &p)
	return string(p.UID)
}

// reportJSON is a report of a node's usage and its pods' (ns/name=uid,cpu).
func reportJSON(nodeCPU string, pods ...[3]string) string {
	var ps []string
	for _, p := range pods {
		ns, name, _ := strings.Cut(p[0], "/")
		ps = append(ps, `{"namespace":"`+ns+`","name":"`+name+`","uid":"`+p[1]+`","containers":[{"name":"c","usage":{"cpu":"`+p[2]+`","memory":"10Mi"}}]}`)
	}
	return `{"timestamp":"` + time.Now().UTC().Format(time.RFC3339) + `","window":"15s","node":{"cpu":"` + nodeCPU +
		`","memory":"512Mi"},"pods":[` + strings.Join(ps, ",") + `]}`
}

func (e *env) report(t *testing.T, token, body string) response {
	t.Helper()
	return e.do(t, req{method: "POST", path: wire.ReportPath, token: token, body: body,
		header: map[string]string{"Content-Type": "application/json"}})
}

func TestUsageReportRefusals(t *testing.T) {
	e := newMetricsEnv(t)
	web1, web2 := e.uid(t, "default", "web-1"), e.uid(t, "default", "web-2")
	tests := []struct {
		name, token, body string
		header            map[string]string
		method            string
		code              int
		want              string
	}{
		{"anonymous", "", reportJSON("1"), nil, "POST", 401, "Unauthorized"},
		{"an administrator is not a node", adminToken, reportJSON("1"), nil, "POST", 403, "only nodes report usage"},
		{"another node's pod", nodeAToken, reportJSON("1", [3]string{"default/web-1", web1, "1m"}, [3]string{"default/web-2", web2, "1m"}), nil, "POST", 403,
			`node "a" may not report pod default/web-2: it is bound to node "b"`},
		{"malformed", nodeAToken, `{"timestamp":`, nil, "POST", 400, "invalid usage report: decode"},
		{"invalid quantity", nodeAToken, strings.Replace(reportJSON("1"), `"cpu":"1"`, `"cpu":"-2"`, 1), nil, "POST", 400,
			`node[cpu]: Invalid value: "-2": must be greater than or equal to 0`},
		{"too large", nodeAToken, bigBody(wire.MaxReportBytes + 10), nil, "POST", 413, "limit is 1048576"},
		{"YAML", nodeAToken, reportJSON("1"), map[string]string{"Content-Type": "application/yaml"}, "POST", 415, "accepted media types: application/json"},
		{"GET", nodeAToken, "", nil, "GET", 405, "GET is not supported"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{"Content-Type": "application/json"}
			for k, v := range tc.header {
				h[k] = v
			}
			r := e.do(t, req{method: tc.method, path: wire.ReportPath, token: tc.token, body: tc.body, header: h})
			st := mustCode(t, r, tc.code).status(t)
			if !strings.Contains(st.Message, tc.want) {
				t.Errorf("message %q, want it to contain %q", st.Message, tc.want)
			}
		})
	}
	// Nothing of the refused reports is served.
	mustCode(t, e.admin(t, "GET", "/apis/metrics.k8s.io/v1beta1/nodes/a", ""), 404)
	mustCode(t, e.admin(t, "GET", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/web-1", ""), 404)
}

func TestMetricsAPI(t *testing.T) {
	e := newMetricsEnv(t)
	web1, web2, db := e.uid(t, "default", "web-1"), e.uid(t, "default", "web-2"), e.uid(t, "data", "db")
	mustCode(t, e.report(t, nodeAToken, reportJSON("1500m", [3]string{"default/web-1", web1, "200m"}, [3]string{"data/db", db, "50m"},
		[3]string{"default/gone", "uid-of-a-deleted-pod", "1"})), 204)
	mustCode(t, e.report(t, nodeBToken, reportJSON("250m", [3]string{"default/web-2", web2, "300m"})), 204)

	names := func(r response) []string {
		var l struct {
			Items []metav1.PartialObjectMetadata `json:"items"`
		}
		r.decode(t, &l)
		var out []string
		for _, it := range l.Items {
			out = append(out, strings.TrimPrefix(it.Namespace+"/"+it.Name, "/"))
		}
		return out
	}
	lists := []struct {
		name, path string
		want       []string
	}{
		{"nodes", "/apis/metrics.k8s.io/v1beta1/nodes", []string{"a", "b"}},
		{"nodes by label", "/apis/metrics.k8s.io/v1beta1/nodes?labelSelector=zone%3Dx", []string{"a"}},
		{"nodes by name", "/apis/metrics.k8s.io/v1beta1/nodes?fieldSelector=metadata.name%3Db", []string{"b"}},
		{"pods of all namespaces", "/apis/metrics.k8s.io/v1beta1/pods", []string{"data/db", "default/web-1", "default/web-2"}},
		{"pods of a namespace", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods", []string{"default/web-1", "default/web-2"}},
		{"pods by label", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods?labelSelector=app%3Dweb-2", []string{"default/web-2"}},
		{"pods by node", "/apis/metrics.k8s.io/v1beta1/pods?fieldSelector=spec.nodeName%3Da", []string{"data/db", "default/web-1"}},
		{"no pods", "/apis/metrics.k8s.io/v1beta1/namespaces/empty/pods", nil},
	}
	for _, tc := range lists {
		t.Run(tc.name, func(t *testing.T) {
			if got := names(mustCode(t, e.admin(t, "GET", tc.path, ""), 200)); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}

	t.Run("get node", func(t *testing.T) {
		// Any authenticated user may read, a node too.
		r := mustCode(t, e.do(t, req{path: "/apis/metrics.k8s.io/v1beta1/nodes/a", token: nodeBToken}), 200)
		var m metricsv1beta1.NodeMetrics
		r.decode(t, &m)
		if m.Kind != "NodeMetrics" || m.APIVersion != "metrics.k8s.io/v1beta1" || m.Name != "a" || m.Labels["zone"] != "x" ||
			m.Usage.Cpu().String() != "1500m" || m.Usage.Memory().String() != "512Mi" || m.Window.Duration != 15*time.Second || m.Timestamp.IsZero() {
			t.Fatalf("got %+v", m)
		}
	})
	t.Run("get pod", func(t *testing.T) {
		var m metricsv1beta1.PodMetrics
		mustCode(t, e.admin(t, "GET", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/web-1", ""), 200).decode(t, &m)
		if m.Kind != "PodMetrics" || m.Namespace != "default" || m.Labels["app"] != "web-1" || len(m.Containers) != 1 ||
			m.Containers[0].Name != "c" || m.Containers[0].Usage.Cpu().String() != "200m" {
			t.Fatalf("got %+v", m)
		}
	})
	t.Run("table", func(t *testing.T) {
		var tbl metav1.Table
		mustCode(t, e.admin(t, "GET", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods", "",
			"Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"), 200).decode(t, &tbl)
		var cols []string
		for _, c := range tbl.ColumnDefinitions {
			cols = append(cols, c.Name)
		}
		if !slices.Equal(cols, []string{"Name", "CPU", "Memory", "Window"}) || len(tbl.Rows) != 2 ||
			!slices.Equal(tbl.Rows[0].Cells, []any{"web-1", "200m", "10Mi", "15s"}) {
			t.Fatalf("columns %v rows %+v", cols, tbl.Rows)
		}
	})

	refusals := []struct {
		name, method, path string
		code               int
		want               string
	}{
		{"a pod without samples", "GET", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/idle", 404, `pods.metrics.k8s.io "idle" not found`},
		{"an unknown node", "GET", "/apis/metrics.k8s.io/v1beta1/nodes/c", 404, `nodes.metrics.k8s.io "c" not found`},
		{"pods by name, without namespace", "GET", "/apis/metrics.k8s.io/v1beta1/pods/web-1", 404, "could not find the requested resource"},
		{"an unknown resource", "GET", "/apis/metrics.k8s.io/v1beta1/services", 404, "could not find the requested resource"},
		{"a bad selector", "GET", "/apis/metrics.k8s.io/v1beta1/nodes?labelSelector=%3D%3D", 400, "labelSelector"},
		{"watch", "GET", "/apis/metrics.k8s.io/v1beta1/nodes?watch=true", 405, "watch is not supported"},
		{"create", "POST", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods", 405, "POST is not supported"},
		{"delete", "DELETE", "/apis/metrics.k8s.io/v1beta1/nodes/a", 405, "DELETE is not supported"},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			st := mustCode(t, e.admin(t, tc.method, tc.path, ""), tc.code).status(t)
			if !strings.Contains(st.Message, tc.want) {
				t.Errorf("message %q, want it to contain %q", st.Message, tc.want)
			}
		})
	}
	mustCode(t, e.do(t, req{path: "/apis/metrics.k8s.io/v1beta1/nodes"}), 401)
}

func TestMetricsDiscovery(t *testing.T) {
	e := newMetricsEnv(t)
	var groups metav1.APIGroupList
	mustCode(t, e.admin(t, "GET", "/apis", ""), 200).decode(t, &groups)
	i := slices.IndexFunc(groups.Groups, func(g metav1.APIGroup) bool { return g.Name == "metrics.k8s.io" })
	if i < 0 || groups.Groups[i].PreferredVersion.GroupVersion != "metrics.k8s.io/v1beta1" {
		t.Fatalf("metrics.k8s.io/v1beta1 not in /apis: %+v", groups.Groups)
	}
	var g metav1.APIGroup
	mustCode(t, e.admin(t, "GET", "/apis/metrics.k8s.io", ""), 200).decode(t, &g)
	if g.Kind != "APIGroup" || len(g.Versions) != 1 || g.Versions[0].Version != "v1beta1" {
		t.Fatalf("group %+v", g)
	}
	var list metav1.APIResourceList
	mustCode(t, e.admin(t, "GET", "/apis/metrics.k8s.io/v1beta1", ""), 200).decode(t, &list)
	for _, want := range []metav1.APIResource{
		{Name: "nodes", Kind: "NodeMetrics", Verbs: []string{"get", "list"}},
		{Name: "pods", Kind: "PodMetrics", Namespaced: true, Verbs: []string{"get", "list"}},
	} {
		got, ok := findResource(list, want.Name)
		if !ok || got.Kind != want.Kind || got.Namespaced != want.Namespaced || !slices.Equal(got.Verbs, want.Verbs) {
			t.Errorf("%s: got %+v", want.Name, got)
		}
	}

	var agg apidiscoveryv2.APIGroupDiscoveryList
	mustCode(t, e.admin(t, "GET", "/apis", "", "Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"), 200).decode(t, &agg)
	i = slices.IndexFunc(agg.Items, func(g apidiscoveryv2.APIGroupDiscovery) bool { return g.Name == "metrics.k8s.io" })
	if i < 0 || len(agg.Items[i].Versions) != 1 || agg.Items[i].Versions[0].Version != "v1beta1" {
		t.Fatalf("metrics.k8s.io not in aggregated discovery: %+v", agg.Items)
	}
	scopes := map[string]apidiscoveryv2.ResourceScope{}
	for _, r := range agg.Items[i].Versions[0].Resources {
		scopes[r.Resource+"/"+r.ResponseKind.Kind] = r.Scope
		if !slices.Equal(r.Verbs, []string{"get", "list"}) {
			t.Errorf("%s verbs %v", r.Resource, r.Verbs)
		}
	}
	if scopes["nodes/NodeMetrics"] != apidiscoveryv2.ScopeCluster || scopes["pods/PodMetrics"] != apidiscoveryv2.ScopeNamespace {
		t.Errorf("resources %v", scopes)
	}

	// A server without a metrics cache serves none of it.
	plain := newEnv(t)
	mustCode(t, plain.admin(t, "GET", "/apis/metrics.k8s.io/v1beta1", ""), 404)
	mustCode(t, plain.admin(t, "GET", "/apis/metrics.k8s.io/v1beta1/nodes", ""), 404)
	var plainGroups metav1.APIGroupList
	mustCode(t, plain.admin(t, "GET", "/apis", ""), 200).decode(t, &plainGroups)
	b, _ := json.Marshal(plainGroups)
	if strings.Contains(string(b), "metrics.k8s.io") {
		t.Error("a server without a metrics cache advertises metrics.k8s.io")
	}
}
