package apiserver

import (
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/isle-cluster/isle/control/registry"
)

// request is what a resource URL names, like Kubernetes' RequestInfo.
type request struct {
	Verb        string // get list watch create update patch delete deletecollection
	GV          schema.GroupVersion
	Resource    *registry.Resource
	Namespace   string
	Name        string
	Subresource string
}

// parseResourcePath parses /api/v1/... and /apis/G/V/... URLs. ok is false
// for anything else; err explains a malformed resource URL (404).
func (s *Server) parseResourcePath(r *http.Request) (req request, ok bool, msg string) {
	p := strings.Trim(r.URL.Path, "/")
	parts := strings.Split(p, "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api" && parts[1] == "v1":
		req.GV = schema.GroupVersion{Version: "v1"}
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		req.GV = schema.GroupVersion{Group: parts[1], Version: parts[2]}
		parts = parts[3:]
	default:
		return req, false, ""
	}
	watchPath := false
	if parts[0] == "watch" { // legacy /watch/ prefix
		watchPath = true
		parts = parts[1:]
		if len(parts) == 0 {
			return req, true, "the server could not find the requested resource"
		}
	}
	lookup := func(name string) (*registry.Resource, bool) {
		r, ok := s.store.Resources().Lookup(req.GV.WithResource(name))
		return r, ok && !r.Unserved
	}
	var resName string
	switch {
	case parts[0] == "namespaces" && len(parts) >= 3:
		if rr, found := lookup(parts[2]); found && rr.Namespaced {
			req.Namespace = parts[1]
			resName = parts[2]
			parts = parts[3:]
		} else {
			// A namespace's own subresource: namespaces/NAME/status, /finalize.
			resName, req.Name, req.Subresource = "namespaces", parts[1], strings.Join(parts[2:], "/")
			parts = nil
		}
	default:
		resName = parts[0]
		parts = parts[1:]
	}
	if len(parts) > 0 {
		req.Name = parts[0]
	}
	if len(parts) > 1 {
		req.Subresource = strings.Join(parts[1:], "/")
		if parts[1] == "proxy" {
			// pods/proxy and services/proxy: what follows is the
			// proxied path (proxiedPath), not part of the subresource.
			req.Subresource = "proxy"
		}
	}
	rr, found := lookup(resName)
	if !found {
		return req, true, "the server could not find the requested resource"
	}
	req.Resource = rr
	if !rr.Namespaced && req.Namespace != "" {
		return req, true, "the server could not find the requested resource"
	}
	q := r.URL.Query()
	watching := watchPath || q.Get("watch") == "true" || q.Get("watch") == "1"
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		switch {
		case watching:
			req.Verb = "watch"
		case req.Name == "":
			req.Verb = "list"
		default:
			req.Verb = "get"
		}
	case http.MethodPost:
		req.Verb = "create"
	case http.MethodPut:
		req.Verb = "update"
	case http.MethodPatch:
		req.Verb = "patch"
	case http.MethodDelete:
		req.Verb = "delete"
		if req.Name == "" {
			req.Verb = "deletecollection"
		}
	}
	if req.Verb == "" && isProxy(req) {
		// OPTIONS and the rest pass through a proxy as reads do.
		req.Verb = "get"
	}
	if isConnect(req) && (r.Method == http.MethodGet || r.Method == http.MethodPost) {
		// A session in a pod's container is a write of pods/exec (or
		// attach), whether kubectl asks with a WebSocket GET or a SPDY
		// POST, as recent Kubernetes versions authorize it.
		req.Verb = "create"
	}
	return req, true, ""
}

// isConnect reports whether req opens a session in a container.
func isConnect(req request) bool {
	return req.Resource.Group == "" && req.Resource.Resource == "pods" && oneOf(req.Subresource, "exec", "attach", "portforward")
}
