package apiserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/isle-cluster/isle/control/apiserver"
	"github.com/isle-cluster/isle/control/authz"
)

func TestHealth(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name     string
		path     string
		notReady bool
		code     int
		want     []string // parts of the body
		notWant  []string
	}{
		{"livez", "/livez", false, 200, []string{"ok"}, []string{"[+]"}},
		{"healthz", "/healthz", false, 200, []string{"ok"}, nil},
		{"readyz", "/readyz", false, 200, []string{"ok"}, []string{"[+]"}},
		{"readyz verbose", "/readyz?verbose", false, 200, []string{"[+]ping ok\n", "[+]etcd ok\n", "readyz check passed"}, nil},
		{"livez verbose", "/livez?verbose", false, 200, []string{"[+]ping ok\n", "livez check passed"}, []string{"etcd"}},
		{"readyz one check", "/readyz/etcd?verbose", false, 200, []string{"[+]etcd ok"}, []string{"ping"}},
		{"readyz not ready", "/readyz", true, 500, []string{"[-]etcd failed: no quorum", "[+]ping ok", "readyz check failed"}, nil},
		{"readyz verbose not ready", "/readyz?verbose", true, 500, []string{"[-]etcd failed", "readyz check failed"}, nil},
		{"healthz not ready", "/healthz", true, 500, []string{"[-]etcd failed"}, nil},
		{"livez not ready", "/livez", true, 200, []string{"ok"}, nil},
		{"readyz ping not ready", "/readyz/ping", true, 200, []string{"ok"}, nil},
		{"readyz etcd not ready", "/readyz/etcd", true, 500, []string{"[-]etcd failed"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e.notReady.Store(tc.notReady)
			defer e.notReady.Store(false)
			r := e.do(t, req{path: tc.path}) // health needs no credentials
			if r.code != tc.code {
				t.Fatalf("status %d, want %d: %s", r.code, tc.code, r)
			}
			if ct := r.header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
				t.Errorf("Content-Type %q", ct)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(r.body), w) {
					t.Errorf("body %q lacks %q", r.body, w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(string(r.body), w) {
					t.Errorf("body %q has %q", r.body, w)
				}
			}
		})
	}
}

func TestAuthentication(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name   string
		path   string
		header map[string]string
		code   int
	}{
		{"api without credentials", "/api", nil, 401},
		{"pods without credentials", "/api/v1/namespaces/default/pods", nil, 401},
		{"unknown token", "/api", map[string]string{"Authorization": "Bearer wrong"}, 401},
		{"basic auth", "/api", map[string]string{"Authorization": "Basic YWRtaW46YWRtaW4="}, 401},
		{"metrics without credentials", "/metrics", nil, 401},
		{"admin token", "/api", map[string]string{"Authorization": "Bearer " + adminToken}, 200},
		{"livez without credentials", "/livez", nil, 200},
		{"readyz without credentials", "/readyz", nil, 200},
		{"version without credentials", "/version", nil, 200},
		{"nobody lists pods", "/api/v1/namespaces/default/pods", map[string]string{"Authorization": "Bearer " + nobodyToken}, 403},
		{"nobody may discover", "/api/v1", map[string]string{"Authorization": "Bearer " + nobodyToken}, 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, req{path: tc.path, header: tc.header})
			if r.code != tc.code {
				t.Fatalf("status %d, want %d: %s", r.code, tc.code, r)
			}
			switch tc.code {
			case 401:
				if st := r.status(t); st.Reason != metav1.StatusReasonUnauthorized || st.Code != 401 {
					t.Errorf("status %+v", st)
				}
			case 403:
				st := r.status(t)
				if st.Reason != metav1.StatusReasonForbidden || !strings.Contains(st.Message, `User "nobody" cannot list resource "pods"`) {
					t.Errorf("status %+v", st)
				}
			}
		})
	}
}

