package islemap

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
)

// Proxy serves, on a loopback address, what the map asks of the API
// server at target, with the credentials of transport (its client
// certificate) and token (a bearer token, if not empty): kubectl proxy's
// job for `isle map`. As a page of any other site could reach a server on
// loopback, it answers only requests addressed to loopback by name or
// address (a DNS name rebound to 127.0.0.1 is refused), and of those
// only the ones of its own pages (an Origin other than its own is
// refused), and passes on only what the map does: reads, watches, access
// reviews and pod deletions.
func Proxy(target *url.URL, transport http.RoundTripper, token string) http.Handler {
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
			r.Out.Header.Del("Cookie")
			r.Out.Header.Del("Origin")
			if token != "" {
				r.Out.Header.Set("Authorization", "Bearer "+token)
			}
		},
		Transport: transport,
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r.Host) {
			http.Error(w, "isle map: only loopback addresses are served", http.StatusForbidden)
			return
		}
		if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host {
			http.Error(w, "isle map: requests of other sites' pages are refused", http.StatusForbidden)
			return
		}
		if !allowed(r) {
			http.Error(w, "isle map: the map does not make this request", http.StatusForbidden)
			return
		}
		if r.URL.Path == "/" {
			http.Redirect(w, r, Path, http.StatusFound)
			return
		}
		rp.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether host (of a Host header) is localhost or a
// loopback address.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// allowed reports whether the map makes such a request: reads, watches,
// access reviews and pod deletions; never a session in a container or a
// proxied page of a pod, Service or Node (served from the proxy's
// origin, such a page could use its credentials), by whichever path.
func allowed(r *http.Request) bool {
	p := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	for i := 0; i+2 < len(p); i++ {
		if (p[i] == "pods" || p[i] == "services" || p[i] == "nodes") &&
			(p[i+2] == "exec" || p[i+2] == "attach" || p[i+2] == "portforward" || p[i+2] == "proxy") {
			return false
		}
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return true
	case http.MethodPost:
		return r.URL.Path == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
	case http.MethodDelete:
		// /api/v1/namespaces/NS/pods/NAME
		return len(p) == 6 && p[0] == "api" && p[1] == "v1" && p[2] == "namespaces" && p[4] == "pods"
	}
	return false
}

// ProxyURL is the map's address on a proxy listening at addr.
func ProxyURL(addr net.Addr) string {
	return (&url.URL{Scheme: "http", Host: addr.String(), Path: Path}).String()
}
