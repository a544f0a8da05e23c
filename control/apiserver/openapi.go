package apiserver

import (
	"bytes"
	"compress/gzip"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/isle-cluster/isle/control/openapi"
	"github.com/isle-cluster/isle/control/registry"
)

// The OpenAPI documents (/openapi/v2, /openapi/v3) are built from the
// served kinds' Go types at the first request and kept gzipped.
type openAPI struct {
	mu         sync.Mutex
	docs       *openapi.Documents
	generation uint64 // of the resources the documents describe
}

// openAPIModels returns the models of the served kinds, their lists and
// the meta kinds the paths refer to (and of metrics.k8s.io if served).
func openAPIModels(resources []*registry.Resource, metrics bool) (openapi.Models, []openapi.Resource) {
	b := openapi.NewBuilder()
	b.AddKind(reflect.TypeOf(metav1.Status{}), metav1.SchemeGroupVersion.WithKind("Status"))
	b.AddKind(reflect.TypeOf(metav1.Patch{}))
	b.AddKind(reflect.TypeOf(autoscalingv1.Scale{}), autoscalingv1.SchemeGroupVersion.WithKind("Scale"))
	var deleteOptions = reflect.TypeOf(metav1.DeleteOptions{})
	var out []openapi.Resource
	seen := map[string]bool{}
	for _, r := range resources {
		if r.Unserved {
			continue
		}
		obj := r.New()
		_, unstructured := obj.(runtime.Unstructured)
		if unstructured && r.OpenAPIDefs == nil {
			continue
		}
		gv := r.GroupVersion()
		if !seen[gv.String()] {
			seen[gv.String()] = true
			b.AddKind(deleteOptions, gv.WithKind("DeleteOptions"))
		}
		res := openapi.Resource{
			GroupVersionResource: r.GroupVersionResource,
			Kind:                 r.Kind,
			Namespaced:           r.Namespaced,
			Scale:                r.Scale != nil,
			Verbs:                r.Verbs(),
			Custom:               unstructured,
		}
		if unstructured {
			res.Model, res.ListModel, res.Defs = r.Model, r.ListModel, r.OpenAPIDefs
		} else {
			res.Model = b.AddKind(reflect.TypeOf(obj), r.GVK())
			res.ListModel = b.AddKind(reflect.TypeOf(r.NewList()), gv.WithKind(r.Kind+"List"))
		}
		if r.Status {
			res.Subresources = append(res.Subresources, "status")
		}
		if r.Approval != nil {
			res.Subresources = append(res.Subresources, "approval")
		}
		out = append(out, res)
	}
	// The APIs served beside the registry: the reviews and metrics.
	for _, rv := range reviews {
		for _, v := range rv.versions {
			gvk := schema.GroupVersionKind{Group: rv.group, Version: v, Kind: rv.kind}
			obj, err := reviewScheme.New(gvk)
			if err != nil {
				continue
			}
			out = append(out, openapi.Resource{GroupVersionResource: gvk.GroupVersion().WithResource(rv.resource), Kind: rv.kind,
				Namespaced: rv.namespaced, Model: b.AddKind(reflect.TypeOf(obj), gvk), Verbs: []string{"create"}})
		}
	}
	if metrics {
		for _, m := range metricsResources {
			out = append(out, openapi.Resource{GroupVersionResource: metricsGV.WithResource(m.resource), Kind: m.kind, Namespaced: m.namespaced,
				Model: b.AddKind(reflect.TypeOf(m.obj), metricsGV.WithKind(m.kind)), ListModel: b.AddKind(reflect.TypeOf(m.list), metricsGV.WithKind(m.kind+"List")),
				Verbs: metricsVerbs})
		}
	}
	return b.Models(), out
}

func (s *Server) openAPIDocs() (*openapi.Documents, error) {
	s.openapi.mu.Lock()
	defer s.openapi.mu.Unlock()
	gen := s.store.Resources().Generation()
	if s.openapi.docs != nil && s.openapi.generation == gen {
		return s.openapi.docs, nil
	}
	models, resources := openAPIModels(s.store.Resources().All(), s.cfg.Usage != nil)
	docs, err := openapi.Build(models, resources, KubeVersion)
	if err != nil {
		return nil, err
	}
	s.openapi.docs, s.openapi.generation = docs, gen
	return docs, nil
}

// OpenAPI v2's protobuf media type (kubectl asks for it, and for it by its
// older name with an "@", which is not a valid media type to answer with).
const openAPIV2Proto = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"

// serveOpenAPI serves /openapi/v2 (JSON, or protobuf when asked first),
// /openapi/v3 and /openapi/v3/<group-version>.
func (s *Server) serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	docs, err := s.openAPIDocs()
	if err != nil {
		slog.Error("openapi: build", "err", err)
		s.writeError(w, r, err)
		return
	}
	var doc openapi.Doc
	contentType := "application/json"
	switch key := strings.Trim(strings.TrimPrefix(r.URL.Path, "/openapi/v3"), "/"); {
	case r.URL.Path == "/openapi/v2":
		doc = docs.V2JSON
		if prefersProto(r.Header.Get("Accept")) {
			doc, contentType = docs.V2Proto, openAPIV2Proto
		}
	case key == "":
		doc = docs.V3Index
	default:
		var ok bool
		if doc, ok = docs.V3[key]; !ok {
			s.writeError(w, r, notFound())
			return
		}
		if r.URL.Query().Get("hash") != "" {
			w.Header().Set("Cache-Control", "public, immutable")
		}
	}
	etag := `"` + doc.Hash + `"`
	w.Header().Set("Etag", etag)
	w.Header().Set("Vary", "Accept, Accept-Encoding")
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", contentType)
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(doc.Gzip)
		return
	}
	zr, err := gzip.NewReader(bytes.NewReader(doc.Gzip))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	_, _ = io.Copy(w, zr)
}

// prefersProto reports whether an Accept header prefers OpenAPI v2's
// protobuf (by either of its names) to JSON: the first of the highest
// quality wins, as in kube-apiserver.
func prefersProto(accept string) bool {
	best, proto := -1.0, false
	for _, part := range strings.Split(accept, ",") {
		mt, params, _ := strings.Cut(part, ";")
		q := 1.0
		for _, p := range strings.Split(params, ";") {
			if k, v, ok := strings.Cut(strings.TrimSpace(p), "="); ok && k == "q" {
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					q = f
				}
			}
		}
		isProto := false
		switch strings.TrimSpace(mt) {
		case openAPIV2Proto, "application/com.github.proto-openapi.spec.v2@v1.0+protobuf":
			isProto = true
		case "application/json", "*/*", "application/*":
		default:
			continue
		}
		if q > best {
			best, proto = q, isProto
		}
	}
	return proto
}

func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.ReplaceAll(params, " ", "") != "q=0" {
			return true
		}
	}
	return false
}
