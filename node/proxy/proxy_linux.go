package proxy

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/nftables"
	vnetns "github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/isle-cluster/isle/node/netns"
)

// ErrClosed is returned by Sync after Close.
var ErrClosed = errors.New("proxy: closed")

// Proxy is the Service data plane of a board: the nftables table
// ip isle-proxy. Its methods may be called from several goroutines.
type Proxy struct {
	cfg Config
	log *slog.Logger
	// bridgeNF: bridged IPv4 passes the ip hooks (br_netfilter), so
	// replies between pods of the bridge meet conntrack.
	bridgeNF bool
	metrics  *metrics

	mu     sync.Mutex
	ns     vnetns.NsHandle // the board's namespace, or none for our own
	closed bool
	// rec is what the table holds; nil: unknown, the next Sync rewrites
	// the table whole.
	rec *record
	// ports are the service ports of the table, by counter name.
	ports map[string]portStat
	// udp are the UDP routes to endpoints the table holds: see
	// forgetUDPFlows.
	udp map[udpRoute]bool
	// warned are the warnings of the last Sync, so that an odd object is
	// reported once, not at every Sync.
	warned map[warning]bool
}

// New checks cfg, makes sure bridged traffic passes nftables (see the
// package doc), and replaces the table (one a previous run left, or none)
// with one that holds no Service yet, only the cluster DNS redirect.
func New(cfg Config) (*Proxy, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	p := &Proxy{cfg: cfg, log: cfg.Logger, metrics: newMetrics(), ns: vnetns.None(), ports: map[string]portStat{}}
	if cfg.Netns != "" {
		if p.ns, err = vnetns.GetFromPath(cfg.Netns); err != nil {
			return nil, fmt.Errorf("proxy: namespace %s: %w", cfg.Netns, err)
		}
	}
	p.bridgeNF = p.checkBridgeNetfilter()
	c, err := p.conn()
	if err == nil {
		_, _, err = write(c, TableName, nil, buildTable(cfg, p.bridgeNF, plan{}))
	}
	if err != nil {
		p.ns.Close()
		return nil, fmt.Errorf("proxy: nftables table %s: %w", TableName, err)
	}
	return p, nil
}

// checkBridgeNetfilter runs bridgeNetfilter in the board's namespace and
// reports whether bridged traffic passes nftables, warning if not.
func (p *Proxy) checkBridgeNetfilter() bool {
	var on bool
	var why error
	check := func() error {
		on, why = bridgeNetfilter(bridgeNFSysctl, modprobeBrNetfilter)
		return nil
	}
	if p.cfg.Netns != "" {
		if err := netns.Do(p.cfg.Netns, check); err != nil {
			on, why = false, err
		}
	} else {
		check()
	}
	if !on {
		p.log.Warn("proxy: bridged traffic does not pass nftables (no br_netfilter): traffic from pods to endpoints on this board is masqueraded",
			"err", why)
	}
	return on
}

// conn is a connection to nftables in the board's namespace.
func (p *Proxy) conn() (*nftables.Conn, error) { return nsConn(p.ns) }

// Sync makes the table program svcs and their endpoints from slices, in
// one nftables transaction, sending only what changed since the last
// Sync (all of it after New or after a failed Sync). Objects that cannot
// be programmed are left out with a warning (logged once); they never make
// Sync fail. Then the UDP flows to endpoints that left are forgotten (see
// the package documentation); a failure there is logged, not returned.
func (p *Proxy) Sync(svcs []*corev1.Service, slices []*discoveryv1.EndpointSlice) error {
	start := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	pl := makePlan(svcs, slices, p.cfg.NodeName, p.cfg.DNS.ServiceIP)
	p.logWarnings(pl.warnings)
	m := buildTable(p.cfg, p.bridgeNF, pl)
	full := p.rec == nil
	c, err := p.conn()
	var rec *record
	var wrote bool
	if err == nil {
		rec, wrote, err = write(c, TableName, p.rec, m)
	}
	p.metrics.observe(time.Since(start), err)
	if err != nil {
		p.rec = nil
		return fmt.Errorf("proxy: sync: nftables table %s: %w", TableName, err)
	}
	p.rec, p.ports = rec, m.ports
	if wrote {
		p.log.Debug("proxy: synced", "ports", len(pl.ports), "chains", len(m.chains), "full", full, "took", time.Since(start))
	}
	routes := pl.udpRoutes()
	if gone := goneUDPRoutes(p.udp, routes); len(gone) > 0 {
		// The rules no longer lead there; now the flows that do go.
		n, err := p.forgetUDPFlows(gone)
		if err != nil {
			p.log.Warn("proxy: UDP flows to endpoints gone keep going there until they time out", "err", err)
		} else if n > 0 {
			p.log.Debug("proxy: forgot the UDP flows to endpoints gone", "flows", n)
		}
	}
	p.udp = routes
	return nil
}

