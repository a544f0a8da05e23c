package webhooks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/isle-cluster/isle/control/registry"
)

// maxResponse bounds a webhook's answer: an object of the store's largest
// size and its patch, with room.
const maxResponse = 8 << 20

// maxTransports bounds the TLS clients kept (one per CA bundle and server
// name); past it they are dropped and made again.
const maxTransports = 64

// Client posts to webhooks, admission and conversion alike: to a URL, or
// to a Service in the cluster, reached at a ready endpoint of it (the
// pod's address and port, as kube-apiserver's endpoint routing) and
// checked against its caBundle as SERVICE.NAMESPACE.svc.
type Client struct {
	store *registry.Store
	mu    sync.Mutex
	// transports by CA bundle and server name, their connections kept.
	transports map[string]*http.Transport
	// dial connects to an address (a test sends pods' addresses to
	// loopback).
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// NewClient returns a Client resolving Services in store.
func NewClient(store *registry.Store) *Client {
	return &Client{store: store, transports: map[string]*http.Transport{},
		dial: (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext}
}

// Post sends body (JSON) to the webhook of cc and returns its answer's
// body; timeout bounds the whole exchange.
func (c *Client) Post(ctx context.Context, cc admissionregistrationv1.WebhookClientConfig, timeout time.Duration, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	target, serverName, err := c.resolve(ctx, cc)
	if err != nil {
		return nil, err
	}
	q := target.Query()
	q.Set("timeout", timeout.String())
	target.RawQuery = q.Encode()
	tr, err := c.transport(cc.CABundle, serverName)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return nil, &url.Error{Op: "Post", URL: target.String(), Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxResponse {
		return nil, fmt.Errorf("the answer is over %d bytes", maxResponse)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the server answered %s: %.200s", resp.Status, data)
	}
	return data, nil
}

// resolve turns cc into the address to post to and the name its
// certificate must carry.
func (c *Client) resolve(ctx context.Context, cc admissionregistrationv1.WebhookClientConfig) (*url.URL, string, error) {
	if cc.URL != nil {
		u, err := url.Parse(*cc.URL)
		if err != nil {
			return nil, "", err
		}
		if u.Scheme != "https" {
			return nil, "", fmt.Errorf("the URL %q is not https", *cc.URL)
		}
		return u, u.Hostname(), nil
	}
	ref := cc.Service
	if ref == nil {
		return nil, "", errors.New("the client configuration has neither url nor service")
	}
	port := int32(443)
	if ref.Port != nil {
		port = *ref.Port
	}
	addr, err := c.endpoint(ctx, ref.Namespace, ref.Name, port)
	if err != nil {
		return nil, "", err
	}
	path := "/"
	if ref.Path != nil && *ref.Path != "" {
		path = *ref.Path
	}
	return &url.URL{Scheme: "https", Host: addr, Path: path}, ref.Name + "." + ref.Namespace + ".svc", nil
}

// endpoint picks a ready endpoint of Service ns/name's port: its pod's
// address and target port.
func (c *Client) endpoint(ctx context.Context, ns, name string, port int32) (string, error) {
	svcRes, ok1 := c.store.Resources().Lookup(corev1.SchemeGroupVersion.WithResource("services"))
	esRes, ok2 := c.store.Resources().Lookup(discoveryv1.SchemeGroupVersion.WithResource("endpointslices"))
	if !ok1 || !ok2 {
		return "", errors.New("services or endpointslices are not served")
	}
	obj, err := c.store.Get(ctx, svcRes, ns, name, metav1.GetOptions{ResourceVersion: "0"})
	if err != nil {
		return "", fmt.Errorf("service %q: %w", ns+"/"+name, err)
	}
	svc := obj.(*corev1.Service)
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return net.JoinHostPort(svc.Spec.ExternalName, strconv.Itoa(int(port))), nil
	}
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Port == port {
			sp = &svc.Spec.Ports[i]
		}
	}
	if sp == nil {
		return "", fmt.Errorf("service %q has no port %d", ns+"/"+name, port)
	}
	list, err := c.store.List(ctx, esRes, ns, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name, ResourceVersion: "0"})
	if err != nil {
		return "", err
	}
	var addrs []string
	for _, es := range list.(*discoveryv1.EndpointSliceList).Items {
		var target int32
		for _, p := range es.Ports {
			if p.Port != nil && (p.Name == nil && sp.Name == "" || p.Name != nil && *p.Name == sp.Name) {
				target = *p.Port
			}
		}
		if target == 0 {
			continue
		}
		for _, e := range es.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready || len(e.Addresses) == 0 {
				continue
			}
			addrs = append(addrs, net.JoinHostPort(e.Addresses[0], strconv.Itoa(int(target))))
		}
	}
	if len(addrs) == 0 {
		return "", fmt.Errorf("no endpoints available for service %q", ns+"/"+name)
	}
	return addrs[rand.IntN(len(addrs))], nil
}

// transport is the kept TLS client for a CA bundle (none: the system's
// roots) and server name.
func (c *Client) transport(caBundle []byte, serverName string) (*http.Transport, error) {
	sum := sha256.Sum256(caBundle)
	key := string(sum[:]) + serverName
	c.mu.Lock()
	defer c.mu.Unlock()
	if tr, ok := c.transports[key]; ok {
		return tr, nil
	}
	var roots *x509.CertPool
	if len(caBundle) > 0 {
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(caBundle) {
			return nil, errors.New("the caBundle holds no PEM certificate")
		}
	}
	if len(c.transports) >= maxTransports {
		for k, tr := range c.transports {
			tr.CloseIdleConnections()
			delete(c.transports, k)
		}
	}
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12},
		DialContext:         c.dial,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
	}
	c.transports[key] = tr
	return tr, nil
}
