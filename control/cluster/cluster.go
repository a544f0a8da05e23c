// Package cluster runs a control-plane server: it assembles the replicated
// store (package raft), the API registry and server, the cluster identity
// (CA and token), the join protocol for new servers, and the work done once
// on a new cluster (namespaces, the kubernetes Service).
package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/isle-cluster/isle/control/apiserver"
	"github.com/isle-cluster/isle/control/controllers"
	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/storeapi"
	"github.com/isle-cluster/isle/raft/transport"
)

// Config configures a server. Zero values take the documented defaults.
type Config struct {
	// DataDir holds the store and the cluster identity. Required.
	DataDir string
	// Name is the server's name (its board's hostname). Required.
	Name string
	// Init starts a new cluster; Join (a server's API host:port) with
	// Token joins one. A data directory that holds a server already
	// restarts it and ignores both.
	Init  bool
	Join  string
	Token string
	// RaftAddr is host:port for raft traffic, listened on and advertised.
	RaftAddr string
	// APIAddr is host:port the API server listens on; APIAdvertise is the
	// host:port other servers and clients reach it at (default APIAddr).
	APIAddr      string
	APIAdvertise string
	// StoreAddr serves the store's debugging API (keep it on loopback);
	// empty: not served.
	StoreAddr string
	// ServiceCIDR is the range of Service cluster IPs. Default 10.43.0.0/16.
	ServiceCIDR netip.Prefix
	// Version and Commit of isle, for /version.
	Version, Commit string
	Logger          *slog.Logger
	// Snapshot tunes when the store snapshots (zero values: the store's
	// defaults).
	Snapshot SnapshotTuning
}

// SnapshotTuning tunes the store's snapshots: boards with little memory
// may want them sooner.
type SnapshotTuning struct {
	Entries        uint64 // snapshot after this many entries
	CatchUpEntries uint64 // entries kept in memory after a snapshot
}