func TestResourceRequests(t *testing.T) {
	e := newEnv(t)
	const cms = "/api/v1/namespaces/default/configmaps"
	cm := func(name string, extra string) string {
		return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `","labels":{"set":"a"}},"data":{"k":"v"}` + extra + `}`
	}

	var created corev1.ConfigMap
	mustCode(t, e.admin(t, "POST", cms, cm("one", "")), 201).decode(t, &created)
	if created.UID == "" || created.ResourceVersion == "" || created.Namespace != "default" {
		t.Fatalf("created %+v", created.ObjectMeta)
	}

	steps := []struct {
		name          string
		method, path  string
		body          string
		header        []string
		code          int
		reason        metav1.StatusReason
		check         func(t *testing.T, r response)
		bodyHasSubstr string
	}{
		{name: "create again", method: "POST", path: cms, body: cm("one", ""), code: 409, reason: metav1.StatusReasonAlreadyExists},
		{name: "get", method: "GET", path: cms + "/one", code: 200, check: func(t *testing.T, r response) {
			var got corev1.ConfigMap
			r.decode(t, &got)
			if got.UID != created.UID || got.Data["k"] != "v" || got.Kind != "ConfigMap" || got.APIVersion != "v1" {
				t.Errorf("got %+v", got)
			}
		}},
		{name: "strict unknown field", method: "POST", path: cms + "?fieldValidation=Strict", body: cm("two", `,"bogus":1`), code: 400,
			reason: metav1.StatusReasonBadRequest, bodyHasSubstr: `unknown field \"bogus\"`},
		{name: "warn unknown field", method: "POST", path: cms, body: cm("two", `,"bogus":1`), code: 201, check: func(t *testing.T, r response) {
			if w := r.header.Get("Warning"); !strings.HasPrefix(w, "299 - ") || !strings.Contains(w, "bogus") {
				t.Errorf("Warning header %q", w)
			}
		}},
		{name: "bad fieldValidation", method: "POST", path: cms + "?fieldValidation=Loose", body: cm("x", ""), code: 400},
		{name: "yaml body", method: "POST", path: cms, body: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: three\ndata:\n  k: yaml\n",
			header: []string{"Content-Type", "application/yaml"}, code: 201},
		{name: "unknown body type", method: "POST", path: cms, body: cm("four", ""), header: []string{"Content-Type", "text/plain"}, code: 415},
		{name: "dry run", method: "POST", path: cms + "?dryRun=All", body: cm("dry", ""), code: 201},
		{name: "dry run stored nothing", method: "GET", path: cms + "/dry", code: 404, reason: metav1.StatusReasonNotFound},
		{name: "list with selector", method: "GET", path: cms + "?labelSelector=set%3Da", code: 200, check: func(t *testing.T, r response) {
			var l corev1.ConfigMapList
			r.decode(t, &l)
			var ns []string
			for _, c := range l.Items {
				ns = append(ns, c.Name)
			}
			if !slices.Equal(ns, []string{"one", "two"}) || l.ResourceVersion == "" || l.Kind != "ConfigMapList" {
				t.Errorf("items %v rv %q kind %q", ns, l.ResourceVersion, l.Kind)
			}
		}},
		{name: "list with limit", method: "GET", path: cms + "?limit=1", code: 200, check: func(t *testing.T, r response) {
			var l corev1.ConfigMapList
			r.decode(t, &l)
			if len(l.Items) != 1 || l.Continue == "" {
				t.Fatalf("items %d continue %q", len(l.Items), l.Continue)
			}
			var rest corev1.ConfigMapList
			mustCode(t, e.admin(t, "GET", cms+"?limit=5&continue="+l.Continue, ""), 200).decode(t, &rest)
			if len(rest.Items) != 2 || rest.Continue != "" {
				t.Errorf("second page: %d items, continue %q", len(rest.Items), rest.Continue)
			}
		}},
		{name: "put stale", method: "PUT", path: cms + "/one", body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"one","resourceVersion":"1"},"data":{"k":"stale"}}`,
			code: 409, reason: metav1.StatusReasonConflict},
		{name: "put name mismatch", method: "PUT", path: cms + "/one", body: cm("other", ""), code: 400},
		{name: "merge patch", method: "PATCH", path: cms + "/one", body: `{"data":{"k":"patched"}}`, header: []string{"Content-Type", "application/merge-patch+json"},
			code: 200, check: func(t *testing.T, r response) {
				var got corev1.ConfigMap
				r.decode(t, &got)
				if got.Data["k"] != "patched" || got.ResourceVersion == created.ResourceVersion {
					t.Errorf("got data %v rv %s", got.Data, got.ResourceVersion)
				}
			}},
		{name: "patch type unknown", method: "PATCH", path: cms + "/one", body: `{}`, header: []string{"Content-Type", "application/json"}, code: 415},
		{name: "delete", method: "DELETE", path: cms + "/one", code: 200, check: func(t *testing.T, r response) {
			st := r.status(t)
			if st.Status != metav1.StatusSuccess || st.Details == nil || st.Details.Name != "one" || st.Details.UID != created.UID {
				t.Errorf("status %+v details %+v", st, st.Details)
			}
		}},
		{name: "get deleted", method: "GET", path: cms + "/one", code: 404, reason: metav1.StatusReasonNotFound},
		{name: "delete collection", method: "DELETE", path: cms + "?labelSelector=set%3Da", code: 200, check: func(t *testing.T, r response) {
			var l corev1.ConfigMapList
			r.decode(t, &l)
			if len(l.Items) != 1 || l.Items[0].Name != "two" {
				t.Errorf("deleted %+v", l.Items)
			}
		}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			r := e.admin(t, st.method, st.path, st.body, st.header...)
			if r.code != st.code {
				t.Fatalf("status %d, want %d: %s", r.code, st.code, r)
			}
			if st.reason != "" {
				if got := r.status(t); got.Reason != st.reason || got.Code != int32(st.code) {
					t.Errorf("reason %q code %d, want %q", got.Reason, got.Code, st.reason)
				}
			}
			if st.bodyHasSubstr != "" && !strings.Contains(string(r.body), st.bodyHasSubstr) {
				t.Errorf("body lacks %q: %s", st.bodyHasSubstr, r)
			}
			if st.check != nil {
				st.check(t, r)
			}
		})
	}
}

func TestSubresources(t *testing.T) {
	e := newEnv(t)
	mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/pods", podJSON("p", "")), 201)
	dep := appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "d"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "d"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "d"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}},
		},
	}
	mustCode(t, e.admin(t, "POST", "/apis/apps/v1/namespaces/default/deployments", toJSON(t, dep)), 201)

	t.Run("binding", func(t *testing.T) {
		b := `{"apiVersion":"v1","kind":"Binding","metadata":{"name":"p"},"target":{"kind":"Node","name":"n1"}}`
		mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/pods/p/binding", b), 201)
		var p corev1.Pod
		mustCode(t, e.admin(t, "GET", "/api/v1/namespaces/default/pods/p", ""), 200).decode(t, &p)
		if p.Spec.NodeName != "n1" {
			t.Fatalf("nodeName %q", p.Spec.NodeName)
		}
		if st := mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/pods/p/binding", b), 409).status(t); st.Reason != metav1.StatusReasonConflict {
			t.Errorf("second binding: %+v", st)
		}
	})
	t.Run("scale", func(t *testing.T) {
		var sc autoscalingv1.Scale
		mustCode(t, e.admin(t, "GET", "/apis/apps/v1/namespaces/default/deployments/d/scale", ""), 200).decode(t, &sc)
		if sc.Kind != "Scale" || sc.APIVersion != "autoscaling/v1" || sc.Spec.Replicas != 1 || sc.Status.Selector != "app=d" {
			t.Fatalf("scale %+v", sc)
		}
		mustCode(t, e.admin(t, "PATCH", "/apis/apps/v1/namespaces/default/deployments/d/scale", `{"spec":{"replicas":4}}`,
			"Content-Type", "application/merge-patch+json"), 200)
		var d appsv1.Deployment
		mustCode(t, e.admin(t, "GET", "/apis/apps/v1/namespaces/default/deployments/d", ""), 200).decode(t, &d)
		if *d.Spec.Replicas != 4 || d.Generation != 2 {
			t.Fatalf("replicas %d generation %d", *d.Spec.Replicas, d.Generation)
		}
		mustCode(t, e.admin(t, "GET", "/api/v1/namespaces/default/pods/p/scale", ""), 404)
	})
	t.Run("status", func(t *testing.T) {
		r := mustCode(t, e.admin(t, "PATCH", "/apis/apps/v1/namespaces/default/deployments/d/status",
			`{"spec":{"replicas":9},"status":{"replicas":4,"observedGeneration":2}}`, "Content-Type", "application/merge-patch+json"), 200)
		var d appsv1.Deployment
		r.decode(t, &d)
		if *d.Spec.Replicas != 4 || d.Status.Replicas != 4 {
			t.Fatalf("replicas %d status %+v", *d.Spec.Replicas, d.Status)
		}
		mustCode(t, e.admin(t, "GET", "/api/v1/namespaces/default/configmaps/x/status", ""), 404)
	})
	t.Run("eviction", func(t *testing.T) {
		mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/pods", podJSON("ev", "")), 201)
		mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/pods/ev/eviction",
			`{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"ev"}}`), 201)
		mustCode(t, e.admin(t, "GET", "/api/v1/namespaces/default/pods/ev", ""), 404)

		// A pod on a node goes gracefully, marked the target of a disruption.
		mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/pods", podJSON("ev2", "pi9")), 201)
		mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/pods/ev2/eviction",
			`{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"other"}}`), 400)
		mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/pods/ev2/eviction",
			`{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"ev2"}}`), 201)
		var p corev1.Pod
		mustCode(t, e.admin(t, "GET", "/api/v1/namespaces/default/pods/ev2", ""), 200).decode(t, &p)
		var target *corev1.PodCondition
		for i, c := range p.Status.Conditions {
			if c.Type == corev1.DisruptionTarget {
				target = &p.Status.Conditions[i]
			}
		}
		if p.DeletionTimestamp == nil || target == nil || target.Status != corev1.ConditionTrue || target.Reason != "EvictionByEvictionAPI" {
			t.Fatalf("evicted pod: deletionTimestamp %v, conditions %+v", p.DeletionTimestamp, p.Status.Conditions)
		}
	})
}

const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"

func TestTableOutput(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"web-1", "web-2"} {
		mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/pods", podJSON(n, "")), 201)
	}

	t.Run("list", func(t *testing.T) {
		r := mustCode(t, e.admin(t, "GET", "/api/v1/namespaces/default/pods", "", "Accept", tableAccept), 200)
		if ct := r.header.Get("Content-Type"); ct != "application/json;as=Table;v=v1;g=meta.k8s.io" {
			t.Errorf("Content-Type %q", ct)
		}
		var tbl metav1.Table
		r.decode(t, &tbl)
		for _, row := range tbl.Rows { // each row written as encoding/json writes a TableRow
			if b := toJSON(t, row); !strings.Contains(string(r.body), b) {
				t.Errorf("the answer has no row %s:\n%s", b, r.body)
			}
		}
		if tbl.Kind != "Table" || tbl.APIVersion != "meta.k8s.io/v1" || tbl.ResourceVersion == "" {
			t.Errorf("kind %q apiVersion %q rv %q", tbl.Kind, tbl.APIVersion, tbl.ResourceVersion)
		}
		var cols []string
		for _, c := range tbl.ColumnDefinitions {
			cols = append(cols, c.Name)
			wantPriority := int32(0)
			if !slices.Contains([]string{"Name", "Ready", "Status", "Restarts", "Age"}, c.Name) {
				wantPriority = 1
			}
			if c.Priority != wantPriority {
				t.Errorf("column %s has priority %d, want %d", c.Name, c.Priority, wantPriority)
			}
		}
		wantCols := []string{"Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates"}
		if !slices.Equal(cols, wantCols) {
			t.Fatalf("columns %v, want %v", cols, wantCols)
		}
		if len(tbl.Rows) != 2 {
			t.Fatalf("%d rows, want 2", len(tbl.Rows))
		}
		for i, row := range tbl.Rows {
			if len(row.Cells) != len(wantCols) {
				t.Errorf("row %d has %d cells", i, len(row.Cells))
			}
			want := fmt.Sprintf("web-%d", i+1)
			if row.Cells[0] != want || row.Cells[1] != "0/1" || row.Cells[2] != "Pending" {
				t.Errorf("row %d cells %v", i, row.Cells)
			}
			var pom metav1.PartialObjectMetadata
			if err := json.Unmarshal(row.Object.Raw, &pom); err != nil {
				t.Fatalf("row %d object: %v", i, err)
			}
			if pom.Kind != "PartialObjectMetadata" || pom.APIVersion != "meta.k8s.io/v1" || pom.Name != want || pom.Namespace != "default" || pom.UID == "" {
				t.Errorf("row %d object %+v", i, pom)
			}
		}
	})
	t.Run("single object", func(t *testing.T) {
		var tbl metav1.Table
		mustCode(t, e.admin(t, "GET", "/api/v1/namespaces/default/pods/web-1", "", "Accept", tableAccept), 200).decode(t, &tbl)
		if len(tbl.Rows) != 1 || tbl.Rows[0].Cells[0] != "web-1" {
			t.Fatalf("rows %+v", tbl.Rows)
		}
	})
	t.Run("a list's rows are its objects'", func(t *testing.T) {
		var list metav1.Table
		mustCode(t, e.admin(t, "GET", "/api/v1/namespaces/default/pods", "", "Accept", tableAccept), 200).decode(t, &list)
		for _, row := range list.Rows {
			var one metav1.Table
			mustCode(t, e.admin(t, "GET", "/api/v1/namespaces/default/pods/"+row.Cells[0].(string), "", "Accept", tableAccept), 200).decode(t, &one)
			row.Cells[4], one.Rows[0].Cells[4] = nil, nil // AGE, a moment apart
			if got, want := toJSON(t, row), toJSON(t, one.Rows[0]); got != want {
				t.Errorf("list row\n%s\nobject's row\n%s", got, want)
			}
		}
	})
	t.Run("includeObject Object", func(t *testing.T) {
		var tbl metav1.Table
		mustCode(t, e.admin(t, "GET", "/api/v1/namespaces/default/pods?includeObject=Object", "", "Accept", tableAccept), 200).decode(t, &tbl)
		for _, row := range tbl.Rows {
			var p corev1.Pod
			if err := json.Unmarshal(row.Object.Raw, &p); err != nil {
				t.Fatal(err)
			}
			if p.Kind != "Pod" || len(p.ManagedFields) == 0 || len(p.Spec.Containers) != 1 {
				t.Errorf("row object with includeObject=Object: %s", row.Object.Raw)
			}
		}
	})
	t.Run("includeObject None", func(t *testing.T) {
		var tbl metav1.Table
		mustCode(t, e.admin(t, "GET", "/api/v1/namespaces/default/pods?includeObject=None", "", "Accept", tableAccept), 200).decode(t, &tbl)
		for _, row := range tbl.Rows {
			if len(row.Object.Raw) != 0 && string(row.Object.Raw) != "null" {
				t.Errorf("row object %s with includeObject=None", row.Object.Raw)
			}
		}
	})
	t.Run("v1beta1", func(t *testing.T) {
		r := mustCode(t, e.admin(t, "GET", "/api/v1/namespaces/default/pods", "", "Accept", "application/json;as=Table;v=v1beta1;g=meta.k8s.io"), 200)
		var tbl metav1.Table
		r.decode(t, &tbl)
		if tbl.APIVersion != "meta.k8s.io/v1beta1" {
			t.Errorf("apiVersion %q", tbl.APIVersion)
		}
	})
	t.Run("resource without printer", func(t *testing.T) {
		mustCode(t, e.admin(t, "POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases", `{"metadata":{"name":"l"}}`), 201)
		var tbl metav1.Table
		mustCode(t, e.admin(t, "GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases", "", "Accept", tableAccept), 200).decode(t, &tbl)
		if len(tbl.Rows) != 1 || len(tbl.ColumnDefinitions) < 2 || tbl.ColumnDefinitions[0].Name != "Name" || tbl.Rows[0].Cells[0] != "l" {
			t.Errorf("columns %+v rows %+v", tbl.ColumnDefinitions, tbl.Rows)
		}
	})
}

func TestYAMLOutput(t *testing.T) {
	e := newEnv(t)
	mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/pods", podJSON("y", "")), 201)
	tests := []struct {
		name, path string
		check      func(t *testing.T, body []byte)
	}{
		{"object", "/api/v1/namespaces/default/pods/y", func(t *testing.T, body []byte) {
			var p corev1.Pod
			if err := yaml.UnmarshalStrict(body, &p); err != nil {
				t.Fatal(err)
			}
			if p.Name != "y" || p.Kind != "Pod" || p.Spec.Containers[0].Image != "busybox" {
				t.Errorf("pod %+v", p)
			}
		}},
		{"list", "/api/v1/namespaces/default/pods", func(t *testing.T, body []byte) {
			var l corev1.PodList
			if err := yaml.Unmarshal(body, &l); err != nil {
				t.Fatal(err)
			}
			if len(l.Items) != 1 || l.Kind != "PodList" {
				t.Errorf("list %+v", l)
			}
		}},
		{"error", "/api/v1/namespaces/default/pods/absent", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.admin(t, "GET", tc.path, "", "Accept", "application/yaml")
			if tc.check == nil {
				mustCode(t, r, 404)
				return
			}
			mustCode(t, r, 200)
			if ct := r.header.Get("Content-Type"); ct != "application/yaml" {
				t.Errorf("Content-Type %q", ct)
			}
			if strings.HasPrefix(strings.TrimSpace(string(r.body)), "{") {
				t.Errorf("body looks like JSON: %s", r)
			}
			tc.check(t, r.body)
		})
	}
}

type wireEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// openWatch starts a watch over HTTP; the returned cancel ends it.
func (e *env) openWatch(t *testing.T, path string, header ...string) (*http.Response, *json.Decoder, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(e.ctx)
	hr, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+path, nil)
	hr.Header.Set("Authorization", "Bearer "+adminToken)
	for i := 0; i+1 < len(header); i += 2 {
		hr.Header.Set(header[i], header[i+1])
	}
	resp, err := e.srv.Client().Do(hr)
	if err != nil {
		cancel()
		t.Fatalf("watch %s: %v", path, err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return resp, json.NewDecoder(bufio.NewReader(resp.Body)), cancel
}

// openWatches reads the API server's gauge of open watch streams.
func (e *env) openWatches(t *testing.T) string {
	t.Helper()
	r := mustCode(t, e.admin(t, "GET", "/metrics", ""), 200)
	for _, line := range strings.Split(string(r.body), "\n") {
		if v, ok := strings.CutPrefix(line, "apiserver_longrunning_requests "); ok {
			return v
		}
	}
	t.Fatalf("no apiserver_longrunning_requests in /metrics")
	return ""
}

func TestWatchOverHTTP(t *testing.T) {
	e := newEnv(t)
	const pods = "/api/v1/namespaces/default/pods"
	var list corev1.PodList
	mustCode(t, e.admin(t, "POST", pods, podJSON("before", "")), 201)
	mustCode(t, e.admin(t, "GET", pods, ""), 200).decode(t, &list)

	resp, dec, cancel := e.openWatch(t, pods+"?watch=true&resourceVersion="+list.ResourceVersion)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("watch: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	eventually(t, "the watch is counted", func() bool { return e.openWatches(t) == "1" })

	mustCode(t, e.admin(t, "POST", pods, podJSON("during", "")), 201)
	mustCode(t, e.admin(t, "DELETE", pods+"/during", ""), 200)
	for _, want := range []string{"ADDED", "DELETED"} {
		var ev wireEvent
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("read %s event: %v", want, err)
		}
		var p corev1.Pod
		if err := json.Unmarshal(ev.Object, &p); err != nil {
			t.Fatal(err)
		}
		if ev.Type != want || p.Name != "during" || p.Kind != "Pod" {
			t.Fatalf("event %s %s (%s), want %s during", ev.Type, p.Name, p.Kind, want)
		}
	}

	cancel()
	var ev wireEvent
	if err := dec.Decode(&ev); err == nil {
		t.Fatalf("read an event after the client canceled: %+v", ev)
	}
	eventually(t, "the server ends the canceled watch", func() bool { return e.openWatches(t) == "0" })

	mustCode(t, e.admin(t, "GET", pods, ""), 200).decode(t, &list) // the watches below start after the events above

	t.Run("timeoutSeconds", func(t *testing.T) {
		_, dec, _ := e.openWatch(t, pods+"?watch=1&timeoutSeconds=1&resourceVersion="+list.ResourceVersion)
		done := make(chan error, 1)
		go func() {
			var ev wireEvent
			done <- dec.Decode(&ev)
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("an event on a quiet watch")
			}
		case <-time.After(wait):
			t.Fatal("the watch outlived its timeoutSeconds")
		}
	})
	t.Run("legacy watch path and table events", func(t *testing.T) {
		resp, dec, _ := e.openWatch(t, "/api/v1/watch/namespaces/default/pods?resourceVersion="+list.ResourceVersion, "Accept", tableAccept)
		if ct := resp.Header.Get("Content-Type"); ct != "application/json;as=Table;v=v1;g=meta.k8s.io" {
			t.Errorf("Content-Type %q", ct)
		}
		mustCode(t, e.admin(t, "POST", pods, podJSON("tabled", "")), 201)
		var ev wireEvent
		if err := dec.Decode(&ev); err != nil {
			t.Fatal(err)
		}
		var tbl metav1.Table
		if err := json.Unmarshal(ev.Object, &tbl); err != nil {
			t.Fatal(err)
		}
		if ev.Type != "ADDED" || tbl.Kind != "Table" || len(tbl.Rows) != 1 || tbl.Rows[0].Cells[0] != "tabled" {
			t.Fatalf("event %s %s", ev.Type, ev.Object)
		}
	})
	t.Run("bad resourceVersion", func(t *testing.T) {
		mustCode(t, e.admin(t, "GET", pods+"?watch=true&resourceVersion=abc", ""), 400)
	})
}

// TestNodeAuthorization probes what a node's credential may do: the Node
// authorizer's rules and NodeRestriction.
func TestNodeAuthorization(t *testing.T) {
	e := newEnv(t)
	mustCode(t, e.admin(t, "POST", "/api/v1/namespaces", `{"metadata":{"name":"`+authz.NodeLeaseNamespace+`"}}`), 201)
	// Pod on-a (on node a) uses Secret sa and ConfigMap ca and claim pa;
	// on-b uses Secret sb.
	mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/pods", podUsing("on-a", "a", "sa", "ca", "pa")), 201)
	mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/pods", podUsing("on-b", "b", "sb", "cb", "")), 201)
	mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/pods", podJSON("unbound", "")), 201)
	for _, n := range []string{"sa", "sb"} {
		mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/secrets", `{"metadata":{"name":"`+n+`"}}`), 201)
	}
	for _, n := range []string{"ca", "cb"} {
		mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/configmaps", `{"metadata":{"name":"`+n+`"}}`), 201)
	}
	// Node b exists with a pod CIDR; node a with an administrator's taint.
	mustCode(t, e.admin(t, "POST", "/api/v1/nodes", `{"metadata":{"name":"b"},"spec":{"podCIDR":"10.42.2.0/24","podCIDRs":["10.42.2.0/24"]}}`), 201)
	const statusPatch = `{"status":{"phase":"Running"}}`
	merge := map[string]string{"Content-Type": "application/merge-patch+json"}
	jsonCT := map[string]string{"Content-Type": "application/json"}
	mergeCT := map[string]string{"Content-Type": "application/merge-patch+json"}
	// The graph follows the store: wait until it has the pods.
	eventually(t, "node a may read its pod's Secret", func() bool {
		return e.do(t, req{path: "/api/v1/namespaces/default/secrets/sa", token: nodeAToken}).code == 200
	})

	tests := []struct {
		name, method, path, body string
		header                   map[string]string
		code                     int
		message                  string
	}{
		{"patch status of own pod", "PATCH", "/api/v1/namespaces/default/pods/on-a/status", statusPatch, merge, 200, ""},
		{"patch status of another node's pod", "PATCH", "/api/v1/namespaces/default/pods/on-b/status", statusPatch, merge, 403, "no relationship found between node 'a' and this object"},
		{"patch status of an unbound pod", "PATCH", "/api/v1/namespaces/default/pods/unbound/status", statusPatch, merge, 403, ""},
		{"patch status of a missing pod", "PATCH", "/api/v1/namespaces/default/pods/absent/status", statusPatch, merge, 403, ""},
		{"patch own pod's spec", "PATCH", "/api/v1/namespaces/default/pods/on-a", `{"metadata":{"labels":{"x":"y"}}}`, merge, 403, ""},
		{"create another Node", "POST", "/api/v1/nodes", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"c"}}`, jsonCT, 403, "node 'a' cannot modify node 'c'"},
		{"create own Node with a pod CIDR", "POST", "/api/v1/nodes", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"a"},"spec":{"podCIDR":"10.42.2.0/24"}}`, jsonCT, 403, "not allowed to set its pod CIDR"},
		{"create own Node as another's hostname", "POST", "/api/v1/nodes", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"a","labels":{"kubernetes.io/hostname":"b"}}}`, jsonCT, 403, "may only set kubernetes.io/hostname to its own name"},
		{"create own Node", "POST", "/api/v1/nodes", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"a","labels":{"kubernetes.io/hostname":"a","isle.dev/role":"agent"}}}`, jsonCT, 201, ""},
		{"patch own Node status", "PATCH", "/api/v1/nodes/a/status", `{"status":{"phase":"Running"}}`, merge, 200, ""},
		{"patch another Node's status", "PATCH", "/api/v1/nodes/b/status", `{"status":{"phase":"Running"}}`, merge, 403, ""},
		{"patch own Node", "PATCH", "/api/v1/nodes/a", `{"metadata":{"labels":{"role":"worker","node.kubernetes.io/exclude-from-external-load-balancers":""}}}`, merge, 200, ""},
		{"label own Node another's hostname", "PATCH", "/api/v1/nodes/a", `{"metadata":{"labels":{"kubernetes.io/hostname":"b"}}}`, merge, 403, "may only set kubernetes.io/hostname to its own name"},
		{"label own Node node-restriction", "PATCH", "/api/v1/nodes/a", `{"metadata":{"labels":{"node-restriction.kubernetes.io/pool":"x"}}}`, merge, 403, "not allowed to modify labels: node-restriction.kubernetes.io/pool"},
		{"label own Node a kubernetes.io label", "PATCH", "/api/v1/nodes/a", `{"metadata":{"labels":{"kubernetes.io/role":"x"}}}`, merge, 403, "not allowed to modify labels: kubernetes.io/role"},
		{"label own Node control-plane", "PATCH", "/api/v1/nodes/a", `{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":""}}}`, merge, 403, "not a server of the control plane"},
		{"label own Node a server", "PATCH", "/api/v1/nodes/a", `{"metadata":{"labels":{"isle.dev/role":"server"}}}`, merge, 403, "not a server of the control plane"},
		{"set own pod CIDR", "PATCH", "/api/v1/nodes/a", `{"spec":{"podCIDR":"10.42.2.0/24","podCIDRs":["10.42.2.0/24"]}}`, merge, 403, "not allowed to modify its pod CIDR"},
		{"taint own Node", "PATCH", "/api/v1/nodes/a", `{"spec":{"taints":[{"key":"k","effect":"NoSchedule"}]}}`, merge, 403, "not allowed to modify taints"},
		{"delete own Node", "DELETE", "/api/v1/nodes/a", "", nil, 403, ""},
		{"list pods", "GET", "/api/v1/pods", "", nil, 200, ""},
		{"list secrets", "GET", "/api/v1/namespaces/default/secrets", "", nil, 403, "can only get individual resources of this type"},
		{"list secrets of all namespaces", "GET", "/api/v1/secrets", "", nil, 403, ""},
		{"get own pod's secret", "GET", "/api/v1/namespaces/default/secrets/sa", "", nil, 200, ""},
		{"watch own pod's secret by name", "GET", "/api/v1/namespaces/default/secrets?fieldSelector=metadata.name%3Dsa", "", nil, 200, ""},
		{"get another node's pod's secret", "GET", "/api/v1/namespaces/default/secrets/sb", "", nil, 403, "no relationship found between node 'a' and this object"},
		{"get own pod's ConfigMap", "GET", "/api/v1/namespaces/default/configmaps/ca", "", nil, 200, ""},
		{"get another node's pod's ConfigMap", "GET", "/api/v1/namespaces/default/configmaps/cb", "", nil, 403, "no relationship found"},
		{"list ConfigMaps", "GET", "/api/v1/configmaps", "", nil, 403, ""},
		{"get own pod's claim", "GET", "/api/v1/namespaces/default/persistentvolumeclaims/pa", "", nil, 404, ""},
		{"get another claim", "GET", "/api/v1/namespaces/default/persistentvolumeclaims/pb", "", nil, 403, ""},
		{"list volumes", "GET", "/api/v1/persistentvolumes", "", nil, 403, "can only list volumes labelled isle.dev/local-path-node=a"},
		{"list own local-path volumes", "GET", "/api/v1/persistentvolumes?labelSelector=isle.dev%2Flocal-path-node%3Da", "", nil, 200, ""},
		{"list another's local-path volumes", "GET", "/api/v1/persistentvolumes?labelSelector=isle.dev%2Flocal-path-node%3Db", "", nil, 403, ""},
		{"update a secret", "PUT", "/api/v1/namespaces/default/secrets/sa", `{"metadata":{"name":"sa"}}`, jsonCT, 403, "can only read resources of this type"},
		{"create a ConfigMap", "POST", "/api/v1/namespaces/default/configmaps", `{"metadata":{"name":"c"}}`, jsonCT, 403, ""},
		{"create an Event", "POST", "/api/v1/namespaces/default/events", `{"metadata":{"name":"ev"},"involvedObject":{"kind":"Pod","name":"on-a","namespace":"default"},"reason":"Started","type":"Normal"}`, jsonCT, 201, ""},
		{"create own Lease", "POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", `{"metadata":{"name":"a"}}`, jsonCT, 201, ""},
		{"create another node's Lease", "POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", `{"metadata":{"name":"b"}}`, jsonCT, 403, ""},
		{"create own Lease elsewhere", "POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases", `{"metadata":{"name":"a"}}`, jsonCT, 403, ""},
		{"delete another node's pod", "DELETE", "/api/v1/namespaces/default/pods/on-b", "", nil, 403, ""},
		{"logs of another node's pod", "GET", "/api/v1/namespaces/default/pods/on-b/log", "", nil, 403, `cannot get resource "pods/log"`},
		{"exec in a pod (WebSocket GET)", "GET", "/api/v1/namespaces/default/pods/on-b/exec?command=ls", "", nil, 403, ""},
		{"exec in a pod (SPDY POST)", "POST", "/api/v1/namespaces/default/pods/on-b/exec?command=ls", "", nil, 403, ""},
		{"attach to a pod", "GET", "/api/v1/namespaces/default/pods/on-b/attach", "", nil, 403, ""},
		{"bind a pod", "POST", "/api/v1/namespaces/default/pods/unbound/binding", `{"target":{"name":"a"}}`, jsonCT, 403, ""},
		{"evict another node's pod", "POST", "/api/v1/namespaces/default/pods/on-b/eviction", `{}`, jsonCT, 403, ""},
		{"read RBAC", "GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles", "", nil, 403, ""},
		// The kinds of issue 25: a board can neither raise its pods'
		// priority, nor point a Service at itself, nor lift a budget.
		{"create a PriorityClass", "POST", "/apis/scheduling.k8s.io/v1/priorityclasses", `{"metadata":{"name":"mine"},"value":1000000000}`, jsonCT, 403, ""},
		{"write Endpoints", "POST", "/api/v1/namespaces/default/endpoints", `{"metadata":{"name":"kubernetes"}}`, jsonCT, 403, ""},
		{"write a budget's status", "PATCH", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/x/status", `{"status":{"disruptionsAllowed":9}}`, mergeCT, 403, ""},
		{"create a StatefulSet", "POST", "/apis/apps/v1/namespaces/default/statefulsets", `{"metadata":{"name":"s"}}`, jsonCT, 403, ""},
		{"create a CronJob", "POST", "/apis/batch/v1/namespaces/default/cronjobs", `{"metadata":{"name":"c"}}`, jsonCT, 403, ""},
		// Nor free its namespace of a quota or a LimitRange, nor raise a
		// quota's count of what is used.
		{"delete a quota", "DELETE", "/api/v1/namespaces/default/resourcequotas/q", "", nil, 403, ""},
		{"write a quota's status", "PATCH", "/api/v1/namespaces/default/resourcequotas/q/status", `{"status":{"used":{"pods":"0"}}}`, mergeCT, 403, ""},
		{"create a LimitRange", "POST", "/api/v1/namespaces/default/limitranges", `{"metadata":{"name":"l"},"spec":{"limits":[]}}`, jsonCT, 403, ""},
		{"list quotas", "GET", "/api/v1/namespaces/default/resourcequotas", "", nil, 403, ""},
		// It reads the NetworkPolicies and Namespaces its rules are made
		// of, and can neither lift a policy nor relabel a namespace into
		// one's peers.
		{"list NetworkPolicies", "GET", "/apis/networking.k8s.io/v1/networkpolicies", "", nil, 200, ""},
		{"list Namespaces", "GET", "/api/v1/namespaces", "", nil, 200, ""},
		{"delete a NetworkPolicy", "DELETE", "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies/deny", "", nil, 403, ""},
		{"create a NetworkPolicy", "POST", "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies", `{"metadata":{"name":"open"},"spec":{"podSelector":{}}}`, jsonCT, 403, ""},
		{"label a Namespace", "PATCH", "/api/v1/namespaces/default", `{"metadata":{"labels":{"team":"blue"}}}`, mergeCT, 403, ""},
		{"delete own pod", "DELETE", "/api/v1/namespaces/default/pods/on-a", "", nil, 200, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, req{method: tc.method, path: tc.path, token: nodeAToken, body: tc.body, header: tc.header})
			if r.code != tc.code {
				t.Fatalf("status %d, want %d: %s", r.code, tc.code, r)
			}
			if tc.code == 403 {
				st := r.status(t)
				if st.Reason != metav1.StatusReasonForbidden || !strings.Contains(st.Message, tc.message) {
					t.Errorf("status %+v, want a message with %q", st, tc.message)
				}
			}
		})
	}

	var p corev1.Pod
	mustCode(t, e.admin(t, "GET", "/api/v1/namespaces/default/pods/on-b", ""), 200).decode(t, &p)
	if p.Status.Phase != corev1.PodPending || p.DeletionTimestamp != nil {
		t.Errorf("pod on b was changed by node a: phase %s deletionTimestamp %v", p.Status.Phase, p.DeletionTimestamp)
	}
	var n corev1.Node
	mustCode(t, e.admin(t, "GET", "/api/v1/nodes/a", ""), 200).decode(t, &n)
	if n.Labels[corev1.LabelHostname] != "a" || n.Spec.PodCIDR != "" || len(n.Spec.Taints) != 0 || n.Labels["role"] != "worker" {
		t.Errorf("node a after the probes: labels %v, podCIDR %q, taints %v", n.Labels, n.Spec.PodCIDR, n.Spec.Taints)
	}
	mustCode(t, e.admin(t, "GET", "/api/v1/nodes/c", ""), 404)
}

