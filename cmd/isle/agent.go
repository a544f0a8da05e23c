package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/isle-cluster/isle/control/apiserver"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/hw"
	"github.com/isle-cluster/isle/node/agent"
	"github.com/isle-cluster/isle/node/bootstrap"
	"github.com/isle-cluster/isle/node/gossip"
)

type agentFlags struct {
	join        []string
	token       string
	dataDir     string
	name        string
	address     string
	gossipPort  int
	logLevel    string
	metricsAddr string
	mdns        bool
	nameGiven   bool
	node        nodeFlags
}

func newAgentCommand() *cobra.Command {
	var f agentFlags
	cmd := &cobra.Command{
		Use:   "agent --join ADDR --token T",
		Short: "Run a worker board: a node of the cluster",
		Long: `Run a worker board: join the cluster and register this board as a Node.

--join gives the address of any board of the cluster (server or agent; its
gossip port 7946 if no port is given); without it, the board asks its LAN by
multicast DNS for boards of the token's cluster. It finds the servers through
them, checks their certificate against the CA hash in --token, and gets a node
credential, kept in DATA-DIR. After that the same command line (or one
without --join and --token) restarts the board: it rejoins through the
servers it saw last.`,
		Args:    cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error { return applyConfigFile(cmd) },
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.nameGiven = cmd.Flags().Changed("name") // on the command line or in the config file
			return runAgent(cmd.Context(), f)
		},
	}
	addConfigFlag(cmd)
	fl := cmd.Flags()
	fl.StringSliceVar(&f.join, "join", nil, "address (host or host:port) of any board of the cluster; repeat or separate with commas for more")
	fl.StringVar(&f.token, "token", "", "the cluster token (the first server printed it; it is in its DATA-DIR/token)")
	fl.StringVar(&f.dataDir, "data-dir", "/var/lib/isle", "directory for the board's credential and state")
	fl.StringVar(&f.name, "name", "", "node name (default: the hostname)")
	fl.StringVar(&f.address, "address", "127.0.0.1", "this board's address, which the other boards reach it at; auto: the address of the interface of its default route")
	fl.IntVar(&f.gossipPort, "gossip-port", gossip.DefaultPort, "port of the gossip between boards (TCP and UDP)")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fl.BoolVar(&f.mdns, "mdns", true, "find the cluster (without --join) and advertise it by multicast DNS on the LAN interface of --address")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "address (host:port) to serve Prometheus /metrics on, such as 127.0.0.1:10249; empty: off")
	f.node.add(fl)
	return cmd
}

func (f *agentFlags) validate() error {
	if err := checkBoard(&f.name, &f.address); err != nil {
		return err
	}
	if f.gossipPort < 1 || f.gossipPort > 65535 {
		return fmt.Errorf("--gossip-port %d: want a port from 1 to 65535", f.gossipPort)
	}
	if f.metricsAddr != "" {
		if _, port, err := net.SplitHostPort(f.metricsAddr); err != nil || port == "" || port == "0" {
			return fmt.Errorf("--metrics-addr %q: want host:port with a fixed port", f.metricsAddr)
		}
	}
	if err := checkJoinAddrs(f.join); err != nil {
		return err
	}
	return f.node.apply(&agent.Config{})
}

