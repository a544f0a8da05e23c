package ingress

import (
	"crypto/tls"
	"strings"
)

// table is one routing table. Update builds a new one and swaps it in;
// a table is never changed once in use.
type table struct {
	exact    map[string]*routes // by host, lower case
	wildcard map[string]*routes // by the part of "*.example.com" after "*."
	anyHost  *routes            // rules without a host; nil if none
	fallback *backend           // the default backend; nil: 404

	certs    map[string]*tls.Certificate // by exact TLS host
	wildcert map[string]*tls.Certificate // by the part of a wildcard TLS host after "*."
}

// routes are the paths of one host.
type routes struct {
	exact  map[string]*backend // by path
	prefix map[string]*backend // by path without trailing slashes ("" for /)
}

// route returns the backend of a request for host (lower case, without
// port) and URL path in table t, or nil for none. The fast path passes
// the path as it lies in the connection's buffer.
func route[P string | []byte](t *table, host string, path P) *backend {
	if r := t.exact[host]; r != nil {
		if b := match(r, path); b != nil {
			return b
		}
	}
	if suffix, ok := wildcardSuffix(host); ok {
		if r := t.wildcard[suffix]; r != nil {
			if b := match(r, path); b != nil {
				return b
			}
		}
	}
	if t.anyHost != nil {
		if b := match(t.anyHost, path); b != nil {
			return b
		}
	}
	return t.fallback
}

// certificate returns the certificate for a TLS server name (lower case),
// or nil for none.
func (t *table) certificate(name string) *tls.Certificate {
	if c := t.certs[name]; c != nil {
		return c
	}
	if suffix, ok := wildcardSuffix(name); ok {
		return t.wildcert[suffix]
	}
	return nil
}

// wildcardSuffix returns what a wildcard host must have after "*." to
// match host: host without its first label.
func wildcardSuffix(host string) (string, bool) {
	i := strings.IndexByte(host, '.')
	if i <= 0 || i == len(host)-1 {
		return "", false
	}
	return host[i+1:], true
}

// match returns the backend of path in r: an Exact path, else the
// longest Prefix path, matched element by element. (Indexing a map with
// string(path) does not copy path.)
func match[P string | []byte](r *routes, path P) *backend {
	if b := r.exact[string(path)]; b != nil {
		return b
	}
	if len(r.prefix) == 0 {
		return nil
	}
	p := path
	for len(p) > 0 && p[len(p)-1] == '/' {
		p = p[:len(p)-1]
	}
	for {
		if b := r.prefix[string(p)]; b != nil {
			return b
		}
		i := len(p) - 1
		for i >= 0 && p[i] != '/' {
			i--
		}
		if i < 0 {
			return nil
		}
		p = p[:i]
	}
}

// requestHost returns the host of a Host header as the table keys it:
// without port and trailing dot, in lower case.
func requestHost(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		h = h[:i]
	}
	return strings.ToLower(strings.TrimSuffix(h, "."))
}
