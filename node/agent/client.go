package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"

	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/node/gossip"
)

// servers picks the API server a board talks to: the alive servers in
// gossip, the last one that worked first. A board needs no load balancer:
// when its server dies, the next connection goes to another.
type servers struct {
	g *gossip.Gossip
	// fallback is used while gossip knows no server (a board that has just
	// started): the addresses it joined through.
	fallback []string
	// now is the board's clock, at which the servers' certificates are
	// checked.
	now func() time.Time

	mu   sync.Mutex
	last string
}

func (s *servers) candidates() []string {
	var addrs []string
	for _, m := range s.g.Servers() {
		if m.API != "" && m.State == gossip.Alive {
			addrs = append(addrs, m.API)
		}
	}
	if len(addrs) == 0 {
		addrs = slices.Clone(s.fallback)
	}
	rand.Shuffle(len(addrs), func(i, j int) { addrs[i], addrs[j] = addrs[j], addrs[i] })
	s.mu.Lock()
	last := s.last
	s.mu.Unlock()
	if i := slices.Index(addrs, last); i > 0 {
		addrs[0], addrs[i] = addrs[i], addrs[0]
	}
	return addrs
}

// dial connects to the first server that answers.
func (s *servers) dial(ctx context.Context, network, _ string) (net.Conn, error) {
	addrs := s.candidates()
	if len(addrs) == 0 {
		return nil, errors.New("agent: no API server known yet")
	}
	var errs []error
	d := net.Dialer{Timeout: 2 * time.Second, KeepAlive: 15 * time.Second}
	for _, a := range addrs {
		c, err := d.DialContext(ctx, network, a)
		if err == nil {
			s.mu.Lock()
			s.last = a
			s.mu.Unlock()
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("agent: no API server answered: %w", errors.Join(errs...))
}

// current is the server last dialled.
func (s *servers) current() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// newClient is a REST client of the core API group, authenticated by the
// node credential, verifying servers by the cluster CA, over connections
// from s. It knows only the core types: client-go's typed clientset would
// bring every API group's types into the binary (14 MB on arm64).
func newClient(cred wire.Credential, s *servers) (*rest.RESTClient, error) {
	return newGroupClient(cred, s, corev1.SchemeGroupVersion, corev1.AddToScheme)
}

// newGroupClient is newClient for the API group version gv, whose types
// addToScheme registers.
func newGroupClient(cred wire.Credential, s *servers, gv schema.GroupVersion, addToScheme func(*runtime.Scheme) error) (*rest.RESTClient, error) {
	scheme := runtime.NewScheme()
	if err := addToScheme(scheme); err != nil {
		return nil, fmt.Errorf("agent: API client %s: %w", gv, err)
	}
	metav1.AddToGroupVersion(scheme, gv)
	apiPath := "/apis"
	if gv.Group == "" {
		apiPath = "/api"
	}
	tlsCfg, err := s.tlsConfig(cred)
	if err != nil {
		return nil, fmt.Errorf("agent: API client %s: %w", gv, err)
	}
	cfg := &rest.Config{
		Host:        "https://" + wire.APIServerName,
		APIPath:     apiPath,
		BearerToken: cred.NodeToken,
		// client-go's own transport, with the board's clock: client-go
		// takes no clock for its certificate checks.
		Transport: utilnet.SetTransportDefaults(&http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			TLSHandshakeTimeout: 10 * time.Second,
			TLSClientConfig:     tlsCfg,
			MaxIdleConnsPerHost: 25,
			DialContext:         s.dial,
		}),
		UserAgent: "isle-agent/" + cred.Name,
		QPS:       20,
		Burst:     40,
		ContentConfig: rest.ContentConfig{
			GroupVersion:         &gv,
			NegotiatedSerializer: serializer.NewCodecFactory(scheme).WithoutConversion(),
		},
	}
	c, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("agent: API client %s: %w", gv, err)
	}
	return c, nil
}

// tlsConfig verifies the servers by the cluster CA of cred at the board's
// time.
func (s *servers) tlsConfig(cred wire.Credential) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cred.CACert) {
		return nil, errors.New("the credential's CA certificate does not parse")
	}
	return &tls.Config{RootCAs: pool, ServerName: wire.APIServerName, MinVersion: tls.VersionTLS12, Time: s.now}, nil
}
