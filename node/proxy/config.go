package proxy

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
)

// Config configures a board's Service data plane.
type Config struct {
	// Netns is the path of the board's network namespace (as node/netns
	// makes them); "" is this process's own, as on a real board.
	Netns string
	// NodeName is the board's Node name (required): endpoints whose
	// nodeName is this one are local, for the traffic policies Local.
	NodeName string
	// ClusterCIDR is the Pod network of the whole cluster (IPv4); traffic
	// to a cluster IP from outside it (the board's own processes) is
	// masqueraded. Default 10.42.0.0/16.
	ClusterCIDR netip.Prefix
	// PodCIDR is this board's part of ClusterCIDR (required): the network
	// of its bridge, whose first address is the pods' gateway.
	PodCIDR netip.Prefix
	// DNS, if set, sends the cluster DNS Service IP to the board's DNS
	// server; zero: the cluster DNS Service is a Service like any other.
	DNS DNSRedirect
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// DNSRedirect sends UDP and TCP port 53 of the cluster DNS Service IP
// (10.43.0.10 by default) to port 53 of Target, the DNS server of the board
// (its bridge address, 10.42.N.1). The Service object of that IP
// (kube-system/kube-dns, which has no selector) is not otherwise programmed.
type DNSRedirect struct {
	ServiceIP, Target netip.Addr
}

// enabled reports whether the redirect is configured.
func (d DNSRedirect) enabled() bool { return d.ServiceIP.IsValid() || d.Target.IsValid() }

// DefaultClusterCIDR is the cluster CIDR when Config.ClusterCIDR is unset.
var DefaultClusterCIDR = netip.MustParsePrefix("10.42.0.0/16")

// validate fills defaults and rejects bad values, naming the field.
func (c Config) validate() (Config, error) {
	if !c.ClusterCIDR.IsValid() {
		c.ClusterCIDR = DefaultClusterCIDR
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	var errs []error
	if c.Netns != "" && (!filepath.IsAbs(c.Netns) || filepath.Clean(c.Netns) != c.Netns) {
		errs = append(errs, fmt.Errorf("Netns %q: want \"\" or a clean absolute path", c.Netns))
	}
	if c.NodeName == "" {
		errs = append(errs, errors.New("NodeName: required (the board's Node name)"))
	}
	if p := c.ClusterCIDR; !p.Addr().Is4() || p != p.Masked() {
		errs = append(errs, fmt.Errorf("ClusterCIDR %v: want an IPv4 network with no host bits set", p))
	}
	switch p := c.PodCIDR; {
	case !p.IsValid():
		errs = append(errs, errors.New("PodCIDR: required (the board's pod network)"))
	case !p.Addr().Is4() || p != p.Masked():
		errs = append(errs, fmt.Errorf("PodCIDR %v: want an IPv4 network with no host bits set", p))
	case !c.ClusterCIDR.Contains(p.Addr()) || p.Bits() < c.ClusterCIDR.Bits():
		errs = append(errs, fmt.Errorf("PodCIDR %v lies outside ClusterCIDR %v", p, c.ClusterCIDR))
	}
	if d := c.DNS; d.enabled() && (!d.ServiceIP.Is4() || !d.Target.Is4()) {
		errs = append(errs, fmt.Errorf("DNS {ServiceIP %v, Target %v}: want both IPv4 addresses, or neither", d.ServiceIP, d.Target))
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("proxy: config: %w", err)
	}
	return c, nil
}
