package agent

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/isle-cluster/isle/node/gossip"
	"github.com/isle-cluster/isle/node/podnet"
)

// podNetwork is the board's Pod network as the pod manager sees it: an
// Attach that comes before the control plane gave the node its pod CIDR
// (a board that has just registered) waits for it a while instead of
// failing the pod's sandbox.
type podNetwork struct {
	*podnet.Network
	mu    sync.Mutex
	cidr  netip.Prefix
	ready chan struct{} // closed once the pod CIDR is set
}

// newPodNetwork opens the board's Pod network (its state under
// DataDir/podnet).
func (a *Agent) newPodNetwork() (*podNetwork, error) {
	ip, err := netip.ParseAddr(a.cfg.Address)
	if err != nil {
		return nil, fmt.Errorf("agent: pod network: address %q: %w", a.cfg.Address, err)
	}
	n, err := podnet.New(podnet.Config{NodeIP: ip, ClusterCIDR: a.cfg.ClusterCIDR,
		StateDir: filepath.Join(a.cfg.DataDir, "podnet"), Logger: a.log})
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	return &podNetwork{Network: n, ready: make(chan struct{})}, nil
}

// Attach waits up to 10 s for the pod CIDR, then attaches the pod.
func (p *podNetwork) Attach(ctx context.Context, pod *corev1.Pod, netnsPath string) ([]string, error) {
	select {
	case <-p.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(10 * time.Second):
	}
	return p.Network.Attach(ctx, pod, netnsPath)
}

// setPodCIDR gives the network the Node's pod CIDR once it has one (and
// again when it changes).
func (p *podNetwork) setPodCIDR(cidr string) error {
	c, err := netip.ParsePrefix(cidr)
	if err != nil {
		return fmt.Errorf("agent: the Node's pod CIDR %q: %w", cidr, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c == p.cidr {
		return nil
	}
	if err := p.SetPodCIDR(c); err != nil {
		return err
	}
	if !p.cidr.IsValid() {
		close(p.ready)
	}
	p.cidr = c
	return nil
}

// peersOf are the other boards with a pod CIDR, as gossip knows them: the
// routes to their pods. Boards that are gone keep their route, whether
// they died or said goodbye: a board says goodbye whenever its isle stops,
// and its pods, which keep running, stay reachable while it restarts
// (connections in flight included). known holds the pod CIDR each board
// last announced: a board whose isle restarts rejoins gossip before it
// announces its CIDR again, and its route stays meanwhile. A gone board's
// CIDR that an alive board announces (given anew after the gone board was
// removed) routes to the alive one. peersOf updates known.
func peersOf(members []gossip.Member, self string, known map[string]podnet.Peer) []podnet.Peer {
	var alive, gone []podnet.Peer
	for _, m := range members {
		if m.Name == self {
			continue
		}
		c, err := netip.ParsePrefix(m.PodCIDR)
		switch {
		case m.PodCIDR == "":
			p, ok := known[m.Name]
			if !ok || p.Addr != m.Addr.Addr() {
				continue
			}
			c = p.PodCIDR
		case err != nil:
			continue // not a prefix: no route (podnet checks the rest)
		}
		p := podnet.Peer{Name: m.Name, Addr: m.Addr.Addr(), PodCIDR: c}
		known[m.Name] = p
		if m.State == gossip.Alive || m.State == gossip.Suspect {
			alive = append(alive, p)
		} else {
			gone = append(gone, p)
		}
	}
	out := alive
	for _, g := range gone {
		if !slices.ContainsFunc(alive, func(a podnet.Peer) bool { return a.PodCIDR.Overlaps(g.PodCIDR) }) {
			out = append(out, g)
		}
	}
	return out
}