// logWarnings logs the warnings not logged at the last Sync.
func (p *Proxy) logWarnings(ws []warning) {
	p.warned = logNew(p.log, "proxy: left out of the Service rules", p.warned, ws)
}

// logNew logs the warnings of ws that are not in warned (those of the
// last Sync) with msg, and returns those of ws.
func logNew(log *slog.Logger, msg string, warned map[warning]bool, ws []warning) map[warning]bool {
	now := make(map[warning]bool, len(ws))
	for _, w := range ws {
		if !warned[w] && !now[w] {
			log.Warn(msg, "object", w.object, "reason", w.reason)
		}
		now[w] = true
	}
	return now
}

// nsConn is a connection to nftables in the namespace ns (or this
// process's own if ns is not open).
func nsConn(ns vnetns.NsHandle) (*nftables.Conn, error) {
	opts := []nftables.ConnOption{nftables.WithSockOptions(bigBuffers)}
	if ns.IsOpen() {
		opts = append(opts, nftables.WithNetNSFd(int(ns)))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("nftables: %w", err)
	}
	return c, nil
}

// Close removes the table; Service traffic is not handled any more.
func (p *Proxy) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	if err := closeTable(p.ns, TableName); err != nil {
		return fmt.Errorf("proxy: close: %w", err)
	}
	return nil
}

// closeTable removes a table from the namespace ns, then closes ns.
func closeTable(ns vnetns.NsHandle, table string) error {
	defer ns.Close()
	c, err := nsConn(ns)
	if err == nil {
		err = deleteTable(c, table)
	}
	if err != nil {
		return fmt.Errorf("nftables table %s: %w", table, err)
	}
	return nil
}

// Uninstall removes the Service table and the NetworkPolicy table from
// the board's namespace at netnsPath ("" this process's own), if they are
// there; a namespace that is gone has nothing to remove. No Proxy or
// Policies of that namespace may run.
func Uninstall(netnsPath string) error {
	opts := []nftables.ConnOption{nftables.WithSockOptions(bigBuffers)}
	if netnsPath != "" {
		switch ok, err := netns.Exists(netnsPath); {
		case err != nil:
			return fmt.Errorf("proxy: uninstall: %w", err)
		case !ok:
			return nil
		}
		ns, err := vnetns.GetFromPath(netnsPath)
		if err != nil {
			return fmt.Errorf("proxy: uninstall: namespace %s: %w", netnsPath, err)
		}
		defer ns.Close()
		opts = append(opts, nftables.WithNetNSFd(int(ns)))
	}
	c, err := nftables.New(opts...)
	if err == nil {
		err = deleteTable(c, TableName, PolicyTableName)
	}
	if err != nil {
		return fmt.Errorf("proxy: uninstall: nftables tables %s and %s: %w", TableName, PolicyTableName, err)
	}
	return nil
}

// deleteTable removes the tables, there or not.
func deleteTable(c *nftables.Conn, names ...string) error {
	for _, name := range names {
		t := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: name}
		c.AddTable(t) // the delete then never fails for a missing table
		c.DelTable(t)
	}
	return c.Flush()
}
