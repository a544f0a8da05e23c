package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// serveHealth serves /livez, /healthz and /readyz (and /readyz/<check>),
// with ?verbose listing each check as Kubernetes does. Readiness includes
// the store: a server that cannot reach a quorum is not ready.
func (s *Server) serveHealth(w http.ResponseWriter, r *http.Request) {
	kind := strings.Trim(r.URL.Path, "/")
	only := ""
	if i := strings.IndexByte(kind, '/'); i >= 0 {
		kind, only = kind[:i], kind[i+1:]
	}
	type check struct {
		name string
		run  func(context.Context) error
	}
	checks := []check{{"ping", func(context.Context) error { return nil }}}
	if kind == "readyz" || kind == "healthz" {
		checks = append(checks, check{"etcd", func(ctx context.Context) error {
			if s.cfg.Ready == nil {
				return nil
			}
			return s.cfg.Ready(ctx)
		}})
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	var b strings.Builder
	failed := false
	for _, c := range checks {
		if only != "" && c.name != only {
			continue
		}
		if err := c.run(ctx); err != nil {
			failed = true
			fmt.Fprintf(&b, "[-]%s failed: %v\n", c.name, err)
			s.log.Warn("apiserver: health check failed", "check", kind+"/"+c.name, "err", err)
		} else {
			fmt.Fprintf(&b, "[+]%s ok\n", c.name)
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if failed {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "%s%s check failed\n", b.String(), kind)
		return
	}
	if _, verbose := r.URL.Query()["verbose"]; verbose {
		fmt.Fprintf(w, "%s%s check passed\n", b.String(), kind)
		return
	}
	fmt.Fprint(w, "ok")
}