// podUsing is a pod on node that mounts Secret secret, ConfigMap cm and,
// if set, the claim claim.
func podUsing(name, node, secret, cm, claim string) string {
	vols := []any{
		map[string]any{"name": "s", "secret": map[string]any{"secretName": secret}},
		map[string]any{"name": "c", "configMap": map[string]any{"name": cm}},
	}
	if claim != "" {
		vols = append(vols, map[string]any{"name": "p", "persistentVolumeClaim": map[string]any{"claimName": claim}})
	}
	b, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"nodeName": node, "volumes": vols, "containers": []any{map[string]any{"name": "c", "image": "busybox"}}}})
	return string(b)
}

func TestErrorResponses(t *testing.T) {
	e := newEnv(t)
	mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/pods", podJSON("p", "")), 201)
	tests := []struct {
		name, method, path, body string
		header                   []string
		code                     int
		reason                   metav1.StatusReason
		message                  string
	}{
		{"pods/log without node TLS", "GET", "/api/v1/namespaces/default/pods/p/log", "", nil, 503, metav1.StatusReasonServiceUnavailable, "pods/log: this API server has no client certificate for the node agents"},
		{"pods/exec without node TLS", "POST", "/api/v1/namespaces/default/pods/p/exec", "", nil, 503, metav1.StatusReasonServiceUnavailable, "pods/exec"},
		{"pods/log is read-only", "POST", "/api/v1/namespaces/default/pods/p/log", "", nil, 405, metav1.StatusReasonMethodNotAllowed, ""},
		{"pods/portforward without node TLS", "POST", "/api/v1/namespaces/default/pods/p/portforward", "", nil, 503, metav1.StatusReasonServiceUnavailable, "pods/portforward"},
		{"unknown resource", "GET", "/api/v1/foos", "", nil, 404, metav1.StatusReasonNotFound, "could not find the requested resource"},
		{"unknown namespaced resource", "GET", "/api/v1/namespaces/default/foos", "", nil, 404, metav1.StatusReasonNotFound, ""},
		{"unknown group", "GET", "/apis/nope.example.com/v1/things", "", nil, 404, metav1.StatusReasonNotFound, ""},
		{"cluster resource in a namespace", "GET", "/api/v1/namespaces/default/nodes/x", "", nil, 404, metav1.StatusReasonNotFound, ""},
		{"unknown subresource", "GET", "/api/v1/namespaces/default/pods/p/frobnicate", "", nil, 404, metav1.StatusReasonNotFound, ""},
		{"missing object", "GET", "/api/v1/namespaces/default/pods/absent", "", nil, 404, metav1.StatusReasonNotFound, `pods "absent" not found`},
		{"POST to a named object", "POST", "/api/v1/namespaces/default/pods/p", podJSON("p", ""), []string{"Content-Type", "application/json"}, 405, metav1.StatusReasonMethodNotAllowed, ""},
		{"unsupported HTTP method", "OPTIONS", "/api/v1/namespaces/default/pods", "", nil, 405, metav1.StatusReasonMethodNotAllowed, ""},
		{"binding is create-only", "GET", "/api/v1/namespaces/default/pods/p/binding", "", nil, 404, metav1.StatusReasonNotFound, ""},
		{"create body over 3 MiB", "POST", "/api/v1/namespaces/default/configmaps", bigBody(apiserver.MaxBodyBytes + 1), []string{"Content-Type", "application/json"}, 413, metav1.StatusReasonRequestEntityTooLarge, ""},
		{"update body over 3 MiB", "PUT", "/api/v1/namespaces/default/pods/p", bigBody(apiserver.MaxBodyBytes + 1), []string{"Content-Type", "application/json"}, 413, metav1.StatusReasonRequestEntityTooLarge, ""},
		{"patch body over 3 MiB", "PATCH", "/api/v1/namespaces/default/pods/p", bigBody(apiserver.MaxBodyBytes + 1), []string{"Content-Type", "application/merge-patch+json"}, 413, metav1.StatusReasonRequestEntityTooLarge, ""},
		{"body of exactly 3 MiB is read", "POST", "/api/v1/namespaces/default/configmaps", bigBody(apiserver.MaxBodyBytes), []string{"Content-Type", "application/json"}, 400, metav1.StatusReasonBadRequest, ""},
		{"bad selector", "GET", "/api/v1/namespaces/default/pods?labelSelector=a+in+(", "", nil, 400, metav1.StatusReasonBadRequest, ""},
		{"unsupported field selector", "GET", "/api/v1/namespaces/default/pods?fieldSelector=spec.bogus%3Dx", "", nil, 400, metav1.StatusReasonBadRequest, "field label not supported"},
		{"apply without a field manager", "PATCH", "/api/v1/namespaces/default/configmaps/c", `{}`, []string{"Content-Type", "application/apply-patch+yaml"}, 422, metav1.StatusReasonInvalid, "fieldManager: Required value: is required for apply patch"},
		{"force without apply", "PATCH", "/api/v1/namespaces/default/configmaps/c?force=true", `{}`, []string{"Content-Type", "application/merge-patch+json"}, 422, metav1.StatusReasonInvalid, "force: Forbidden: may not be specified for non-apply patch"},
		{"force not a boolean", "PATCH", "/api/v1/namespaces/default/configmaps/c?fieldManager=a&force=yes", `{}`, []string{"Content-Type", "application/apply-patch+yaml"}, 400, metav1.StatusReasonBadRequest, `force "yes"`},
		{"field manager too long", "PATCH", "/api/v1/namespaces/default/configmaps/c?fieldManager=" + strings.Repeat("m", 129), `{}`, []string{"Content-Type", "application/apply-patch+yaml"}, 422, metav1.StatusReasonInvalid, "fieldManager: Too long"},
		{"apply of another kind", "PATCH", "/api/v1/namespaces/default/configmaps/c?fieldManager=a", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"c"}}`, []string{"Content-Type", "application/apply-patch+yaml"}, 400, metav1.StatusReasonBadRequest, `apply patch is of apiVersion "v1" kind "Secret"`},
		{"apply of another name", "PATCH", "/api/v1/namespaces/default/configmaps/c?fieldManager=a", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"d"}}`, []string{"Content-Type", "application/apply-patch+yaml"}, 400, metav1.StatusReasonBadRequest, "does not match the name on the URL"},
		{"apply not YAML", "PATCH", "/api/v1/namespaces/default/configmaps/c?fieldManager=a", "a: [", []string{"Content-Type", "application/apply-patch+yaml"}, 400, metav1.StatusReasonBadRequest, "error decoding YAML"},
		{"apply of a list", "PATCH", "/api/v1/namespaces/default/configmaps/c?fieldManager=a", "[1]", []string{"Content-Type", "application/apply-patch+yaml"}, 400, metav1.StatusReasonBadRequest, "not an object"},
		{"apply of an unknown field", "PATCH", "/api/v1/namespaces/default/configmaps/c?fieldManager=a", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"bogus":1}`, []string{"Content-Type", "application/apply-patch+yaml"}, 400, metav1.StatusReasonBadRequest, "bogus: field not declared in schema"},
		{"apply in CBOR", "PATCH", "/api/v1/namespaces/default/configmaps/c?fieldManager=a", `{}`, []string{"Content-Type", "application/apply-patch+cbor"}, 415, "", "accepted media types: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.admin(t, tc.method, tc.path, tc.body, tc.header...)
			if r.code != tc.code {
				t.Fatalf("status %d, want %d: %s", r.code, tc.code, r)
			}
			st := r.status(t)
			if st.Code != int32(tc.code) || st.Status != metav1.StatusFailure || st.APIVersion != "v1" {
				t.Errorf("status %+v", st)
			}
			if tc.reason != "" && st.Reason != tc.reason {
				t.Errorf("reason %q, want %q", st.Reason, tc.reason)
			}
			if !strings.Contains(st.Message, tc.message) {
				t.Errorf("message %q lacks %q", st.Message, tc.message)
			}
			if tc.code == 503 && r.header.Get("Retry-After") == "" {
				t.Errorf("503 without Retry-After")
			}
		})
	}
}

// TestNamedWatch watches one object by its URL (the legacy
// /api/v1/watch/namespaces/NS/pods/NAME and GET …/pods/NAME?watch=true),
// which Kubernetes serves as a watch with fieldSelector metadata.name=NAME.
func TestNamedWatch(t *testing.T) {
	e := newEnv(t)
	const pods = "/api/v1/namespaces/default/pods"
	mustCode(t, e.admin(t, "POST", pods, podJSON("a", "")), 201)
	mustCode(t, e.admin(t, "POST", pods, podJSON("b", "")), 201)
	for _, path := range []string{"/api/v1/watch/namespaces/default/pods/b", pods + "/b?watch=true"} {
		t.Run(path, func(t *testing.T) {
			_, dec, cancel := e.openWatch(t, path)
			defer cancel()
			var ev wireEvent
			if err := dec.Decode(&ev); err != nil {
				t.Fatal(err)
			}
			var p corev1.Pod
			if err := json.Unmarshal(ev.Object, &p); err != nil {
				t.Fatal(err)
			}
			if ev.Type != "ADDED" || p.Name != "b" {
				t.Fatalf("first event %s %s, want ADDED b", ev.Type, p.Name)
			}
		})
	}
}

// PodTemplates are kept as they are given, their template checked as a
// workload's; kubectl's table shows their containers and images.
func TestPodTemplates(t *testing.T) {
	e := newEnv(t)
	const good = `{"apiVersion":"v1","kind":"PodTemplate","metadata":{"name":"web"},
		"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"c","image":"nginx"}]}}}`
	created := mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/podtemplates", good), 201)
	var pt corev1.PodTemplate
	created.decode(t, &pt)
	if pt.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways || pt.Template.Spec.Containers[0].TerminationMessagePath == "" {
		t.Errorf("template not defaulted: %+v", pt.Template.Spec)
	}
	mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/podtemplates",
		`{"apiVersion":"v1","kind":"PodTemplate","metadata":{"name":"empty"},"template":{"spec":{"containers":[]}}}`), 422)
	r := mustCode(t, e.admin(t, "GET", "/api/v1/namespaces/default/podtemplates", "", "Accept", tableAccept), 200)
	var tbl metav1.Table
	r.decode(t, &tbl)
	if len(tbl.Rows) != 1 || fmt.Sprint(tbl.Rows[0].Cells) != "[web c nginx app=web]" {
		t.Errorf("table rows %+v", tbl.Rows)
	}
	mustCode(t, e.admin(t, "PATCH", "/api/v1/namespaces/default/podtemplates/web", `{"metadata":{"labels":{"patched":"true"}}}`,
		"Content-Type", "application/merge-patch+json"), 200)
	mustCode(t, e.admin(t, "DELETE", "/api/v1/namespaces/default/podtemplates?labelSelector=patched%3Dtrue", ""), 200)
	mustCode(t, e.admin(t, "GET", "/api/v1/namespaces/default/podtemplates/web", ""), 404)
}

