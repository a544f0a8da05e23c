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
	if ccfg.GossipKey, err = gossip.DeriveKey(ccfg.Identity.Token.Secret); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
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
		Arch: facts.Platform(), Version: cfg.Version}, ccfg.GossipKey, wire.CAHash(ccfg.Identity.CA.Cert), reg)
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
		return seeds
	}
	go func() {
		if joinGossip(runCtx, g, cfg, seeds) {
			keepGossip(runCtx, g, cfg, seeds, rejoinEvery)
		}
	}()
	// The board's agent (its Ingress and Service proxy among the rest)
	// stops after the control plane: a leader that stops hands leadership
	// and the floating address on while the Ingress still answers on it.
	nodeCtx, stopNode := context.WithCancel(context.WithoutCancel(ctx))
	defer stopNode()
	nodeErr := make(chan error, 1)
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
		id, err := cluster.NewIdentity(cfg.DataDir, time.Now())
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
