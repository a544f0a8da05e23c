package dns

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"

	"github.com/miekg/dns"
)

// Config configures a board's cluster DNS server.
type Config struct {
	// Addrs are the addresses to listen on, each as ip:port, for UDP and
	// TCP alike (required), e.g. "10.42.3.1:53". Port 0 picks a free port,
	// the same one for UDP and TCP.
	Addrs []string
	// Domain is the cluster domain; default "cluster.local".
	Domain string
	// Upstreams are the board's own resolvers as ip:port (see
	// UpstreamsFromResolvConf), tried in order for names outside the
	// cluster. None: such names get SERVFAIL.
	Upstreams []string
	// CacheSize is the number of answers of upstreams kept; default 1000.
	CacheSize int
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// DefaultDomain is the cluster domain when Config.Domain is unset.
const DefaultDomain = "cluster.local"

// DefaultCacheSize is the size of the forwarding cache when
// Config.CacheSize is unset.
const DefaultCacheSize = 1000

// validate fills the defaults and rejects bad values, naming the field. It
// returns the domain in lower case with no trailing dot.
func (c Config) validate() (Config, error) {
	if c.Domain == "" {
		c.Domain = DefaultDomain
	}
	if c.CacheSize == 0 {
		c.CacheSize = DefaultCacheSize
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	var errs []error
	if len(c.Addrs) == 0 {
		errs = append(errs, errors.New("Addrs: want at least one ip:port to listen on"))
	}
	listen := make(map[netip.AddrPort]bool, len(c.Addrs))
	for i, a := range c.Addrs {
		ap, err := netip.ParseAddrPort(a)
		if err != nil {
			errs = append(errs, fmt.Errorf("Addrs[%d] %q: want ip:port", i, a))
			continue
		}
		listen[ap] = true
	}
	c.Domain = strings.ToLower(strings.TrimSuffix(c.Domain, "."))
	if _, ok := dns.IsDomainName(c.Domain); !ok || c.Domain == "" || strings.ContainsAny(c.Domain, `\ `) {
		errs = append(errs, fmt.Errorf("Domain %q: want a domain name such as %s", c.Domain, DefaultDomain))
	}
	for i, u := range c.Upstreams {
		ap, err := netip.ParseAddrPort(u)
		switch {
		case err != nil || ap.Port() == 0:
			errs = append(errs, fmt.Errorf("Upstreams[%d] %q: want ip:port of a resolver", i, u))
		case listen[ap]:
			errs = append(errs, fmt.Errorf("Upstreams[%d] %q: is one of Addrs, which would forward to itself", i, u))
		}
	}
	if c.CacheSize < 0 {
		errs = append(errs, fmt.Errorf("CacheSize %d: want 0 (default %d) or more", c.CacheSize, DefaultCacheSize))
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("dns: config: %w", err)
	}
	return c, nil
}