func runAgent(ctx context.Context, f agentFlags) error {
	if err := f.validate(); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	log, err := newLogger(f.logLevel)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	leds, err := f.node.openLEDs(log)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	defer leds.Close()
	if err := resolveAddress(ctx, &f.address, log); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	addr := netip.MustParseAddr(f.address)

	cred, joined, err := wire.LoadCredential(f.dataDir)
	if err != nil {
		return err
	}
	switch {
	case joined && f.nameGiven && cred.Name != f.name:
		return fmt.Errorf("agent: %s belongs to the node %q, not %q: use --name %s, or another --data-dir", f.dataDir, cred.Name, f.name, cred.Name)
	case !joined:
		if cred, err = joinAsAgent(ctx, f, addr, log); err != nil {
			return err
		}
	}

	facts, err := hw.Read()
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	g, err := gossip.Start(gossip.Config{
		Meta: gossip.Meta{Name: cred.Name, Role: gossip.RoleAgent, Arch: facts.Platform(), Version: version},
		Addr: addr, Port: f.gossipPort, Key: cred.GossipKey, Logger: log, Registerer: reg,
	})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if f.metricsAddr != "" {
		lis, err := net.Listen("tcp", f.metricsAddr)
		if err != nil {
			return fmt.Errorf("agent: --metrics-addr: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(lis) }()
		defer srv.Close()
	}
	defer func() { _ = g.Leave(2 * time.Second) }()
	if f.mdns {
		ca, err := wire.ParseCertPEM(cred.CACert)
		if err != nil {
			return fmt.Errorf("agent: %w", err)
		}
		if stop := gossip.AdvertiseOnLAN(cred.Name, addr, f.gossipPort, wire.CAHash(ca), log); stop != nil {
			defer stop()
		}
	}
	seeds := append(append([]string{}, f.join...), cred.Servers...)
	for attempt := 0; ; attempt++ {
		if _, err = g.Join(seeds); err == nil {
			break
		}
		if attempt%10 == 0 {
			log.Warn("agent: no board answered gossip yet; retrying", "seeds", seeds, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
	log.Info("agent: in the cluster's gossip", "name", cred.Name, "members", len(g.Members()))
	acfg := agent.Config{Credential: cred, Role: gossip.RoleAgent, Address: f.address, DataDir: f.dataDir,
		Gossip: g, KubeVersion: apiserver.KubeVersion, Logger: log, Registerer: reg, LEDs: leds}
	if err := f.node.apply(&acfg); err != nil {
		return err
	}
	return agent.Run(ctx, acfg)
}

// joinAsAgent is a new board's first start: find the servers through any
// board, get a node credential, and save it.
func joinAsAgent(ctx context.Context, f agentFlags, addr netip.Addr, log *slog.Logger) (wire.Credential, error) {
	if f.token == "" {
		return wire.Credential{}, errors.New("agent: this board has not joined a cluster yet: give --token T (and --join ADDR of any board, unless the cluster is found by mDNS)")
	}
	tok, err := wire.ParseToken(f.token)
	if err != nil {
		return wire.Credential{}, fmt.Errorf("agent: --token: %w", err)
	}
	if len(f.join) == 0 {
		if !f.mdns {
			return wire.Credential{}, errors.New("agent: no --join given and --mdns is off: give --join ADDR of any board of the cluster")
		}
		if f.join, err = gossip.FindOnLAN(ctx, addr, tok.CAHash, log); err != nil {
			return wire.Credential{}, fmt.Errorf("agent: %w", err)
		}
	}
	key, err := gossip.DeriveKey(tok.Secret)
	if err != nil {
		return wire.Credential{}, fmt.Errorf("agent: %w", err)
	}
	found, err := gossip.DiscoverRetry(ctx, addr, key, f.join, log)
	if err != nil {
		return wire.Credential{}, fmt.Errorf("agent: join: %w", err)
	}
	jctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	resp, err := bootstrap.NewClient(tok).Join(jctx, bootstrap.APIAddrs(found), wire.JoinRequest{Name: f.name, Role: wire.RoleAgent}, "")
	if err != nil {
		return wire.Credential{}, fmt.Errorf("agent: %w", err)
	}
	var servers []string
	for _, m := range found {
		if m.Role == gossip.RoleServer {
			servers = append(servers, m.Addr.String())
		}
	}
	cred := wire.Credential{Name: f.name, NodeToken: resp.NodeToken, CACert: resp.CACert, GossipKey: resp.GossipKey, Servers: servers}
	if err := cred.Save(f.dataDir); err != nil {
		return cred, err
	}
	return cred, nil
}