// TestRequestValidation sends what kube-apiserver refuses, each with its
// status code, and checks nothing changed: delete options, dryRun,
// resourceVersion and resourceVersionMatch, uid and name changes, a JSON
// patch of copies past the limit, an object over the store's write limit,
// and an Accept header the API cannot answer.
func TestRequestValidation(t *testing.T) {
	e := newEnv(t)
	mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/configmaps", `{"metadata":{"name":"cm"},"data":{"a":"`+strings.Repeat("x", 1000)+`"}}`), 201)
	var cm corev1.ConfigMap
	mustCode(t, e.admin(t, "GET", "/api/v1/namespaces/default/configmaps/cm", ""), 200).decode(t, &cm)
	copies := `[`
	for i := range 12 {
		if i > 0 {
			copies += ","
		}
		copies += fmt.Sprintf(`{"op":"copy","from":"/data","path":"/metadata/annotations"},{"op":"add","path":"/data/k%d","value":"%s"}`, i, strings.Repeat("y", 200000))
	}
	copies += `]`
	tests := []struct {
		name, method, path, body string
		header                   []string
		code                     int
		message                  string
	}{
		{"propagationPolicy Bogus", "DELETE", "/api/v1/namespaces/default/configmaps/cm?propagationPolicy=Bogus", "", nil, 422, "propagationPolicy"},
		{"propagationPolicy with orphanDependents", "DELETE", "/api/v1/namespaces/default/configmaps/cm", `{"orphanDependents":true,"propagationPolicy":"Orphan"}`, nil, 422, "cannot be both set"},
		{"dryRun bogus on create", "POST", "/api/v1/namespaces/default/configmaps?dryRun=bogus", `{"metadata":{"name":"dry"}}`, nil, 422, "CreateOptions"},
		{"dryRun bogus on delete", "DELETE", "/api/v1/namespaces/default/configmaps/cm?dryRun=bogus", "", nil, 422, "dryRun"},
		{"dryRun bogus on patch", "PATCH", "/api/v1/namespaces/default/configmaps/cm?dryRun=bogus", `{}`, []string{"Content-Type", "application/merge-patch+json"}, 422, "PatchOptions"},
		{"resourceVersion abc on get", "GET", "/api/v1/namespaces/default/configmaps/cm?resourceVersion=abc", "", nil, 400, "invalid resource version"},
		{"resourceVersion abc on list", "GET", "/api/v1/namespaces/default/configmaps?resourceVersion=abc", "", nil, 400, "invalid resource version"},
		{"resourceVersionMatch Bogus", "GET", "/api/v1/namespaces/default/configmaps?resourceVersion=1&resourceVersionMatch=Bogus", "", nil, 422, "resourceVersionMatch"},
		{"resourceVersionMatch without resourceVersion", "GET", "/api/v1/namespaces/default/configmaps?resourceVersionMatch=NotOlderThan", "", nil, 422, "resourceVersionMatch"},
		{"PUT with another uid", "PUT", "/api/v1/namespaces/default/configmaps/cm", `{"metadata":{"name":"cm","uid":"00000000-0000-0000-0000-000000000001"}}`, nil, 409, "Precondition failed: UID"},
		{"PATCH of the uid", "PATCH", "/api/v1/namespaces/default/configmaps/cm", `{"metadata":{"uid":"00000000-0000-0000-0000-000000000001"}}`, []string{"Content-Type", "application/merge-patch+json"}, 422, "metadata.uid"},
		{"PATCH of the name", "PATCH", "/api/v1/namespaces/default/configmaps/cm", `{"metadata":{"name":"other"}}`, []string{"Content-Type", "application/merge-patch+json"}, 400, "does not match the name on the URL"},
		{"JSON patch that does not apply", "PATCH", "/api/v1/namespaces/default/configmaps/cm", `[{"op":"remove","path":"/data/absent"}]`, []string{"Content-Type", "application/json-patch+json"}, 422, "the JSON patch could not be applied"},
		{"JSON patch of copies past 3 MiB", "PATCH", "/api/v1/namespaces/default/configmaps/cm", copies, []string{"Content-Type", "application/json-patch+json"}, 422, "accumulated"},
		{"object over 1.5 MiB", "POST", "/api/v1/nodes", bigNode(), nil, 413, "more than the store takes"},
		{"Accept text/html", "GET", "/api/v1/namespaces/default/configmaps/cm", "", []string{"Accept", "text/html"}, 406, "media types"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			r := e.admin(t, tc.method, tc.path, tc.body, tc.header...)
			if r.code != tc.code {
				t.Fatalf("status %d, want %d: %s", r.code, tc.code, r)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("answered after %v", d)
			}
			if st := r.status(t); !strings.Contains(st.Message, tc.message) {
				t.Errorf("message %q lacks %q", st.Message, tc.message)
			}
		})
	}
	var after corev1.ConfigMap
	mustCode(t, e.admin(t, "GET", "/api/v1/namespaces/default/configmaps/cm", ""), 200).decode(t, &after)
	if after.ResourceVersion != cm.ResourceVersion || after.UID != cm.UID {
		t.Errorf("the ConfigMap changed: resourceVersion %s → %s, uid %s → %s", cm.ResourceVersion, after.ResourceVersion, cm.UID, after.UID)
	}
	mustCode(t, e.admin(t, "GET", "/api/v1/nodes/big", ""), 404)
	// A negative grace period is one second: the delete goes through.
	mustCode(t, e.admin(t, "DELETE", "/api/v1/namespaces/default/configmaps/cm", `{"gracePeriodSeconds":-5}`), 200)
}

