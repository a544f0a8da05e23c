package apiserver

import (
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The OpenAPI v3 documents are what kubectl needs, no more: for every kind
// a PATCH operation tagged with its group-version-kind and taking the
// fieldValidation parameter, from which kubectl learns that the server
// validates fields itself (kubectl apply's default --validate=strict).
type openAPI struct {
	once  sync.Once
	index []byte
	docs  map[string][]byte // "api/v1", "apis/apps/v1" → document
}

func (s *Server) buildOpenAPI() {
	docs := map[string][]byte{}
	type ref struct {
		ServerRelativeURL string `json:"serverRelativeURL"`
	}
	index := struct {
		Paths map[string]ref `json:"paths"`
	}{Paths: map[string]ref{}}
	for _, gv := range s.store.Resources().GroupVersions() {
		key := "apis/" + gv.String()
		if gv.Group == "" {
			key = "api/" + gv.Version
		}
		doc := s.groupVersionDoc(gv)
		b, _ := json.Marshal(doc)
		sum := sha512.Sum512(b)
		docs[key] = b
		index.Paths[key] = ref{ServerRelativeURL: "/openapi/v3/" + key + "?hash=" + strings.ToUpper(hex.EncodeToString(sum[:]))}
	}
	s.openapi.docs = docs
	s.openapi.index, _ = json.Marshal(index)
}

func (s *Server) groupVersionDoc(gv schema.GroupVersion) map[string]any {
	paths := map[string]any{}
	prefix := "/apis/" + gv.String()
	if gv.Group == "" {
		prefix = "/api/" + gv.Version
	}
	params := []any{
		map[string]any{"name": "dryRun", "in": "query", "schema": map[string]any{"type": "string"}},
		map[string]any{"name": "fieldManager", "in": "query", "schema": map[string]any{"type": "string"}},
		map[string]any{"name": "fieldValidation", "in": "query", "schema": map[string]any{"type": "string"}},
		map[string]any{"name": "force", "in": "query", "schema": map[string]any{"type": "boolean"}},
	}
	for _, res := range s.store.Resources().InGroupVersion(gv) {
		p := prefix + "/" + res.Resource + "/{name}"
		if res.Namespaced {
			p = prefix + "/namespaces/{namespace}/" + res.Resource + "/{name}"
		}
		gvk := map[string]string{"group": gv.Group, "version": gv.Version, "kind": res.Kind}
		op := func(action string) map[string]any {
			return map[string]any{
				"operationId":                     action + res.Kind,
				"parameters":                      params,
				"x-kubernetes-action":             action,
				"x-kubernetes-group-version-kind": gvk,
				"responses":                       map[string]any{"200": map[string]any{"description": "OK"}},
			}
		}
		paths[p] = map[string]any{"patch": op("patch"), "put": op("put")}
		list := strings.TrimSuffix(p, "/{name}")
		paths[list] = map[string]any{"post": op("post")}
	}
	return map[string]any{
		"openapi":    "3.0.0",
		"info":       map[string]any{"title": "Kubernetes", "version": KubeVersion},
		"paths":      paths,
		"components": map[string]any{"schemas": map[string]any{}},
	}
}

// serveOpenAPI serves /openapi/v3 and /openapi/v3/<group-version>.
func (s *Server) serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	s.openapi.once.Do(s.buildOpenAPI)
	key := strings.Trim(strings.TrimPrefix(r.URL.Path, "/openapi/v3"), "/")
	var body []byte
	if key == "" {
		body = s.openapi.index
	} else if body = s.openapi.docs[key]; body == nil {
		s.writeError(w, r, notFound())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if key != "" && r.URL.Query().Get("hash") != "" {
		w.Header().Set("Cache-Control", "public, immutable")
	}
	_, _ = w.Write(body)
}
