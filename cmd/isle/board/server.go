package board

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/isle-cluster/isle/control/cluster"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/hw"
	"github.com/isle-cluster/isle/hw/clock"
	"github.com/isle-cluster/isle/hw/pageout"
	"github.com/isle-cluster/isle/node/bootstrap"
	"github.com/isle-cluster/isle/node/gossip"
	"github.com/isle-cluster/isle/node/vip"
	"github.com/isle-cluster/isle/raft"
)

// runServer runs a server board: the control plane, and the node agent
// every board runs.
func runServer(ctx context.Context, cfg Config) error {
	log := cfg.Logger
	ccfg := *cfg.Server
	ccfg.DataDir, ccfg.Name, ccfg.Version, ccfg.Commit, ccfg.Logger = cfg.DataDir, cfg.Name, cfg.Version, cfg.Commit, log
	ccfg.ClusterDNS, ccfg.PodCIDR = cfg.Agent.ClusterDNS, cfg.Agent.ClusterCIDR
	reg := newRegistry()
	ccfg.Metrics = reg
	if err := ccfg.Validate(); err != nil {
		return err
	}
	cfg.Agent.ClusterDNS = ccfg.ClusterDNS

	facts, err := hw.Read()
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if ccfg.Identity, ccfg.Boot, err = establishIdentity(ctx, cfg, ccfg); err != nil {
		return err
	}
	// The gossip key: the one in the server's credential once it has run
	// (a replaced server token does not change it), else the one a
	// replaced token carries, else derived from the token's secret.
	if cred, ok, _ := wire.LoadCredential(cfg.DataDir); ok && len(cred.GossipKey) > 0 {
		ccfg.GossipKey = cred.GossipKey
	} else if ccfg.GossipKey = ccfg.Identity.Token.GossipKey; ccfg.GossipKey == nil {
		ccfg.GossipKey, err = gossip.DeriveKey(ccfg.Identity.Token.Secret)
	}
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	// A new or joining server set its clock already; a restarting one
	// sets it before it issues its serving certificate.
	told := ccfg.Boot.Join != nil || ccfg.Boot.NewCluster || settleServerClock(ctx, cfg, ccfg)
	ccfg.Now = cfg.Clock.Now
	var vipCfg vip.Config
	if ccfg.VIP.IsValid() {
		vipCfg = vip.Config{VIP: ccfg.VIP, Board: cfg.Address, Logger: log}
		if err := vip.Check(vipCfg); err != nil {
			return fmt.Errorf("cluster: --vip: %w", err)
		}
		// A board that crashed while leading may still hold it.
		if err := vip.Release(vipCfg); err != nil {
			return fmt.Errorf("cluster: --vip: %w", err)
		}
	}
	if ccfg.VIP.IsValid() {
		ccfg.DrainVIP = func() func() {
			undo, err := vip.Drain(vipCfg)
			if err != nil {
				log.Warn("cluster: new connections to the floating address not held back before the hand-off", "err", err)
				return func() {}
			}
			return func() {
				if err := undo(); err != nil {
					log.Warn("vip: drain not removed", "err", err)
				}
			}
		}
	}
	ccfg.Lead = func(ctx context.Context) {
		if l := cfg.Agent.LEDs; l != nil {
			// The leader's readiness LED dips twice every few seconds.
			l.SetLeader(true)
			context.AfterFunc(ctx, func() { l.SetLeader(false) })
		}
		if ccfg.VIP.IsValid() {
			go func() {
				if err := vip.Hold(ctx, vipCfg); err != nil {
					log.Error("cluster: the floating API address is not held", "err", err)
				}
			}()
		}
	}
	if l := cfg.Agent.LEDs; l != nil {
		ccfg.Activity = l.Activity
	}
	srv, err := cluster.Open(ccfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	g, stop, err := startGossip(cfg, gossip.Meta{Name: cfg.Name, Role: gossip.RoleServer, RaftID: srv.ID(), API: ccfg.APIAdvertise, Raft: ccfg.RaftAddr,
		Arch: facts.Platform(), Version: cfg.Version}, ccfg.GossipKey, func() string { return wire.CAHash(ccfg.Identity.CA.Cert()) }, reg)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	defer stop()

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The boards this server knows: the addresses it was started with, the
	// servers it saw last, and the other store members (on the same gossip
	// port).
	seeds := func() []string {
		seeds := slices.Clone(cfg.Join)
		if cred, ok, _ := wire.LoadCredential(cfg.DataDir); ok {
			seeds = append(seeds, cred.Servers...)
		}
		for _, p := range srv.Peers() {
			if host, _, err := net.SplitHostPort(p); err == nil {
				seeds = append(seeds, net.JoinHostPort(host, strconv.Itoa(cfg.GossipPort)))
			}
		}
		for _, a := range srv.NodeAddrs() {
			seeds = append(seeds, net.JoinHostPort(a, strconv.Itoa(cfg.GossipPort)))
		}
		return seeds
	}
	go func() {
		if joinGossip(runCtx, g, cfg, seeds, 0) {
			keepGossip(runCtx, g, cfg, seeds, rejoinEvery)
		}
	}()
	if !told {
		go askTimeUntilTold(runCtx, cfg, wire.CAHash(ccfg.Identity.CA.Cert()), g, ccfg.APIAdvertise, askTimeEvery)
	}
	// The board's agent (its Ingress and Service proxy among the rest)
	// stops after the control plane: a leader that stops hands leadership
	// and the floating address on while the Ingress still answers on it.
	nodeCtx, stopNode := context.WithCancel(context.WithoutCancel(ctx))
	defer stopNode()
	nodeErr := make(chan error, 1)
	go pageout.Run(runCtx, releaseAfter, releaseEvery, log)
	go func() {
		cred, err := srv.NodeCredential(runCtx)
		if err == nil {
			err = runNode(nodeCtx, cfg, cred, gossip.RoleServer, g, reg, []string{ccfg.APIAdvertise})
		}
		nodeErr <- err
		cancel()
	}()
	err = srv.Run(runCtx, boards{g})
	stopNode()
	if ctx.Err() != nil {
		return nil
	}
	select {
	case err := <-nodeErr:
		return err
	default:
		return err
	}
}

// establishIdentity loads the identity of a restarting server (or of a
// prepared restore), creates the one of a new cluster, or joins the
// cluster and saves the identity and the node credential it is answered
// with.
func establishIdentity(ctx context.Context, cfg Config, ccfg cluster.Config) (cluster.Identity, raft.Bootstrap, error) {
	var boot raft.Bootstrap
	hasServer := cluster.HasServer(cfg.DataDir)
	if ccfg.Boot.ForceNewCluster {
		if !hasServer {
			return cluster.Identity{}, boot, fmt.Errorf("cluster: --force-new-cluster: %s holds no server to recover", cfg.DataDir)
		}
		boot.ForceNewCluster = true
	}
	// A restarting server, or one whose data directory holds a prepared
	// restore (cluster.Open seeds the store from it).
	if hasServer || cluster.RestorePending(cfg.DataDir) {
		id, err := cluster.LoadIdentity(cfg.DataDir)
		return id, boot, err
	}
	switch {
	case cfg.Init:
		// The CA is valid from now: not from 1970.
		cfg.Clock.Advance(clock.Floor(cfg.Logger, clock.Earliest(), cfg.DataDir), cfg.Logger)
		id, err := cluster.NewIdentity(cfg.DataDir, cfg.Clock.Now())
		if err != nil {
			return id, boot, fmt.Errorf("cluster: %w", err)
		}
		boot.NewCluster = true
		return id, boot, nil
	case len(cfg.Join) > 0 || cfg.Token != "" && cfg.MDNS:
		tok, resp, cred, err := join(ctx, cfg, wire.JoinRequest{Name: cfg.Name, Role: wire.RoleServer, Release: wire.Release, RaftAddr: ccfg.RaftAddr, APIAddr: ccfg.APIAdvertise})
		if err == nil && (resp.Join == nil || resp.NodeToken == "") {
			err = errors.New("join: the server's answer lacks the store's join information or the node credential")
		}
		if err != nil {
			return cluster.Identity{}, boot, fmt.Errorf("cluster: %w", err)
		}
		id, err := cluster.JoinedIdentity(cfg.DataDir, tok, resp)
		if err == nil {
			err = cred.Save(cfg.DataDir)
		}
		if err != nil {
			return id, boot, fmt.Errorf("cluster: %w", err)
		}
		boot.Join = resp.Join
		return id, boot, nil
	}
	return cluster.Identity{}, boot, fmt.Errorf("cluster: %s holds no server yet: start a new cluster with --init or join one with --token T (and --join ADDR, unless the cluster is found by mDNS)", cfg.DataDir)
}

// settleServerClock sets the clock of a restarting server by the other
// servers' (found through the gossip of the servers in its credential, in
// one attempt of at most discoverTimeout: after a power cut of the whole
// cluster there are none yet) or, without them, by what it knows
// (clock.Floor with the CA). It reports whether a server told the time.
func settleServerClock(ctx context.Context, cfg Config, ccfg cluster.Config) bool {
	self := net.JoinHostPort(cfg.Address.String(), strconv.Itoa(cfg.GossipPort))
	var apiAddrs []string
	if cred, ok, _ := wire.LoadCredential(cfg.DataDir); ok {
		seeds := slices.DeleteFunc(slices.Clone(cred.Servers), func(s string) bool { return s == self })
		if len(seeds) > 0 {
			for _, a := range bootstrap.APIAddrs(discoverFor(cfg, ccfg.GossipKey, seeds, discoverTimeout)) {
				if a != ccfg.APIAdvertise {
					apiAddrs = append(apiAddrs, a)
				}
			}
		}
	}
	return settleClock(ctx, cfg, wire.CAHash(ccfg.Identity.CA.Cert()), apiAddrs, ccfg.Identity.CA.Cert())
}

// discoverTimeout bounds how long a restarting server looks for the
// others to tell it the time: seeds that are down may each take a TCP
// timeout.
const discoverTimeout = 5 * time.Second

// discoverFor is gossip.Discover through seeds, given up after d (the
// discovery ends on its own later).
func discoverFor(cfg Config, key []byte, seeds []string, d time.Duration) []gossip.Member {
	done := make(chan []gossip.Member, 1)
	go func() {
		found, err := gossip.Discover(cfg.Address, key, seeds)
		if err != nil {
			cfg.Logger.Info("clock: no other server found to tell the time", "err", err)
		}
		done <- found
	}()
	select {
	case found := <-done:
		return found
	case <-time.After(d):
		cfg.Logger.Info("clock: no other server found to tell the time", "seeds", seeds, "waited", d)
		return nil
	}
}
