package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"

	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/node/gossip"
)

// ErrNoAPIServer is the error of a connection to the API servers when none
// is known or none answers. servers.dial logs it once when the servers are
// lost, and again when one answers: client-go's informers, which retry it
// every second or so each, and the agent's loops log it at debug level
// (see Unreachable).
var ErrNoAPIServer = errors.New("agent: no API server answers")

// Unreachable reports whether err is the API servers being unreachable: no
// server known or none answering (ErrNoAPIServer), or a connection to one
// lost or refused. The agent logs those as changes of its servers' state,
// once (servers.dial); the klog lines of client-go's informers retrying
// them are debug lines (cmd/isle routes klog).
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	var op *net.OpError
	return errors.Is(err, ErrNoAPIServer) || errors.As(err, &op) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) ||
		// net/http's HTTP/2 client, whose error for a connection that
		// broke under its requests is not exported.
		strings.Contains(err.Error(), "http2: client connection lost")
}

// servers picks the API server a board talks to: the alive servers in
// gossip, the last one that worked first. A board needs no load balancer:
// when its server dies, the next connection goes to another.
//
// It logs the changes of the servers' state, once each: all lost (no
// server known or none answering), one answering again, another one taken.
type servers struct {
	g *gossip.Gossip
	// fallback is used while gossip knows no server (a board that has just
	// started): the addresses it joined through.
	fallback []string
	// now is the board's clock, at which the servers' certificates are
	// checked.
	now func() time.Time
	log *slog.Logger
	// trust is the CAs the servers' certificates are checked by.
	trust *caTrust

	mu   sync.Mutex
	last string
	// down: the last dial found no server; logged, until one answers.
	down bool

	// rt is the API clients' transport (transport), made once.
	rtOnce sync.Once
	rt     *http.Transport
}

// transport is the one transport of the API clients of every group
// (newTransport), so that they share its connection, as client-go's
// transport cache shares one between clients of the same configuration: a
// TLS connection, its HTTP/2 buffers and its goroutines per API group
// otherwise.
func (s *servers) transport() *http.Transport {
	s.rtOnce.Do(func() { s.rt = newTransport(s) })
	return s.rt
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

// dial connects to the first server that answers; its error wraps
// ErrNoAPIServer.
func (s *servers) dial(ctx context.Context, network, _ string) (net.Conn, error) {
	addrs := s.candidates()
	if len(addrs) == 0 {
		return nil, s.failed(ctx, fmt.Errorf("%w: none known yet (gossip knows no live server)", ErrNoAPIServer))
	}
	var errs []error
	d := net.Dialer{Timeout: 2 * time.Second, KeepAlive: 15 * time.Second}
	for _, a := range addrs {
		c, err := d.DialContext(ctx, network, a)
		if err == nil {
			s.answered(a)
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	// In the order of the addresses, so that the text of one outage's
	// errors stays the same from one attempt to the next.
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return nil, s.failed(ctx, fmt.Errorf("%w: %w", ErrNoAPIServer, errors.Join(errs...)))
}

// failed records a dial that found no server, logging it if the servers
// were not already lost. A dial its caller gave up on says nothing.
func (s *servers) failed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return err
	}
	s.mu.Lock()
	wasDown, ever := s.down, s.last != ""
	s.down = true
	s.mu.Unlock()
	switch {
	case wasDown:
	case ever:
		s.logger().Warn("agent: lost the API servers; the board keeps its pods and retries quietly", "err", err)
	default:
		s.logger().Warn("agent: no API server answers yet; retrying quietly", "err", err)
	}
	return err
}

// answered records the server a dial reached, logging it if the servers
// were lost or it is another one than before.
func (s *servers) answered(addr string) {
	s.mu.Lock()
	prev, wasDown := s.last, s.down
	s.last, s.down = addr, false
	s.mu.Unlock()
	switch {
	case wasDown:
		s.logger().Info("agent: an API server answers again", "server", addr)
	case prev != "" && prev != addr:
		s.logger().Info("agent: talking to another API server", "server", addr, "was", prev)
	}
}

func (s *servers) logger() *slog.Logger {
	if s.log == nil {
		return slog.Default()
	}
	return s.log
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
// addToScheme registers; the clients of s share its connections.
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
	cfg := &rest.Config{
		Host:        "https://" + wire.APIServerName,
		APIPath:     apiPath,
		BearerToken: cred.NodeToken,
		UserAgent:   "isle-agent/" + cred.Name,
		QPS:         20,
		Burst:       40,
		ContentConfig: rest.ContentConfig{
			GroupVersion:         &gv,
			NegotiatedSerializer: serializer.NewCodecFactory(scheme).WithoutConversion(),
		},
	}
	// What rest.RESTClientFor does with a transport of its own, without
	// reaching what a client's configuration may ask and the agent's never
	// does: client-go's TLS transport cache, which brings
	// golang.org/x/net/http2's client and its IDNA tables (a second HTTP/2
	// client beside net/http's), and the exec and auth-provider credential
	// plugins: about 520 KB of the arm64 binary.
	rt, err := transport.HTTPWrappersForConfig(&transport.Config{
		UserAgent:   cfg.UserAgent,
		BearerToken: cfg.BearerToken,
	}, s.transport())
	if err != nil {
		return nil, fmt.Errorf("agent: API client %s: %w", gv, err)
	}
	c, err := rest.RESTClientForConfigAndClient(cfg, &http.Client{Transport: rt})
	if err != nil {
		return nil, fmt.Errorf("agent: API client %s: %w", gv, err)
	}
	return c, nil
}

// newTransport is the transport of the API clients, with the board's clock
// (client-go takes no clock for its certificate checks): client-go's
// defaults (k8s.io/apimachinery/pkg/util/net.SetTransportDefaults) on
// net/http's own HTTP/2 client. Its health check pings a connection
// silent for 30 seconds and closes it when the ping has no answer within
// 15, as client-go's; DISABLE_HTTP2, HTTP2_READ_IDLE_TIMEOUT_SECONDS and
// HTTP2_PING_TIMEOUT_SECONDS change them as they do client-go's.
func newTransport(s *servers) *http.Transport {
	t := &http.Transport{
		Proxy:               utilnet.NewProxierWithNoProxyCIDR(http.ProxyFromEnvironment),
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     s.tlsConfig(),
		MaxIdleConnsPerHost: 25,
		IdleConnTimeout:     90 * time.Second,
		DialContext:         s.dial,
	}
	if os.Getenv("DISABLE_HTTP2") != "" {
		return t
	}
	t.ForceAttemptHTTP2 = true
	t.HTTP2 = &http.HTTP2Config{
		SendPingTimeout: envSeconds("HTTP2_READ_IDLE_TIMEOUT_SECONDS", 30),
		PingTimeout:     envSeconds("HTTP2_PING_TIMEOUT_SECONDS", 15),
	}
	return t
}

// envSeconds is the environment variable name's whole number of seconds,
// or def seconds when it is unset or not a number.
func envSeconds(name string, def int) time.Duration {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return time.Duration(n) * time.Second
	}
	return time.Duration(def) * time.Second
}

// tlsConfig verifies the servers by the CAs the board trusts at each
// handshake, at the board's time.
func (s *servers) tlsConfig() *tls.Config {
	return s.trust.clientConfig(wire.APIServerName, s.now)
}
