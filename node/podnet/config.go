package podnet

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"strings"
)

// Config configures a board's Pod network.
type Config struct {
	// NodeIP is the board's LAN address (IPv4, required by New). The LAN
	// link is the link that holds it: peers' routes go through it, and
	// its MTU is the pods' unless MTU says otherwise.
	NodeIP netip.Addr
	// ClusterCIDR is the Pod network of the whole cluster: every board's
	// pod CIDR lies inside it, and traffic from pods to addresses outside
	// it is masqueraded. Default 10.42.0.0/16.
	ClusterCIDR netip.Prefix
	// Bridge is the name of the bridge the pods' veths join; default
	// isle0.
	Bridge string
	// StateDir is a persistent directory of this package's alone for the
	// address records (required; the agent passes DataDir/podnet).
	StateDir string
	// Netns is the path of the board's network namespace (as node/netns
	// makes them); "" is this process's own, as on a real board.
	Netns string
	// MTU of the bridge and of the pods' links; 0: the LAN link's.
	MTU int
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// DefaultClusterCIDR is the cluster CIDR when Config.ClusterCIDR is unset.
var DefaultClusterCIDR = netip.MustParsePrefix("10.42.0.0/16")

// withDefaults fills the defaults of unset fields.
func (c Config) withDefaults() Config {
	if !c.ClusterCIDR.IsValid() {
		c.ClusterCIDR = DefaultClusterCIDR
	}
	if c.Bridge == "" {
		c.Bridge = "isle0"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// validate fills defaults and rejects bad values; Uninstall needs no
// NodeIP, so needNodeIP says whether to require it.
func (c Config) validate(needNodeIP bool) (Config, error) {
	c = c.withDefaults()
	var errs []error
	if needNodeIP && (!c.NodeIP.IsValid() || !c.NodeIP.Is4()) {
		errs = append(errs, fmt.Errorf("NodeIP %v: want the board's IPv4 address", c.NodeIP))
	}
	if p := c.ClusterCIDR; !p.Addr().Is4() || p != p.Masked() || p.Bits() > 24 {
		errs = append(errs, fmt.Errorf("ClusterCIDR %v: want an IPv4 network of /24 or wider with no host bits set", p))
	}
	if c.NodeIP.IsValid() && c.ClusterCIDR.Contains(c.NodeIP) {
		errs = append(errs, fmt.Errorf("NodeIP %v lies inside ClusterCIDR %v", c.NodeIP, c.ClusterCIDR))
	}
	if err := checkLinkName(c.Bridge); err != nil {
		errs = append(errs, fmt.Errorf("Bridge: %w", err))
	}
	if c.StateDir == "" || !filepath.IsAbs(c.StateDir) || filepath.Clean(c.StateDir) != c.StateDir || c.StateDir == "/" {
		errs = append(errs, fmt.Errorf("StateDir %q: want a clean absolute path of a directory of the Pod network's own", c.StateDir))
	}
	if c.Netns != "" && (!filepath.IsAbs(c.Netns) || filepath.Clean(c.Netns) != c.Netns) {
		errs = append(errs, fmt.Errorf("Netns %q: want \"\" or a clean absolute path", c.Netns))
	}
	if c.MTU != 0 && (c.MTU < 576 || c.MTU > 65535) {
		errs = append(errs, fmt.Errorf("MTU %d: want 0 (the LAN link's) or 576..65535", c.MTU))
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("podnet: config: %w", err)
	}
	return c, nil
}

// checkLinkName rejects what the kernel does not take as a link name.
func checkLinkName(name string) error {
	if name == "" || len(name) > 15 || name == "." || name == ".." || strings.ContainsAny(name, "/: \t\n") {
		return fmt.Errorf("link name %q: want 1 to 15 characters, none of '/', ':' or spaces", name)
	}
	return nil
}
