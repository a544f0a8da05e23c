// Package apiserver serves the Kubernetes REST API over HTTPS on top of
// package registry: routing of resource URLs, content negotiation (JSON,
// YAML, Tables for kubectl), watches, discovery (legacy and aggregated),
// the OpenAPI v3 documents kubectl apply needs, health endpoints,
// authentication (client certificates of the cluster CA, bearer tokens)
// and authorization.
package apiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/version"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/isle-cluster/isle/control/authz"
	"github.com/isle-cluster/isle/control/islemap"
	resourcemetrics "github.com/isle-cluster/isle/control/metrics"
	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/control/wire"
)

// KubeVersion is the Kubernetes version isle's API corresponds to. kubectl
// picks its behaviour (and the dispatcher on these machines its binary)
// from it, and `make conformance` runs the conformance suite of this
// version.
const KubeVersion = "v1.33.0"

// Config configures a Server.
type Config struct {
	Store *registry.Store // required
	// AdvertiseAddr is this server's host:port as clients reach it.
	AdvertiseAddr string
	// Tokens resolves bearer tokens; nil accepts none.
	Tokens TokenAuthenticator
	// ServiceAccounts issues and verifies service-account tokens. nil:
	// none are issued or accepted.
	ServiceAccounts ServiceAccountTokens
	// CertRevoked reports whether a client certificate the CA signed was
	// revoked (isle user revoke). nil: none is.
	CertRevoked func(*x509.Certificate) bool
	// Authz decides who may do what (and checks what RBAC writes grant
	// and what nodes write of themselves). nil: system:masters may do
	// anything, everyone else nothing.
	Authz *authz.Chain
	// Ready reports whether this server can serve (it has a store quorum).
	// nil: always.
	Ready func(ctx context.Context) error
	// Extra serves paths under /isle/ (joining, say), after authentication
	// is up to it.
	Extra http.Handler
	// NodeLease answers GETs of a Node's Lease in kube-node-lease that is
	// not stored: isle's boards do not renew Leases through the store (gossip
	// says who is alive), so one is made up from what gossip knows, for
	// kubectl describe node and other readers. nil: none.
	NodeLease func(node string) (*coordinationv1.Lease, bool)
	// Metrics is the registry for /metrics. nil: a new one.
	Metrics *prometheus.Registry
	// Usage keeps the resource usage nodes report (POST to
	// wire.ReportPath); metrics.k8s.io/v1beta1 is served from
	// it, for kubectl top. nil: neither is served.
	Usage *resourcemetrics.Cache
	// NodeTLS is the client configuration for the node agents' streaming
	// servers, to which pods/log, pods/exec and pods/attach are proxied:
	// the cluster CA as the only root and this server's client certificate
	// (wire.APIServerUser). The agent is verified by its node's name. nil:
	// those subresources answer 503.
	NodeTLS *tls.Config
	// ProxyDial dials the pods and endpoints that pods/proxy and
	// services/proxy reach. nil: a net.Dialer (tests map pod addresses to
	// their own servers).
	ProxyDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Limits bounds the requests served at once (429 past them).
	Limits Limits
	// IsleVersion and IsleCommit are reported in /version.
	IsleVersion, IsleCommit string
	Logger                  *slog.Logger
	Now                     func() time.Time
}

// Server is the API server. It is an http.Handler.
type Server struct {
	cfg      Config
	store    *registry.Store
	log      *slog.Logger
	now      func() time.Time
	metrics  *metrics
	openapi  openAPI
	inFlight *inFlight
	// The island's map: its files, and the store as the maps see it.
	mapFiles http.Handler
	mapStore mapStore
	// encoded is the JSON of the objects watches send, encoded once for
	// all of them.
	encoded encodedObjects
}

// New returns a Server.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Metrics == nil {
		cfg.Metrics = prometheus.NewRegistry()
	}
	return &Server{cfg: cfg, store: cfg.Store, log: cfg.Logger, now: cfg.Now, metrics: newMetrics(cfg.Metrics), inFlight: newInFlight(cfg.Limits),
		mapFiles: islemap.Files()}
}

type userKey struct{}

func userFrom(ctx context.Context) *User {
	u, _ := ctx.Value(userKey{}).(*User)
	return u
}

