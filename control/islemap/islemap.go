// Package islemap serves the island's map: one web page that draws the
// cluster as the first seed's picture (the lighthouse village of the
// control plane, the nest trees of the boards, the gates and roads of the
// network, the ground of storage) and plays its five flows from what the
// Kubernetes API's watches show.
//
// The page is plain HTML, CSS, SVG and JavaScript modules (web/),
// embedded in the binary and loaded from nothing else, so a classroom
// without a network has it. It is a client of the API it is served
// with: it lists and watches with the credentials of whoever opened it
// (through kubectl proxy or isle map), so everyone sees what RBAC lets
// them see. The API server serves it under Path and answers Status
// itself.
package islemap

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
)

// Path is where the map is served: GET Path opens it.
const Path = "/isle/map/"

// StatusPath is the map's status of the island (Status), beside its files.
const StatusPath = Path + "status"

//go:embed web
var web embed.FS

// Status is what the map asks of the API server it is served by, beside
// the Kubernetes API: who is asking, what they may list, and the store as
// this server sees it.
type Status struct {
	// Server is the name of the server that answered.
	Server string `json:"server"`
	// Version is isle's version and Kubernetes' it reports.
	Version     string `json:"version"`
	KubeVersion string `json:"kubeVersion"`
	User        string `json:"user"`
	// AllNamespaces: the user may list pods in every namespace;
	// otherwise Namespaces are those they may list pods in.
	AllNamespaces bool     `json:"allNamespaces"`
	Namespaces    []string `json:"namespaces,omitempty"`
	// Cluster are the cluster-wide lists the user may read, of nodes,
	// persistentvolumes and metrics (metrics.k8s.io's nodes): the page
	// asks for no other, so a student's console stays free of refusals.
	Cluster []string `json:"cluster"`
	// Store is the Raft store, for those who may list Nodes.
	Store *Store `json:"store,omitempty"`
	// Traffic is, of the pods the user may list that received any, the
	// bytes per second each received in the boards' latest usage reports
	// (every 15 s), by "NAMESPACE/NAME": the packets of the orange flow.
	Traffic map[string]float64 `json:"traffic,omitempty"`
}

// Store is the replicated store (the seed's memory tree) as one server
// sees it.
type Store struct {
	Role     string `json:"role"` // of the answering server: leader, follower, candidate, learner
	Leader   string `json:"leader,omitempty"`
	Term     uint64 `json:"term"`
	Commit   uint64 `json:"commit"`
	Applied  uint64 `json:"applied"`
	Revision int64  `json:"revision"`
	Keys     int    `json:"keys"`
	// LogBytes are the bytes of the Raft log held in memory.
	LogBytes uint64   `json:"logBytes"`
	Members  []Member `json:"members"`
}

// Member is a server of the store.
type Member struct {
	Name    string `json:"name"`
	API     string `json:"api,omitempty"` // host:port of its API server
	Learner bool   `json:"learner,omitempty"`
	// Active: the answering server heard from it within an election
	// timeout. Only the leader hears from every member; Known says
	// whether Active is meaningful.
	Active bool   `json:"active"`
	Known  bool   `json:"known"`
	Match  uint64 `json:"match,omitempty"` // on the leader: its replicated index
}

// Files serves the map's files: GET and HEAD of paths under Path, each
// with an ETag and, when the client takes it, gzipped (compressed once,
// at the first request of each file).
func Files() http.Handler {
	sub, err := fs.Sub(web, "web")
	if err != nil {
		panic("islemap: " + err.Error()) // the embedded tree has web/
	}
	return &files{fs: sub, cache: map[string]*file{}}
}

type files struct {
	fs    fs.FS
	mu    sync.Mutex
	cache map[string]*file
}

type file struct {
	body, gz []byte
	etag     string
	ctype    string
}

// types are the content types of the map's files; nothing else is served.
var types = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".json": "application/json",
	".png":  "image/png",
}

func (f *files) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "the map is read with GET", http.StatusMethodNotAllowed)
		return
	}
	name := strings.TrimPrefix(r.URL.Path, Path)
	if name == "" {
		name = "index.html"
	}
	fl, ok := f.get(name)
	if !ok {
		http.Error(w, "the map has no file "+name, http.StatusNotFound)
		return
	}
	h := w.Header()
	h.Set("Content-Type", fl.ctype)
	h.Set("ETag", fl.etag)
	// Revalidated on every load: an upgraded server serves its own page.
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	// Nothing is loaded from elsewhere, and nothing may frame the page.
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'")
	h.Add("Vary", "Accept-Encoding")
	if match := r.Header.Get("If-None-Match"); match != "" && strings.Contains(match, fl.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := fl.body
	if fl.gz != nil && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		h.Set("Content-Encoding", "gzip")
		body = fl.gz
	}
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(body)
}

// get reads name from the embedded tree, once.
func (f *files) get(name string) (*file, bool) {
	if !fs.ValidPath(name) || strings.HasPrefix(path.Base(name), ".") {
		return nil, false
	}
	ctype, ok := types[path.Ext(name)]
	if !ok {
		return nil, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if fl, ok := f.cache[name]; ok {
		return fl, true
	}
	body, err := fs.ReadFile(f.fs, name)
	if err != nil {
		return nil, false
	}
	sum := sha256.Sum256(body)
	fl := &file{body: body, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	if len(body) > 512 && ctype != types[".png"] {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		_, _ = zw.Write(body)
		if zw.Close() == nil && b.Len() < len(body) {
			fl.gz = b.Bytes()
		}
	}
	f.cache[name] = fl
	return fl, true
}
