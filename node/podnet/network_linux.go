package podnet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/isle-cluster/isle/node/netns"
)

// ErrNoPodCIDR is returned by Attach before SetPodCIDR.
var ErrNoPodCIDR = errors.New("podnet: the node has no pod CIDR yet (the control plane assigns one when the node registers)")

// Network is a board's Pod network. Its methods are safe for concurrent
// use; they run one at a time.
type Network struct {
	cfg   Config
	log   *slog.Logger
	store store
	// board is the board's network namespace (-1: this process's own);
	// h is a netlink handle inside it.
	board vnetns.NsHandle
	h     *netlink.Handle

	mu      sync.Mutex
	podCIDR netip.Prefix // invalid until SetPodCIDR
	mtu     int
	records map[types.UID]*record
	last    netip.Addr // the address handed out last
	peers   []Peer
	// peersSet: SetPeers was called. Until then the routes a restarted
	// agent finds are left as they are: its peers are not known yet.
	peersSet bool
	warned   map[string]string // peer name → why it was last skipped
	// tableStale: the nftables table does not follow the records (a
	// write failed, or came before SetPodCIDR).
	tableStale bool
}

// New validates cfg, reads the records of Config.StateDir and releases
// those whose network namespace is gone. The Pod network has no pod CIDR
// yet: see SetPodCIDR.
func New(cfg Config) (*Network, error) {
	cfg, err := cfg.validate(true)
	if err != nil {
		return nil, err
	}
	n := &Network{
		cfg:    cfg,
		log:    cfg.Logger,
		store:  store{dir: cfg.StateDir, log: cfg.Logger},
		board:  vnetns.None(),
		warned: map[string]string{},
	}
	if n.records, n.last, err = n.store.load(cfg.ClusterCIDR); err != nil {
		return nil, err
	}
	if n.board, n.h, err = openBoard(cfg.Netns); err != nil {
		return nil, err
	}
	if err := n.releaseStale(); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// openBoard opens the board's namespace and a netlink handle in it.
func openBoard(path string) (vnetns.NsHandle, *netlink.Handle, error) {
	if path == "" {
		h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return vnetns.None(), nil, fmt.Errorf("podnet: netlink: %w", err)
		}
		return vnetns.None(), h, nil
	}
	switch ok, err := netns.Exists(path); {
	case err != nil:
		return vnetns.None(), nil, fmt.Errorf("podnet: board namespace: %w", err)
	case !ok:
		return vnetns.None(), nil, fmt.Errorf("podnet: board namespace %s does not exist", path)
	}
	ns, err := vnetns.GetFromPath(path)
	if err != nil {
		return vnetns.None(), nil, fmt.Errorf("podnet: board namespace %s: %w", path, err)
	}
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		ns.Close()
		return vnetns.None(), nil, fmt.Errorf("podnet: netlink in %s: %w", path, err)
	}
	return ns, h, nil
}

// Close releases the Network's netlink socket and namespace handle; what
// it made on the board stays.
func (n *Network) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.h != nil {
		n.h.Close()
		n.h = nil
	}
	if n.board.IsOpen() {
		n.board.Close()
		n.board = vnetns.None()
	}
	return nil
}