// ServeHTTP routes one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ctx, warnings := registry.WithWarnings(r.Context())
	r = r.WithContext(ctx)
	rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK, warnings: warnings}
	verb, resource := s.serve(rec, r)
	if verb != "watch" {
		s.metrics.requests.WithLabelValues(verb, resource, strconv.Itoa(rec.code)).Inc()
		s.metrics.latency.WithLabelValues(verb, resource).Observe(time.Since(start).Seconds())
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) (verb, resource string) {
	path := r.URL.Path
	switch path {
	case "/livez", "/healthz", "/readyz":
		s.serveHealth(w, r)
		return "health", ""
	case "/version", "/version/":
		writeBody(w, http.StatusOK, output{}, s.version())
		return "version", ""
	}
	if strings.HasPrefix(path, "/livez/") || strings.HasPrefix(path, "/readyz/") || strings.HasPrefix(path, "/healthz/") {
		s.serveHealth(w, r)
		return "health", ""
	}
	// Usage reports are authenticated by the node credential, like the
	// Kubernetes API, not by the cluster token as the rest of /isle/ is.
	if strings.HasPrefix(path, "/isle/") && s.cfg.Extra != nil && !(path == wire.ReportPath && s.cfg.Usage != nil) && !isMapPath(path) {
		s.cfg.Extra.ServeHTTP(w, r)
		return "isle", ""
	}
	u := s.authenticate(r)
	if u == nil {
		s.writeError(w, r, unauthorized())
		return "unauthorized", ""
	}
	u, err := s.impersonate(r, u)
	if err != nil {
		s.writeError(w, r, err)
		return "impersonate", ""
	}
	if err := s.authzReady(r, u); err != nil {
		s.writeError(w, r, err)
		return "unavailable", ""
	}
	ctx := registry.WithRequester(context.WithValue(r.Context(), userKey{}, u),
		authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups, Extra: extraOf(u.Extra)})
	r = r.WithContext(ctx)
	release, err := s.inFlight.admit(r, u)
	if err != nil {
		s.writeError(w, r, err)
		return "throttled", ""
	}
	defer release()
	if nonResource(path) {
		if err := s.authorizePath(r, u); err != nil {
			s.writeError(w, r, err)
			return "forbidden", ""
		}
	}
	switch {
	case path == "/metrics":
		promhttpHandler(s.cfg.Metrics).ServeHTTP(w, r)
		return "metrics", ""
	case path == oidcConfigPath || path == jwksPath:
		s.serveOIDC(w, r)
		return "oidc", ""
	case path == "/openapi/v2" || path == "/openapi/v3" || strings.HasPrefix(path, "/openapi/v3/"):
		s.serveOpenAPI(w, r)
		return "openapi", ""
	case path == wire.ReportPath && s.cfg.Usage != nil:
		s.serveReport(w, r, u)
		return "report", ""
	case strings.HasPrefix(path, metricsPrefix) && strings.Trim(path[len(metricsPrefix):], "/") != "" && s.cfg.Usage != nil:
		return s.serveMetrics(w, r)
	case isReviewPath(path):
		return s.serveReview(w, r, u)
	case isMapPath(path):
		s.serveMap(w, r, u)
		return "map", ""
	}
	if s.serveDiscovery(w, r) {
		return "discovery", ""
	}
	req, ok, msg := s.parseResourcePath(r)
	if !ok || msg != "" {
		s.writeError(w, r, notFound())
		return "notfound", ""
	}
	if req.Verb == "" {
		s.writeError(w, r, apierrors.NewMethodNotSupported(req.Resource.GroupVersionResource.GroupResource(), r.Method))
		return "unsupported", req.Resource.Resource
	}
	if req.Subresource == "" && !acceptable(r) {
		s.writeError(w, r, apierrors.NewGenericServerResponse(http.StatusNotAcceptable, "", schemaGR(""), "",
			"only the following media types are accepted: application/json, application/yaml", 0, false))
		return req.Verb, req.Resource.Resource
	}
	// Creates are authorized once their object's name is known, except
	// those of a subresource (binding, eviction, exec, attach), whose URL
	// names the object.
	if req.Verb != "create" || req.Subresource != "" {
		if err := s.authorize(r, u, req); err != nil {
			s.writeError(w, r, err)
			return req.Verb, req.Resource.Resource
		}
	}
	s.serveResource(w, r, req)
	return req.Verb, req.Resource.Resource
}

func (s *Server) version() *version.Info {
	v := strings.TrimPrefix(KubeVersion, "v")
	parts := strings.SplitN(v, ".", 3)
	return &version.Info{
		Major: parts[0], Minor: parts[1], GitVersion: KubeVersion,
		GitCommit: s.cfg.IsleCommit, GitTreeState: "clean", BuildDate: "",
		GoVersion: runtime.Version(), Compiler: runtime.Compiler, Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// statusRecorder remembers the status code for metrics; it passes
// flushing through for watches and logs.
type statusRecorder struct {
	http.ResponseWriter
	code  int
	wrote bool
	// warnings the request's admission gave, sent as Warning headers.
	warnings *registry.Warnings
}

func (s *statusRecorder) WriteHeader(code int) {
	if !s.wrote && s.warnings != nil {
		addWarnings(s.ResponseWriter, s.warnings.List())
	}
	s.code, s.wrote = code, true
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if !s.wrote {
		s.WriteHeader(http.StatusOK)
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the connection, which the exec and
// attach proxy hijacks.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// extraOf is a user's extra attributes as the admission webhooks get them.
func extraOf(extra map[string][]string) map[string]authenticationv1.ExtraValue {
	if len(extra) == 0 {
		return nil
	}
	out := make(map[string]authenticationv1.ExtraValue, len(extra))
	for k, v := range extra {
		out[k] = v
	}
	return out
}
