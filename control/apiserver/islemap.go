package apiserver

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/isle-cluster/isle/control/authz"
	"github.com/isle-cluster/isle/control/islemap"
	"github.com/isle-cluster/isle/raft"
)

// The island's map (package islemap) is served under islemap.Path to
// anyone RBAC lets GET it (the bootstrap policy's isle:map-viewer: every
// authenticated user); what it shows is what its user may list.

// isMapPath reports whether path is the map's.
func isMapPath(path string) bool {
	return path == strings.TrimSuffix(islemap.Path, "/") || strings.HasPrefix(path, islemap.Path)
}

// serveMap serves the map's page and files, and its status.
func (s *Server) serveMap(w http.ResponseWriter, r *http.Request, u *User) {
	switch r.URL.Path {
	case strings.TrimSuffix(islemap.Path, "/"):
		http.Redirect(w, r, islemap.Path, http.StatusMovedPermanently)
		return
	case islemap.StatusPath:
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", "GET")
			s.writeError(w, r, apierrors.NewGenericServerResponse(http.StatusMethodNotAllowed, r.Method, schema.GroupResource{}, "", "the map's status is read with GET", 0, false))
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		writeBody(w, http.StatusOK, output{}, s.mapStatus(r.Context(), u))
		return
	}
	s.mapFiles.ServeHTTP(w, r)
}

// mapStatusWait bounds how long the map's status waits for the store.
const mapStatusWait = 2 * time.Second

// mapStatus is what the map shows beside the API's objects: who asks,
// where they may list pods, and, to those who may list Nodes, the store.
func (s *Server) mapStatus(ctx context.Context, u *User) islemap.Status {
	st := islemap.Status{Version: s.cfg.IsleVersion, KubeVersion: KubeVersion, User: u.Name}
	mayIn := func(group, resource, ns string) bool {
		return s.decide(authz.Attributes{User: u, Verb: "list", ResourceRequest: true, APIGroup: group, Resource: resource, Namespace: ns}) == nil
	}
	st.AllNamespaces = mayIn("", "pods", "")
	st.Cluster = []string{}
	for _, r := range []struct{ group, resource, name string }{{"", "nodes", "nodes"}, {"", "persistentvolumes", "persistentvolumes"}, {"metrics.k8s.io", "nodes", "metrics"}} {
		if mayIn(r.group, r.resource, "") {
			st.Cluster = append(st.Cluster, r.name)
		}
	}
	if !st.AllNamespaces {
		if res, ok := s.store.Resources().Lookup(corev1.SchemeGroupVersion.WithResource("namespaces")); ok {
			_, _ = s.store.Scan(ctx, res, "", metav1.ListOptions{}, func(obj runtime.Object) error {
				if ns := obj.(*corev1.Namespace).Name; mayIn("", "pods", ns) {
					st.Namespaces = append(st.Namespaces, ns)
				}
				return nil
			})
		}
	}
	if s.cfg.Usage != nil {
		var in func(string) bool
		if !st.AllNamespaces {
			in = func(ns string) bool { return slices.Contains(st.Namespaces, ns) }
		}
		if st.AllNamespaces || len(st.Namespaces) > 0 {
			st.Traffic = s.cfg.Usage.Traffic(in)
		}
	}
	server, store := s.mapStore.get(ctx, s.store.Node(), s.now())
	st.Server = server
	if slices.Contains(st.Cluster, "nodes") {
		st.Store = store
	}
	return st
}

// mapStoreEvery is how long the store's view is shared by the maps: each
// polls every two seconds, and a member's status walks its in-memory log
// on the Raft loop.
const mapStoreEvery = time.Second

// mapStore is the store as the maps see it, read at most every
// mapStoreEvery however many maps are open.
type mapStore struct {
	mu     sync.Mutex
	at     time.Time
	server string
	store  *islemap.Store
}

// get returns this server's name and its view of the store (nil store if
// node is nil or does not answer within mapStatusWait).
func (m *mapStore) get(ctx context.Context, node *raft.Node, now time.Time) (string, *islemap.Store) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if node == nil || now.Sub(m.at) < mapStoreEvery && m.store != nil {
		return m.server, m.store
	}
	ctx, cancel := context.WithTimeout(ctx, mapStatusWait)
	defer cancel()
	rs, err := node.Status(ctx)
	if err != nil {
		return m.server, nil
	}
	store := &islemap.Store{Role: rs.Role, Term: rs.Term, Commit: rs.Commit, Applied: rs.Applied,
		Revision: rs.Revision, Keys: node.KV().Count(""), LogBytes: rs.LogBytes}
	for _, mb := range rs.Members {
		if mb.ID == rs.Leader {
			store.Leader = mb.Name
		}
		// Only the leader hears from every member; a follower hears
		// from the leader (and from itself).
		known := rs.Role == "leader" || mb.ID == rs.ID || mb.ID == rs.Leader
		store.Members = append(store.Members, islemap.Member{Name: mb.Name, API: mb.ClientAddr, Learner: mb.Learner,
			Active: mb.Active, Known: known, Match: mb.Match})
	}
	m.at, m.server, m.store = now, rs.Name, store
	return m.server, m.store
}
