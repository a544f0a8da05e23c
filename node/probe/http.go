package probe

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// maxHeaderBytes bounds the response headers an HTTP probe reads.
const maxHeaderBytes = 64 << 10

// doHTTP runs an httpGet probe: 200..399 is Success. Redirects to the same
// host are followed (up to 10), others are not and count as Success with a
// warning; a probe's connection is closed after it.
func doHTTP(ctx context.Context, a *corev1.HTTPGetAction, t Target, timeout time.Duration) (Result, string) {
	var scheme string
	switch a.Scheme {
	case "", corev1.URISchemeHTTP:
		scheme = "http"
	case corev1.URISchemeHTTPS:
		scheme = "https"
	default:
		return Unknown, fmt.Sprintf("httpGet.scheme %q: want HTTP or HTTPS", a.Scheme)
	}
	port, err := t.port(a.Port)
	if err != nil {
		return Unknown, "httpGet." + err.Error()
	}
	// The path may carry a query, as the kubelet allows.
	u, err := url.Parse(a.Path)
	if err != nil {
		return Unknown, fmt.Sprintf("httpGet.path %q: %v", a.Path, err)
	}
	u.Scheme, u.Host = scheme, net.JoinHostPort(t.host(a.Host), strconv.Itoa(port))

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Unknown, fmt.Sprintf("httpGet: %v", err)
	}
	for _, h := range a.HTTPHeaders {
		req.Header.Add(h.Name, h.Value)
	}
	if host := req.Header.Get("Host"); host != "" {
		req.Host = host
		req.Header.Del("Host")
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header.Set("User-Agent", userAgent)
	}
	if _, ok := req.Header["Accept"]; !ok {
		req.Header.Set("Accept", "*/*")
	}
	client := &http.Client{
		Transport: &http.Transport{
			DialContext: t.dial(),
			// The kubelet does not verify a container's certificate.
			TLSClientConfig:        &tls.Config{InsecureSkipVerify: true},
			DisableKeepAlives:      true,
			DisableCompression:     true,
			MaxResponseHeaderBytes: maxHeaderBytes,
		},
		CheckRedirect: sameHostRedirects,
	}
	resp, err := client.Do(req)
	if err != nil {
		return Failure, err.Error()
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxRead))
	if err != nil {
		return Failure, fmt.Sprintf("read the response of %s: %v", u.Redacted(), err)
	}
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return Success, ""
	case code >= 300 && code < 400:
		return Success, fmt.Sprintf("probe terminated redirects (HTTP %d), response body: %s", code, body)
	default:
		return Failure, fmt.Sprintf("HTTP probe failed with statuscode: %d", code)
	}
}

// sameHostRedirects follows redirects to the probe's host only, as the
// kubelet does: another host gets the redirect response itself.
func sameHostRedirects(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}
