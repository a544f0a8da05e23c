package apiserver

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// pods/proxy and services/proxy, as the Kubernetes API server serves them:
//
//	/api/v1/namespaces/NS/pods/[SCHEME:]NAME[:PORT]/proxy[/PATH]
//	/api/v1/namespaces/NS/services/[SCHEME:]NAME[:PORT]/proxy[/PATH]
//
// A pod's request goes to its IP and the port given (a number or the name
// of one of its containers' ports; if none, the first port a container
// declares, or 80); a Service's to one of its
// ready endpoints (from its EndpointSlices) on the target of the Service
// port given (its name or number; the only port if none). SCHEME is http
// (the default) or https, whose certificate is not checked, as upstream.
// The method, the path after /proxy, the query and the body pass through; a
// GET or HEAD of .../proxy itself is redirected to .../proxy/ (301).
// Only addresses a pod or endpoint may have are proxied to: never
// loopback, link-local or unspecified ones (a pod IP is written by a node,
// an EndpointSlice by anyone who may write one; neither may point the API
// server at itself).

// proxyTimeout bounds a proxied exchange's wait for its answer's headers.
const proxyTimeout = 60 * time.Second

// isProxy reports whether req is of a pods/proxy or services/proxy URL.
func isProxy(req request) bool {
	return req.Resource.Group == "" && oneOf(req.Resource.Resource, "pods", "services") && req.Subresource == "proxy"
}

// proxyTarget splits a proxy URL's name segment: [SCHEME:]NAME[:PORT].
func proxyTarget(segment string) (scheme, name, port string, err error) {
	parts := strings.Split(segment, ":")
	switch len(parts) {
	case 1:
		name = parts[0]
	case 2:
		name, port = parts[0], parts[1]
	case 3:
		scheme, name, port = parts[0], parts[1], parts[2]
	default:
		return "", "", "", apierrors.NewBadRequest(fmt.Sprintf("invalid proxy request %q: want [SCHEME:]NAME[:PORT]", segment))
	}
	if scheme != "" && scheme != "http" && scheme != "https" {
		return "", "", "", apierrors.NewBadRequest(fmt.Sprintf("invalid proxy scheme %q: want http or https", scheme))
	}
	if name == "" {
		return "", "", "", apierrors.NewBadRequest(fmt.Sprintf("invalid proxy request %q: no name", segment))
	}
	return scheme, name, port, nil
}

// proxiedPath is the escaped path after a proxy URL's "/proxy" segment
// ("" if it ends there): /api/v1/namespaces/NS/RESOURCE/NAME/proxy is
// seven segments, whatever the namespace and the object are called.
func proxiedPath(r *http.Request) string {
	p := r.URL.EscapedPath()
	for i, slashes := 0, 0; i < len(p); i++ {
		if p[i] == '/' {
			if slashes++; slashes == 8 {
				return p[i:]
			}
		}
	}
	return ""
}

// serveProxy serves an authorized pods/proxy or services/proxy request.
func (s *Server) serveProxy(w http.ResponseWriter, r *http.Request, req request) {
	scheme, name, port, err := proxyTarget(req.Name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if scheme == "" {
		scheme = "http"
	}
	var hostPort string
	if req.Resource.Resource == "pods" {
		hostPort, err = s.podProxyAddr(r.Context(), req, name, port)
	} else {
		hostPort, err = s.serviceProxyAddr(r.Context(), req, name, port)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	path := proxiedPath(r)
	if path == "" {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			// As upstream: a read of .../proxy is sent to .../proxy/, so
			// that the pod's relative links resolve beneath it.
			u := *r.URL
			u.Path, u.RawPath = r.URL.Path+"/", ""
			http.Redirect(w, r, u.RequestURI(), http.StatusMovedPermanently)
			return
		}
		path = "/"
	}
	target := &url.URL{Scheme: scheme, Host: hostPort, RawQuery: r.URL.RawQuery}
	if target.Path, err = url.PathUnescape(path); err != nil {
		s.writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("invalid proxy path %q: %v", path, err)))
		return
	}
	target.RawPath = path
	dialer := s.cfg.ProxyDial
	if dialer == nil {
		dialer = (&net.Dialer{Timeout: nodeDialTimeout, KeepAlive: 30 * time.Second}).DialContext
	}
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL, pr.Out.Host = target, ""
			// The client's credentials are the API server's business.
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Del("Cookie")
			pr.Out.Header.Del("Impersonate-User")
			pr.Out.Header.Del("Impersonate-Group")
			pr.SetXForwarded()
		},
		Transport: &http.Transport{
			DialContext: dialer,
			// As upstream: a pod's certificate names no one the API
			// server could check it against.
			TLSClientConfig:       &tls.Config{InsecureSkipVerify: true}, //nolint:gosec
			TLSHandshakeTimeout:   nodeDialTimeout,
			ResponseHeaderTimeout: proxyTimeout,
			DisableKeepAlives:     true,
		},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client went
			}
			s.writeError(w, r, apierrors.NewServiceUnavailable(fmt.Sprintf("error trying to reach %s: %v",
				strings.TrimSuffix(req.Resource.Resource, "s"), unwrapURLError(err))))
		},
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	p.ServeHTTP(w, r)
}