func (c *Config) validate() error {
	switch {
	case c.DataDir == "":
		return errors.New("cluster: DataDir is required")
	case c.Name == "":
		return errors.New("cluster: Name is required")
	case c.RaftAddr == "" || c.APIAddr == "":
		return errors.New("cluster: RaftAddr and APIAddr are required")
	case c.Init && c.Join != "":
		return errors.New("cluster: start a new cluster or join one, not both")
	}
	if c.APIAdvertise == "" {
		c.APIAdvertise = c.APIAddr
	}
	if host, _, err := net.SplitHostPort(c.APIAdvertise); err != nil || host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified() {
		return fmt.Errorf("cluster: API advertise address %q: want the board's own host:port", c.APIAdvertise)
	}
	if !c.ServiceCIDR.IsValid() {
		c.ServiceCIDR = registry.DefaultServiceCIDR
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Run runs the server until ctx ends or it fails.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	log := cfg.Logger
	storeDir := filepath.Join(cfg.DataDir, storeDirName)

	id, boot, joiner, err := establishIdentity(ctx, cfg, storeDir)
	if err != nil {
		return err
	}
	if err := saveLocalInfo(cfg.DataDir, localInfo{APIServer: "https://" + cfg.APIAdvertise}); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	node, err := raft.Open(raft.Config{
		DataDir: storeDir, Name: cfg.Name, RaftAddr: cfg.RaftAddr, ClientAddr: cfg.APIAdvertise,
		Logger: log, Registerer: reg,
		SnapshotEntries: cfg.Snapshot.Entries, CatchUpEntries: cfg.Snapshot.CatchUpEntries,
	}, boot)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	defer node.Stop()
	lis, err := net.Listen("tcp", cfg.RaftAddr)
	if err != nil {
		return fmt.Errorf("cluster: listen for raft on %s: %w", cfg.RaftAddr, err)
	}
	tr, err := transport.New(transport.Config{ID: node.ID(), ClusterID: node.ClusterID(), Listener: lis, Handler: node, Logger: log, Registerer: reg})
	if err != nil {
		lis.Close()
		return fmt.Errorf("cluster: %w", err)
	}
	defer tr.Close()
	tr.Start()
	node.Start(tr)

	store := registry.New(registry.Config{Node: node, Logger: log, ServiceCIDR: cfg.ServiceCIDR})
	servingTLS, err := servingConfig(id, cfg)
	if err != nil {
		return err
	}
	api := apiserver.New(apiserver.Config{
		Store: store, AdvertiseAddr: cfg.APIAdvertise, Metrics: reg, Logger: log,
		Tokens: nodeTokens(store), IsleVersion: cfg.Version, IsleCommit: cfg.Commit,
		Ready: func(ctx context.Context) error { return node.Sync(ctx) },
		Extra: &joinHandler{node: node, id: id, log: log},
	})
	apiLis, err := net.Listen("tcp", cfg.APIAddr)
	if err != nil {
		return fmt.Errorf("cluster: listen for the API on %s: %w", cfg.APIAddr, err)
	}
	srv := &http.Server{Handler: api, TLSConfig: servingTLS, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	errc := make(chan error, 3)
	go func() { errc <- fmt.Errorf("cluster: API server: %w", srv.ServeTLS(apiLis, "", "")) }()
	defer shutdown(srv)
	if cfg.StoreAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("/store/", storeapi.Handler(node, log))
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		debug := &http.Server{Addr: cfg.StoreAddr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { errc <- fmt.Errorf("cluster: store API on %s: %w", cfg.StoreAddr, debug.ListenAndServe()) }()
		defer shutdown(debug)
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if joiner != nil {
		go promoteSelf(runCtx, node, joiner, log)
	}
	go whileLeader(runCtx, node, func(ctx context.Context) {
		bootstrapObjects(ctx, store, id, log)
		controllers.RunAll(ctx, controllers.Table(store, log), log)
	})
	log.Info("cluster: server running", "name", cfg.Name, "member", fmt.Sprintf("%x", node.ID()),
		"api", "https://"+cfg.APIAdvertise, "raft", cfg.RaftAddr)
	if cfg.Init && !joinerOrRestart(joiner, boot) {
		log.Info("cluster: new cluster started; join other servers with this token", "token", id.Token.String())
	}

	select {
	case <-ctx.Done():
		log.Info("cluster: stopping")
		return nil
	case <-node.Done():
		return fmt.Errorf("cluster: store stopped: %w", node.Err())
	case err := <-errc:
		return err
	}
}

func joinerOrRestart(joiner *joinClient, boot raft.Bootstrap) bool {
	return joiner != nil || !boot.NewCluster
}

func shutdown(srv *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
}

// establishIdentity loads the identity of a restarting server, creates the
// one of a new cluster, or fetches it from the cluster being joined.
func establishIdentity(ctx context.Context, cfg Config, storeDir string) (Identity, raft.Bootstrap, *joinClient, error) {
	var boot raft.Bootstrap
	if raft.HasMember(storeDir) {
		id, err := LoadIdentity(cfg.DataDir)
		return id, boot, nil, err
	}
	switch {
	case cfg.Init:
		id, err := newIdentity(time.Now())
		if err != nil {
			return id, boot, nil, fmt.Errorf("cluster: new CA: %w", err)
		}
		if err := saveIdentity(cfg.DataDir, id); err != nil {
			return id, boot, nil, fmt.Errorf("cluster: %w", err)
		}
		boot.NewCluster = true
		return id, boot, nil, nil
	case cfg.Join != "":
		tok, err := pki.ParseToken(cfg.Token)
		if err != nil {
			return Identity{}, boot, nil, fmt.Errorf("cluster: --token: %w", err)
		}
		c := newJoinClient(tok)
		jctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		info, id, err := c.join(jctx, cfg.Join, joinRequest{Name: cfg.Name, RaftAddr: cfg.RaftAddr, APIAddr: cfg.APIAdvertise})
		if err != nil {
			return id, boot, nil, fmt.Errorf("cluster: %w", err)
		}
		if err := saveIdentity(cfg.DataDir, id); err != nil {
			return id, boot, nil, fmt.Errorf("cluster: %w", err)
		}
		boot.Join = &info
		return id, boot, c, nil
	}
	return Identity{}, boot, nil, fmt.Errorf("cluster: %s holds no server yet: start a new cluster with --init or join one with --join ADDR --token T", cfg.DataDir)
}

// servingConfig issues this server's serving certificate from the CA.
func servingConfig(id Identity, cfg Config) (*tls.Config, error) {
	host, _, _ := net.SplitHostPort(cfg.APIAdvertise)
	var ips []net.IP
	var names []string
	if ip := net.ParseIP(host); ip != nil {
		ips = append(ips, ip)
	} else {
		names = append(names, host)
	}
	names = append(names, cfg.Name)
	first := cfg.ServiceCIDR.Addr().Next() // the kubernetes Service
	ips = append(ips, net.IP(first.AsSlice()))
	certPEM, keyPEM, err := id.CA.IssueServing(cfg.Name, names, ips, time.Now())
	if err != nil {
		return nil, fmt.Errorf("cluster: serving certificate: %w", err)
	}
	c, err := pki.ServerConfig(id.CA, certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("cluster: serving certificate: %w", err)
	}
	return c, nil
}

// whileLeader runs f whenever this member becomes the leader, with a
// context that ends when it stops being the leader.
func whileLeader(ctx context.Context, node *raft.Node, f func(context.Context)) {
	for {
		changed := node.LeaderChanged()
		if node.Leader() != node.ID() {
			select {
			case <-ctx.Done():
				return
			case <-changed:
				continue
			}
		}
		lctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-changed:
			case <-lctx.Done():
			}
			cancel()
		}()
		f(lctx)
		<-lctx.Done()
		cancel()
		if ctx.Err() != nil {
			return
		}
	}
}
