package apiserver_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/isle-cluster/isle/control/apiserver"
	"github.com/isle-cluster/isle/control/islemap"
)

// TestMap serves the island's map: its page to every authenticated user
// (the bootstrap policy's isle:map-viewer) and not to anonymous ones or
// to a user the binding was taken from; its status names who asks, where
// they may list pods and, to those who may list Nodes, the store; paths
// under /isle/map/ are the map's, not the join endpoints'.
func TestMap(t *testing.T) {
	extra := 0
	e := newEnv(t, func(c *apiserver.Config) {
		c.Extra = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { extra++ })
	})
	page := mustCode(t, e.as(t, nobodyToken, "GET", islemap.Path, ""), 200)
	if !strings.Contains(string(page.body), `<main id="island">`) || !strings.HasPrefix(page.header.Get("Content-Type"), "text/html") {
		t.Errorf("the map's page: %s %s", page.header.Get("Content-Type"), page)
	}
	mustCode(t, e.as(t, nobodyToken, "GET", islemap.Path+"main.js", ""), 200)
	mustCode(t, e.as(t, nobodyToken, "GET", islemap.Path+"nothing.js", ""), 404)
	if r := mustCode(t, e.as(t, nobodyToken, "GET", "/isle/map", ""), 301); r.header.Get("Location") != islemap.Path {
		t.Errorf("/isle/map redirects to %q", r.header.Get("Location"))
	}
	mustCode(t, e.do(t, req{path: islemap.Path}), 401)
	// Read-only: RBAC grants the map's paths to GET only, and an
	// administrator's other verbs find nothing to do.
	mustCode(t, e.as(t, nobodyToken, "POST", islemap.Path, "{}"), 403)
	mustCode(t, e.admin(t, "POST", islemap.Path, "{}"), 405)
	mustCode(t, e.admin(t, "POST", islemap.StatusPath, "{}"), 405)
	if extra != 0 {
		t.Errorf("the map's requests reached the /isle/ endpoints %d times", extra)
	}

	status := func(token string) islemap.Status {
		t.Helper()
		var st islemap.Status
		mustCode(t, e.as(t, token, "GET", islemap.StatusPath, ""), 200).decode(t, &st)
		return st
	}
	admin := status(adminToken)
	if admin.User != "admin" || !admin.AllNamespaces || admin.Store == nil || !slices.Equal(admin.Cluster, []string{"nodes", "persistentvolumes", "metrics"}) {
		t.Fatalf("the admin's status: %+v", admin)
	}
	if st := admin.Store; st.Role != "leader" || len(st.Members) != 1 || st.Leader != st.Members[0].Name || !st.Members[0].Active ||
		!st.Members[0].Known || st.Term == 0 || st.Commit == 0 || st.Keys == 0 || st.Revision == 0 {
		t.Errorf("the store: %+v", st)
	}
	// nobody: no pods anywhere, no store; then an editor of one namespace.
	if st := status(nobodyToken); st.AllNamespaces || len(st.Namespaces) != 0 || st.Store != nil || len(st.Cluster) != 0 || st.Server == "" {
		t.Errorf("nobody's status: %+v", st)
	}
	for _, ns := range []string{"class-a", "class-b"} {
		mustCode(t, e.admin(t, "POST", "/api/v1/namespaces", `{"metadata":{"name":"`+ns+`"}}`), 201)
	}
	mustCode(t, e.admin(t, "POST", rbacPath+"namespaces/class-a/rolebindings", binding("student", "edit", "ClusterRole", "User", "nobody")), 201)
	eventually(t, "nobody's status names class-a", func() bool { return slices.Equal(status(nobodyToken).Namespaces, []string{"class-a"}) })

	// An administrator can take the map from everyone.
	mustCode(t, e.admin(t, "DELETE", rbacPath+"clusterrolebindings/isle:map-viewer", ""), 200)
	eventually(t, "the map refused to nobody", func() bool { return e.as(t, nobodyToken, "GET", islemap.Path, "").code == 403 })
	mustCode(t, e.admin(t, "GET", islemap.Path, ""), 200)
}

// TestWatchWebSocket follows a watch on a WebSocket, as browsers do: each
// event a text message of JSON, the watch's authorization as over HTTP.
func TestWatchWebSocket(t *testing.T) {
	e := newEnv(t)
	url := "ws" + strings.TrimPrefix(e.srv.URL, "http") + "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=0"
	dial := func(token string) (*websocket.Conn, *http.Response, error) {
		return websocket.DefaultDialer.Dial(url, http.Header{"Authorization": {"Bearer " + token}, "Origin": {"http://elsewhere.example"}})
	}
	if _, res, err := dial(nobodyToken); err == nil || res == nil || res.StatusCode != 403 {
		t.Fatalf("nobody's watch: %v %v", res, err)
	}
	conn, _, err := dial(adminToken)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/configmaps", `{"metadata":{"name":"one"},"data":{"a":"b"}}`), 201)
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	kind, msg, err := conn.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	var ev metav1.WatchEvent
	if err := json.Unmarshal(msg, &ev); err != nil || kind != websocket.TextMessage || ev.Type != "ADDED" || !strings.Contains(string(ev.Object.Raw), `"name":"one"`) {
		t.Fatalf("the event: %d %s (%v)", kind, msg, err)
	}
	// The client closing ends the watch on the server.
	if err := conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the server to close too", func() bool {
		_ = conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		_, _, err := conn.ReadMessage()
		return websocket.IsCloseError(err, websocket.CloseNormalClosure)
	})
}