// podProxyAddr is the host:port a pod's proxy request goes to.
func (s *Server) podProxyAddr(ctx context.Context, req request, name, port string) (string, error) {
	obj, err := s.store.Get(ctx, req.Resource, req.Namespace, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	pod := obj.(*corev1.Pod)
	ip, err := proxyableIP(pod.Status.PodIP)
	if err != nil {
		return "", apierrors.NewServiceUnavailable(fmt.Sprintf("pod %s: %v", pod.Name, err))
	}
	n := 80
	if port == "" {
		// As upstream: the first port a container declares.
		for _, c := range pod.Spec.Containers {
			if len(c.Ports) > 0 {
				port = strconv.Itoa(int(c.Ports[0].ContainerPort))
				break
			}
		}
	}
	if port != "" {
		if n, err = strconv.Atoi(port); err != nil {
			n = 0
			for _, c := range pod.Spec.Containers {
				for _, cp := range c.Ports {
					if cp.Name == port {
						n = int(cp.ContainerPort)
					}
				}
			}
			if n == 0 {
				return "", apierrors.NewBadRequest(fmt.Sprintf("pod %s has no container port named %q", pod.Name, port))
			}
		}
	}
	if n < 1 || n > 65535 {
		return "", apierrors.NewBadRequest(fmt.Sprintf("invalid port %q: want 1 to 65535", port))
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(n)), nil
}

// serviceProxyAddr is the host:port of a ready endpoint of the Service's
// port, picked at random.
func (s *Server) serviceProxyAddr(ctx context.Context, req request, name, port string) (string, error) {
	obj, err := s.store.Get(ctx, req.Resource, req.Namespace, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	svc := obj.(*corev1.Service)
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if port == "" && len(svc.Spec.Ports) == 1 || port != "" && (p.Name == port || strconv.Itoa(int(p.Port)) == port) {
			sp = p
		}
	}
	if sp == nil {
		return "", apierrors.NewServiceUnavailable(fmt.Sprintf("no service port %q found for service %q", port, svc.Name))
	}
	slicesRes := s.mustResource(discoveryv1.SchemeGroupVersion.WithResource("endpointslices"))
	list, err := s.store.List(ctx, slicesRes, svc.Namespace, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name})
	if err != nil {
		return "", err
	}
	var addrs []string
	for _, es := range list.(*discoveryv1.EndpointSliceList).Items {
		if es.AddressType != discoveryv1.AddressTypeIPv4 && es.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		target := int32(0)
		for _, p := range es.Ports {
			if p.Port != nil && ptrString(p.Name) == sp.Name {
				target = *p.Port
			}
		}
		if target == 0 {
			continue
		}
		for _, ep := range es.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, a := range ep.Addresses {
				if ip, err := proxyableIP(a); err == nil {
					addrs = append(addrs, net.JoinHostPort(ip.String(), strconv.Itoa(int(target))))
				}
			}
		}
	}
	if len(addrs) == 0 {
		return "", apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", svc.Name))
	}
	return addrs[rand.IntN(len(addrs))], nil
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// proxyableIP parses a pod's or endpoint's address and refuses those no
// pod may have: the API server would talk to itself or its board.
func proxyableIP(s string) (netip.Addr, error) {
	ip, err := netip.ParseAddr(s)
	switch {
	case s == "":
		return ip, fmt.Errorf("no IP address yet")
	case err != nil || ip.Zone() != "":
		return ip, fmt.Errorf("address %q not allowed: not an IP address", s)
	case ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast() ||
		ip.IsUnspecified() || ip.IsMulticast():
		return ip, fmt.Errorf("address %s not allowed", ip)
	}
	return ip.Unmap(), nil
}