// bigNode is a Node of about 2 MiB: a status of many images, as the probe
// that once got stored sent.
func bigNode() string {
	var images []string
	for i := range 3000 {
		images = append(images, fmt.Sprintf(`{"names":["registry.example/%d/%s"],"sizeBytes":1}`, i, strings.Repeat("i", 650)))
	}
	return `{"metadata":{"name":"big"},"status":{"images":[` + strings.Join(images, ",") + `]}}`
}

// TestWatchFarFuture answers a watch from a revision the store has not
// reached with a 504 after the store's 3 s wait for it, as kube-apiserver
// does, instead of hanging without headers.
func TestWatchFarFuture(t *testing.T) {
	e := newEnv(t)
	start := time.Now()
	r := mustCode(t, e.admin(t, "GET", "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=999999999", ""), 504)
	if st := r.status(t); !strings.Contains(st.Message, "Too large resource version") || r.header.Get("Retry-After") == "" {
		t.Errorf("%s (Retry-After %q)", r, r.header.Get("Retry-After"))
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("answered after %v", d)
	}
}

// TestInFlightLimits answers 429 with Retry-After past the bounds of
// read-only requests and of a user's watches, counted apart; the
// administrators (system:masters) are not held by them.
func TestInFlightLimits(t *testing.T) {
	e := newEnv(t, func(c *apiserver.Config) {
		c.Limits = apiserver.Limits{ReadsInFlight: 2, MutatingInFlight: 1, WatchesPerUser: 2, Watches: 100}
	})
	as := func(token, method, path, body string) response {
		h := map[string]string{}
		if body != "" {
			h["Content-Type"] = "application/json"
		}
		return e.do(t, req{method: method, path: path, token: token, body: body, header: h})
	}
	// Lists at a revision the store has not reached wait 3 s: two of a
	// node hold the read-only places.
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Again while refused: the probe below may hold a place.
			for {
				hr, _ := http.NewRequestWithContext(e.ctx, "GET", e.srv.URL+"/api/v1/namespaces/default/pods?resourceVersion=999999", nil)
				hr.Header.Set("Authorization", "Bearer "+nodeAToken)
				resp, err := http.DefaultClient.Do(hr)
				if err != nil {
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusTooManyRequests {
					return
				}
			}
		}()
	}
	eventually(t, "the two slow lists in flight", func() bool {
		r := as(nodeAToken, "GET", "/api/v1/namespaces/default/pods", "")
		return r.code == http.StatusTooManyRequests && r.header.Get("Retry-After") == "1"
	})
	// Mutating requests are counted apart (this one is then refused by
	// authorization, not by the bound); administrators are not counted.
	mustCode(t, as(nobodyToken, "POST", "/api/v1/namespaces/default/configmaps", `{"metadata":{"name":"x"}}`), http.StatusForbidden)
	mustCode(t, e.admin(t, "GET", "/api/v1/namespaces/default/configmaps", ""), 200)
	wg.Wait()
	mustCode(t, as(nodeAToken, "GET", "/api/v1/namespaces/default/pods", ""), 200)

	// Watches: two a user.
	watch := func(token string) (*http.Response, error) {
		hr, _ := http.NewRequestWithContext(e.ctx, "GET", e.srv.URL+"/api/v1/namespaces/default/pods?watch=true", nil)
		hr.Header.Set("Authorization", "Bearer "+token)
		return http.DefaultClient.Do(hr)
	}
	for i := range 2 {
		resp, err := watch(nodeAToken)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("watch %d: %v %v", i, err, resp)
		}
		t.Cleanup(func() { resp.Body.Close() })
	}
	if resp, err := watch(nodeAToken); err != nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("a third watch of the same user: %v %v, want 429", err, resp)
	} else {
		resp.Body.Close()
	}
	for i := range 3 {
		resp, err := watch(adminToken)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("an administrator's watch %d: %v %v", i, err, resp)
		}
		t.Cleanup(func() { resp.Body.Close() })
	}
	// Reads are not held by watches.
	mustCode(t, as(nodeAToken, "GET", "/api/v1/namespaces/default/pods", ""), 200)
}
