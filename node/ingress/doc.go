// Package ingress is the Ingress controller of a board: an HTTP reverse
// proxy on :80 and :443 that serves the networking.k8s.io/v1 Ingresses of
// the IngressClasses whose spec.controller is ControllerName ("isle" is
// the control plane's default class). Ingress status is written by the
// control plane, not here.
//
// The agent feeds the Controller Snapshots of the Ingresses, IngressClasses,
// Services, EndpointSlices and TLS Secrets it watches. Update builds a new
// routing table off to the side and swaps it in atomically; requests read
// the table they started with, so Updates never block or tear a request.
//
// # Which Ingresses
//
// An Ingress is served when spec.ingressClassName (or, if that is unset,
// the legacy annotation kubernetes.io/ingress.class) names a served class,
// or when it names no class and a served class carries the annotation
// ingressclass.kubernetes.io/is-default-class: "true".
//
// # Routing
//
// Routing follows the Kubernetes Ingress semantics:
//
//   - The request's Host, without port and trailing dot, is compared
//     case-insensitively. Rules of the exact host are tried first, then
//     rules of a wildcard host ("*.example.com" matches exactly one more
//     label: a.example.com, not example.com nor a.b.example.com), then
//     rules without a host. The first of these groups with a path that
//     matches the request wins; a request no path matches goes to the
//     default backend (spec.defaultBackend of the oldest served Ingress
//     that has one), else gets 404.
//   - Within a group an Exact path beats every Prefix path, and the
//     longest Prefix wins. Prefix matches whole path elements: /foo
//     matches /foo, /foo/ and /foo/bar, not /foobar; a trailing slash of
//     the rule is ignored and / matches every path. ImplementationSpecific
//     paths are Prefix paths here (an empty one is /), and a path with no
//     pathType is ImplementationSpecific.
//   - When Ingresses define the same host, path and type, the oldest
//     (creationTimestamp, then namespace/name) wins.
//
// A backend is a Service port, by number or by name. Requests go straight
// to the ready endpoints (pod IPs) of the Service's EndpointSlices (IPv4,
// the slice port named like the service port), round-robin, with the URL
// path unchanged. A Service that is missing, or has no ready endpoint,
// gets 503 with a body naming it; resource backends are not supported and
// get 503 too.
//
// When connecting to an endpoint fails (refused, unreachable, or no answer
// within a second), the request is tried on another endpoint: nothing was
// sent, so this is safe for every method. It gives up after three attempts
// that got no answer, or sixteen endpoints in all; attempts that fail at
// once (a board that is gone leaves no route to its pods) cost nothing, so
// a request finds the live endpoints among many dead ones.
// Each endpoint has its own connection pool, and the idle connections of
// an endpoint are closed when an Update removes it.
//
// Endpoint health is passive, as the EndpointSlices may lag (or, with the
// control plane down, never change): requests pass by an endpoint that
// could not be connected to for 10 s; then one request tries it again
// (the trial) while the others still pass it by. A response clears it; a
// failed trial doubles the hold, up to 60 s. When every endpoint of
// a backend is held, requests try them all the same. Health belongs to
// the address: an Update that keeps an endpoint keeps it, and one that
// drops the endpoint forgets it.
//
// The proxy sets X-Forwarded-For (appended to the client's),
// X-Forwarded-Host, X-Forwarded-Proto, X-Forwarded-Port and X-Real-IP, and
// passes Host through unchanged. Upgrades such as WebSockets pass through.
//
// # The fast path
//
// Plain HTTP/1.1 requests on HTTPAddr (with a Host, in origin form, with
// no body or one of at most 64 KiB of known length, no Upgrade, Expect or
// Trailer, and a header of at most 4 KiB in the strict form head.go
// parses) are proxied by fast.go, one goroutine per client connection:
// it reads a request, writes it to an idle keep-alive connection of the
// endpoint (or a new one), reads the response and copies it back, with
// Content-Length or chunked. Headers are parsed in place in the
// connections' buffers and the sockets read and written with raw system
// calls, so that a request allocates nothing and spends far less CPU
// time than with http.Server, ReverseProxy and http.Transport, which hand
// every request between several goroutines (in make bench-traffic, 28 µs
// of pi2's isle per request instead of 86 µs through net/http, and 48 µs
// when the fast path still parsed with net/http; the Ingress went from
// 0.28 to about 0.55 of the pod IP's requests/s on a 2-CPU machine, where
// client, proxy and pod share the CPUs). A request it leaves to them,
// malformed ones included, is replayed to http.Server together with its
// connection, so that answers such as 400 and 431 stay http.Server's. When an idle
// endpoint connection turns out closed, a GET, HEAD, OPTIONS or TRACE
// without a body is sent again on a new connection; other requests get
// 502, as they may have been acted on. HTTPS is served by http.Server.
//
// # TLS
//
// HTTPS uses the certificates of the Ingresses' spec.tls entries: Secrets
// of type kubernetes.io/tls (tls.crt, tls.key) in the Ingress's namespace,
// chosen by SNI, exact host before wildcard; an entry without hosts covers
// the hosts of its Ingress's rules. A handshake no certificate matches gets
// a self-signed certificate made by New. A missing or bad Secret is logged
// and skipped. Hosts with certificates are served over HTTP as well (no
// redirect). HTTPS speaks HTTP/1.1 only, which keeps memory low and lets
// WebSockets through.
//
// Problems with the objects of a Snapshot (bad paths, hosts, backends or
// Secrets) are logged once when they appear and the offending part is
// skipped; they never stop the rest from being served.
package ingress