// releaseStale releases the records of pods whose namespace is gone.
func (n *Network) releaseStale() error {
	var errs []error
	for uid, r := range n.records {
		ok, err := netns.Exists(r.Netns)
		if err != nil {
			errs = append(errs, fmt.Errorf("podnet: record of pod %s: %w", r.key(), err))
			continue
		}
		if ok {
			continue
		}
		n.log.Info("podnet: releasing the address of a pod whose network namespace is gone", "pod", r.key(), "uid", uid, "ip", r.IP, "netns", r.Netns)
		if err := n.release(r); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// release removes the pod's veth and record.
func (n *Network) release(r *record) error {
	if err := n.unplumb(r.UID); err != nil {
		return err
	}
	if err := n.store.remove(r.UID); err != nil {
		return err
	}
	delete(n.records, r.UID)
	return nil
}

// SetPodCIDR gives the board its pod CIDR: the bridge with the gateway
// address (the first of p), forwarding, the nftables table and, once
// SetPeers gave the peers, their routes. Calling it again is cheap and
// repairs what was changed. A CIDR that does not hold the addresses of
// attached pods is an error, and nothing is changed.
func (n *Network) SetPodCIDR(p netip.Prefix) error {
	if err := checkPodCIDR(p, n.cfg.ClusterCIDR); err != nil {
		return fmt.Errorf("podnet: %w", err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.usable(); err != nil {
		return err
	}
	var outside []string
	for _, r := range n.records {
		if !p.Contains(r.IP) {
			outside = append(outside, fmt.Sprintf("%s has %v", r.key(), r.IP))
		}
	}
	if len(outside) > 0 {
		slices.Sort(outside)
		return fmt.Errorf("podnet: pod CIDR %v: %d attached pods hold addresses outside it (%s); delete them before the CIDR can change", p, len(outside), outside[0])
	}
	lan, _, err := n.lanLink()
	if err != nil {
		return err
	}
	mtu := n.cfg.MTU
	if mtu == 0 {
		mtu = lan.Attrs().MTU
	}
	if err := n.ensureBridge(p, mtu); err != nil {
		return err
	}
	if err := n.ensureForwarding(lan.Attrs().Name); err != nil {
		return err
	}
	if n.podCIDR != p {
		n.log.Info("podnet: pod CIDR set", "podCIDR", p, "gateway", gateway(p), "bridge", n.cfg.Bridge, "mtu", mtu)
	}
	n.podCIDR, n.mtu = p, mtu
	if err := n.writeTable(); err != nil {
		return err
	}
	if !n.peersSet {
		return nil
	}
	return n.reconcileRoutes()
}

// usable rejects calls after Close.
func (n *Network) usable() error {
	if n.h == nil {
		return errors.New("podnet: the Network is closed")
	}
	return nil
}

// Attach gives the pod's network namespace at netnsPath an eth0 with an
// address of the pod CIDR and a default route via the gateway, and maps
// the pod's hostPorts; it returns the pod's address. Attaching an
// attached pod again (also after a restart) returns the same address and
// repairs its links.
func (n *Network) Attach(ctx context.Context, pod *corev1.Pod, netnsPath string) ([]string, error) {
	if pod == nil {
		return nil, errors.New("podnet: attach: no pod")
	}
	key := pod.Namespace + "/" + pod.Name
	if pod.Spec.HostNetwork {
		return nil, fmt.Errorf("podnet: pod %s uses the board's network: it has nothing to attach", key)
	}
	if err := checkUID(pod.UID); err != nil {
		return nil, fmt.Errorf("podnet: pod %s: %w", key, err)
	}
	if err := checkNetnsPath(netnsPath); err != nil {
		return nil, fmt.Errorf("podnet: pod %s: %w", key, err)
	}
	ports, err := hostPortsOf(pod)
	if err != nil {
		return nil, fmt.Errorf("podnet: pod %s: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("podnet: pod %s: %w", key, err)
	}
	switch ok, err := netns.Exists(netnsPath); {
	case err != nil:
		return nil, fmt.Errorf("podnet: pod %s: %w", key, err)
	case !ok:
		return nil, fmt.Errorf("podnet: pod %s: network namespace %s does not exist", key, netnsPath)
	}

	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.usable(); err != nil {
		return nil, err
	}
	if !n.podCIDR.IsValid() {
		return nil, ErrNoPodCIDR
	}
	r, err := n.claim(pod, ports, netnsPath)
	if err != nil {
		return nil, err
	}
	if n.tableStale {
		if err := n.writeTable(); err != nil {
			return nil, err
		}
	}
	if err := n.plumb(r); err != nil {
		return nil, err
	}
	return []string{r.IP.String()}, nil
}

// claim returns the pod's record, made (with a new address) or updated
// as needed and written; a change of hostPorts marks the table stale.
func (n *Network) claim(pod *corev1.Pod, ports []hostPort, netnsPath string) (*record, error) {
	key := pod.Namespace + "/" + pod.Name
	if err := conflict(pod.UID, ports, n.records); err != nil {
		return nil, fmt.Errorf("podnet: pod %s: %w", key, err)
	}
	r, ok := n.records[pod.UID]
	if ok && r.Netns == netnsPath && slices.Equal(r.HostPorts, ports) && r.Namespace == pod.Namespace && r.Name == pod.Name {
		return r, nil
	}
	fresh := !ok
	if fresh {
		held := make(map[netip.Addr]bool, len(n.records))
		for _, r := range n.records {
			held[r.IP] = true
		}
		ip, found := nextFree(n.podCIDR, n.last, func(a netip.Addr) bool { return held[a] })
		if !found {
			return nil, fmt.Errorf("podnet: pod %s: no free address in the pod CIDR %v (%d pods hold one)", key, n.podCIDR, len(n.records))
		}
		r = &record{UID: pod.UID, IP: ip}
	} else {
		cp := *r // the old record stays until the new one is written
		r = &cp
	}
	if !slices.Equal(r.HostPorts, ports) {
		n.tableStale = true
	}
	r.Namespace, r.Name, r.Netns, r.HostPorts = pod.Namespace, pod.Name, netnsPath, ports
	if err := n.store.put(r); err != nil {
		return nil, err
	}
	if fresh {
		n.last = r.IP
		if err := n.store.putLast(r.IP); err != nil {
			// The record is written: the address is taken either way.
			n.log.Warn("podnet: the last address handed out was not saved", "err", err)
		}
		n.log.Info("podnet: address assigned", "pod", key, "uid", pod.UID, "ip", r.IP)
	}
	n.records[pod.UID] = r
	return r, nil
}

// Detach removes the pod's veth (and with it its eth0), hostPorts and
// address. It works from what is on the board and in the records, so
// also after a restart, and is not an error if nothing is left, nor if
// the namespace at netnsPath is gone.
func (n *Network) Detach(ctx context.Context, uid types.UID, netnsPath string) error {
	if err := checkUID(uid); err != nil {
		return fmt.Errorf("podnet: detach: %w", err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.usable(); err != nil {
		return err
	}
	r, ok := n.records[uid]
	if !ok {
		return n.unplumb(uid)
	}
	if err := n.release(r); err != nil {
		return err
	}
	n.log.Info("podnet: address released", "pod", r.key(), "uid", uid, "ip", r.IP)
	if len(r.HostPorts) > 0 {
		n.tableStale = true
	}
	if n.tableStale && n.podCIDR.IsValid() {
		return n.writeTable()
	}
	return nil
}

// SetPeers sets the other boards of the cluster and reconciles the routes
// to their pod CIDRs: routes of peers that are gone, or whose address
// changed, are removed or replaced. Invalid peers are skipped with a
// warning; peers without a pod CIDR and this board itself are skipped
// quietly.
func (n *Network) SetPeers(peers []Peer) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.usable(); err != nil {
		return err
	}
	n.peers, n.peersSet = slices.Clone(peers), true
	return n.reconcileRoutes()
}

// Collector returns a collector of the number of addresses held, for the
// caller to register.
func (n *Network) Collector() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "isle_podnet_addresses_allocated",
		Help: "Pod addresses held by pods of this board.",
	}, func() float64 {
		n.mu.Lock()
		defer n.mu.Unlock()
		return float64(len(n.records))
	})
}
