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
	"net/http/pprof"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sys/unix"

	"github.com/isle-cluster/isle/control/apiserver"
	"github.com/isle-cluster/isle/control/controllers"
	"github.com/isle-cluster/isle/control/controllers/hpa"
	"github.com/isle-cluster/isle/control/controllers/nodelifecycle"
	"github.com/isle-cluster/isle/control/events"
	resourcemetrics "github.com/isle-cluster/isle/control/metrics"
	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/control/scheduler"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/hw"
	"github.com/isle-cluster/isle/node/agent"
	"github.com/isle-cluster/isle/node/bootstrap"
	"github.com/isle-cluster/isle/node/gossip"
	"github.com/isle-cluster/isle/node/vip"
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
	// Init starts a new cluster; Join (gossip addresses, host or
	// host:port, of any boards of the cluster) with Token joins one. A
	// data directory that holds a server already restarts it and ignores
	// both.
	Init  bool
	Join  []string
	Token string
	// Address is the board's IP: gossip binds it (port GossipPort,
	// default 7946) and its Node reports it.
	Address    netip.Addr
	GossipPort int
	// RemoveDeadAfter removes a voter whose board has been dead this long
	// (0: never).
	RemoveDeadAfter time.Duration
	// VIP, if valid, is a floating API address the Raft leader holds on its
	// LAN interface (the interface of Address).
	VIP netip.Addr
	// MDNS advertises the cluster on the board's LAN and, with a Token but
	// no Join, finds it there.
	MDNS bool
	// Gossip tunes failure detection (nil: gossip.LANTuning).
	Gossip *gossip.Tuning
	// NodeGrace is how long a new leader waits for a Node's board to show
	// up in gossip before it marks the Node NotReady (0: 40 s).
	NodeGrace time.Duration
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
	// Agent holds the settings of the board's node agent (how it runs
	// pods); its identity, addresses and logger are filled in here.
	Agent agent.Config
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
	case c.Init && len(c.Join) > 0:
		return errors.New("cluster: start a new cluster or join one, not both")
	case !c.Address.IsValid() || c.Address.IsUnspecified():
		return fmt.Errorf("cluster: address %v: want the board's own IP", c.Address)
	}
	if c.GossipPort == 0 {
		c.GossipPort = gossip.DefaultPort
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
	if !c.Agent.ClusterDNS.IsValid() {
		c.Agent.ClusterDNS = ClusterDNS(c.ServiceCIDR)
	}
	if !c.ServiceCIDR.Contains(c.Agent.ClusterDNS) {
		return fmt.Errorf("cluster: cluster DNS address %v is not in the service range %v", c.Agent.ClusterDNS, c.ServiceCIDR)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// ClusterDNS is the cluster DNS address of a service range: its tenth
// address, as in every Kubernetes distribution.
func ClusterDNS(serviceCIDR netip.Prefix) netip.Addr {
	a := serviceCIDR.Masked().Addr()
	for range 10 {
		a = a.Next()
	}
	return a
}

// Run runs the server until ctx ends or it fails.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	log := cfg.Logger
	storeDir := filepath.Join(cfg.DataDir, storeDirName)

	facts, err := hw.Read()
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	id, boot, err := establishIdentity(ctx, cfg, storeDir)
	if err != nil {
		return err
	}
	gossipKey, err := gossip.DeriveKey(id.Token.Secret)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	apiServer := "https://" + cfg.APIAdvertise
	var vipCfg vip.Config
	if cfg.VIP.IsValid() {
		vipCfg = vip.Config{VIP: cfg.VIP, Board: cfg.Address, Logger: log}
		if err := vip.Check(vipCfg); err != nil {
			return fmt.Errorf("cluster: --vip: %w", err)
		}
		// A board that crashed while leading may still hold it.
		if err := vip.Release(vipCfg); err != nil {
			return fmt.Errorf("cluster: --vip: %w", err)
		}
		apiServer = "https://" + net.JoinHostPort(cfg.VIP.String(), apiPort(cfg.APIAddr))
	}
	if err := saveLocalInfo(cfg.DataDir, localInfo{APIServer: apiServer}); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	events.RegisterMetrics(reg)
	scheduler.RegisterMetrics(reg)
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

	g, err := gossip.Start(gossip.Config{
		Meta: gossip.Meta{Name: cfg.Name, Role: gossip.RoleServer, RaftID: node.ID(), API: cfg.APIAdvertise, Raft: cfg.RaftAddr,
			Arch: facts.Platform(), Version: cfg.Version},
		Addr: cfg.Address, Port: cfg.GossipPort, Key: gossipKey, Tuning: cfg.Gossip, Logger: log, Registerer: reg,
	})
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	defer func() { _ = g.Leave(2 * time.Second) }()
	if cfg.MDNS {
		if stop := gossip.AdvertiseOnLAN(cfg.Name, cfg.Address, cfg.GossipPort, wire.CAHash(id.CA.Cert), log); stop != nil {
			defer stop()
		}
	}

	store := registry.New(registry.Config{Node: node, Logger: log, ServiceCIDR: cfg.ServiceCIDR})
	// What the boards report of their usage, in memory only: kubectl top and the HPA controller read it.
	usage := resourcemetrics.NewCache(resourcemetrics.Config{Registerer: reg})
	members := &membership{node: node, gossip: g, store: store, log: log, removeDeadAfter: cfg.RemoveDeadAfter}
	servingTLS, err := servingConfig(id, cfg)
	if err != nil {
		return err
	}
	// The API server's client certificate for the boards' streaming servers.
	nodeTLS, err := id.CA.ClientConfig(wire.APIServerUser, nil, time.Now)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	certs := &servingCertHandler{ca: id.CA, members: node.Members, log: log, now: time.Now,
		nodeOf: func(token string) (string, bool) { return nodeOfToken(node.KV(), token) }}
	api := apiserver.New(apiserver.Config{
		Store: store, AdvertiseAddr: cfg.APIAdvertise, Metrics: reg, Logger: log,
		Tokens: nodeTokens(store), IsleVersion: cfg.Version, IsleCommit: cfg.Commit,
		Ready:     func(ctx context.Context) error { return node.Sync(ctx) },
		Extra:     isleHandler(certs, &joinHandler{node: node, id: id, log: log, members: members}),
		NodeLease: members.nodeLease, Usage: usage, NodeTLS: nodeTLS,
	})
	apiLis, err := net.Listen("tcp", cfg.APIAddr)
	if err != nil {
		return fmt.Errorf("cluster: listen for the API on %s: %w", cfg.APIAddr, err)
	}
	srv := &http.Server{Handler: api, TLSConfig: servingTLS, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	errc := make(chan error, 3)
	go func() { errc <- fmt.Errorf("cluster: API server: %w", srv.ServeTLS(apiLis, "", "")) }()
	if cfg.VIP.IsValid() {
		// Bound now, though the address is not here yet (IP_FREEBIND): it
		// serves as soon as this board leads and holds the address.
		vipLis, err := listenFreebind(net.JoinHostPort(cfg.VIP.String(), apiPort(cfg.APIAddr)))
		if err != nil {
			return fmt.Errorf("cluster: listen for the API on the VIP: %w", err)
		}
		go func() { errc <- fmt.Errorf("cluster: API server on the VIP: %w", srv.ServeTLS(vipLis, "", "")) }()
	}
	defer shutdown(srv)
	if cfg.StoreAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("/store/", storeapi.Handler(node, log))
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		// Profiles, for measuring memory and CPU on a board (loopback only, like the rest).
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		debug := &http.Server{Addr: cfg.StoreAddr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { errc <- fmt.Errorf("cluster: store API on %s: %w", cfg.StoreAddr, debug.ListenAndServe()) }()
		defer shutdown(debug)
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go joinGossip(runCtx, g, node, cfg, log)
	go whileLeader(runCtx, node, func(ctx context.Context) {
		if l := cfg.Agent.LEDs; l != nil {
			// The leader's readiness LED dips twice every few seconds.
			l.SetLeader(true)
			context.AfterFunc(ctx, func() { l.SetLeader(false) })
		}
		go members.maintain(ctx)
		if cfg.VIP.IsValid() {
			go func() {
				if err := vip.Hold(ctx, vipCfg); err != nil {
					log.Error("cluster: the floating API address is not held", "err", err)
				}
			}()
		}
		bootstrapObjects(ctx, store, id, cfg.Agent.ClusterDNS, log)
		opts := []controllers.Option{controllers.WithHPA(hpa.Config{Metrics: usage}), controllers.WithRootCA(id.CA.CertPEM),
			controllers.WithNodeLifecycle(gossipLiveness{g}, nodelifecycle.Config{Grace: cfg.NodeGrace, PodCIDR: cfg.Agent.ClusterCIDR})}
		if l := cfg.Agent.LEDs; l != nil {
			opts = append(opts, controllers.WithActivity(l.Activity))
		}
		controllers.RunAll(ctx, controllers.Table(store, log, opts...), log)
	})
	go func() {
		cred, err := nodeCredential(runCtx, cfg, node, id, gossipKey)
		if err != nil {
			errc <- err
			return
		}
		acfg := cfg.Agent
		acfg.Credential, acfg.Role, acfg.Address, acfg.DataDir = cred, gossip.RoleServer, cfg.Address.String(), cfg.DataDir
		acfg.Gossip, acfg.Fallback, acfg.KubeVersion, acfg.Logger, acfg.Registerer = g, []string{cfg.APIAdvertise}, apiserver.KubeVersion, log, reg
		errc <- agent.Run(runCtx, acfg)
	}()
	log.Info("cluster: server running", "name", cfg.Name, "member", fmt.Sprintf("%x", node.ID()),
		"api", "https://"+cfg.APIAdvertise, "raft", cfg.RaftAddr)
	if boot.NewCluster {
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

func shutdown(srv *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
}

// establishIdentity loads the identity of a restarting server, creates the
// one of a new cluster, or fetches it from the cluster being joined.
func establishIdentity(ctx context.Context, cfg Config, storeDir string) (Identity, raft.Bootstrap, error) {
	var boot raft.Bootstrap
	if raft.HasMember(storeDir) {
		id, err := LoadIdentity(cfg.DataDir)
		return id, boot, err
	}
	switch {
	case cfg.Init:
		id, err := newIdentity(time.Now())
		if err != nil {
			return id, boot, fmt.Errorf("cluster: new CA: %w", err)
		}
		if err := saveIdentity(cfg.DataDir, id); err != nil {
			return id, boot, fmt.Errorf("cluster: %w", err)
		}
		boot.NewCluster = true
		return id, boot, nil
	case len(cfg.Join) > 0 || cfg.Token != "" && cfg.MDNS:
		id, info, err := joinCluster(ctx, cfg)
		if err != nil {
			return id, boot, fmt.Errorf("cluster: %w", err)
		}
		boot.Join = info
		return id, boot, nil
	}
	return Identity{}, boot, fmt.Errorf("cluster: %s holds no server yet: start a new cluster with --init or join one with --token T (and --join ADDR, unless the cluster is found by mDNS)", cfg.DataDir)
}

// joinCluster finds the servers through the gossip of any board at
// cfg.Join and asks one to add this server as a store learner; it saves
// the cluster identity and the board's node credential.
func joinCluster(ctx context.Context, cfg Config) (Identity, *raft.JoinInfo, error) {
	tok, err := wire.ParseToken(cfg.Token)
	if err != nil {
		return Identity{}, nil, fmt.Errorf("--token: %w", err)
	}
	key, err := gossip.DeriveKey(tok.Secret)
	if err != nil {
		return Identity{}, nil, err
	}
	if len(cfg.Join) == 0 {
		if cfg.Join, err = gossip.FindOnLAN(ctx, cfg.Address, tok.CAHash, cfg.Logger); err != nil {
			return Identity{}, nil, err
		}
	}
	found, err := gossip.DiscoverRetry(ctx, cfg.Address, key, cfg.Join, cfg.Logger)
	if err != nil {
		return Identity{}, nil, fmt.Errorf("join: %w", err)
	}
	jctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	resp, err := bootstrap.NewClient(tok).Join(jctx, bootstrap.APIAddrs(found),
		wire.JoinRequest{Name: cfg.Name, Role: wire.RoleServer, RaftAddr: cfg.RaftAddr, APIAddr: cfg.APIAdvertise}, "")
	if err != nil {
		return Identity{}, nil, err
	}
	if resp.Join == nil || resp.NodeToken == "" {
		return Identity{}, nil, errors.New("join: the server's answer lacks the store's join information or the node credential")
	}
	keyPEM, err := pki.Open(resp.CAKeySealed, tok.Secret, pki.InfoCAKey)
	if err != nil {
		return Identity{}, nil, fmt.Errorf("join: %w", err)
	}
	ca, err := pki.ParseCA(resp.CACert, keyPEM)
	if err != nil {
		return Identity{}, nil, fmt.Errorf("join: %w", err)
	}
	id := Identity{Token: tok, CA: ca}
	if err := saveIdentity(cfg.DataDir, id); err != nil {
		return id, nil, err
	}
	cred := wire.Credential{Name: cfg.Name, NodeToken: resp.NodeToken, CACert: resp.CACert, GossipKey: key, Servers: serverGossipAddrs(found)}
	if err := cred.Save(cfg.DataDir); err != nil {
		return id, nil, err
	}
	return id, resp.Join, nil
}

func serverGossipAddrs(members []gossip.Member) []string {
	var out []string
	for _, m := range members {
		if m.Role == gossip.RoleServer {
			out = append(out, m.Addr.String())
		}
	}
	return out
}

// nodeCredential returns the server's node credential; the first server of
// a cluster issues its own once the store has a leader.
func nodeCredential(ctx context.Context, cfg Config, node *raft.Node, id Identity, gossipKey []byte) (wire.Credential, error) {
	cred, ok, err := wire.LoadCredential(cfg.DataDir)
	if err != nil || ok {
		return cred, err
	}
	for {
		token, err := issueNodeToken(ctx, node, cfg.Name)
		if err == nil {
			cred = wire.Credential{Name: cfg.Name, NodeToken: token, CACert: id.CA.CertPEM, GossipKey: gossipKey}
			return cred, cred.Save(cfg.DataDir)
		}
		if errors.Is(err, errNameTaken) {
			return cred, fmt.Errorf("cluster: this server's node credential is lost (%s/%s) and its name is taken: remove the board (isle member remove %s) and join it again", cfg.DataDir, wire.CredentialFile, cfg.Name)
		}
		select {
		case <-ctx.Done():
			return cred, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// joinGossip joins the gossip through the boards this server knows: the
// addresses it was started with, the servers it saw last, and the other
// store members (on the same gossip port). It retries until one answers.
func joinGossip(ctx context.Context, g *gossip.Gossip, node *raft.Node, cfg Config, log *slog.Logger) {
	for attempt := 0; ; attempt++ {
		seeds := slices.Clone(cfg.Join)
		if cred, ok, _ := wire.LoadCredential(cfg.DataDir); ok {
			seeds = append(seeds, cred.Servers...)
		}
		for _, m := range node.Members() {
			if host, _, err := net.SplitHostPort(m.RaftAddr); err == nil && m.ID != node.ID() {
				seeds = append(seeds, net.JoinHostPort(host, strconv.Itoa(cfg.GossipPort)))
			}
		}
		self := netip.AddrPortFrom(cfg.Address, uint16(cfg.GossipPort)).String()
		seeds = slices.DeleteFunc(seeds, func(s string) bool { return s == self })
		slices.Sort(seeds)
		seeds = slices.Compact(seeds)
		if len(seeds) == 0 {
			return // the only board so far: the others will join it
		}
		if _, err := g.Join(seeds); err == nil {
			return
		} else if attempt%10 == 0 {
			log.Warn("cluster: no board answered gossip yet; retrying", "seeds", seeds, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
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
	// Every server also answers to the kubernetes Service's names, which
	// boards use to verify whichever server they reach.
	names = append(names, cfg.Name, "kubernetes", "kubernetes.default", agent.APIServerName, agent.APIServerName+".cluster.local")
	first := cfg.ServiceCIDR.Addr().Next() // the kubernetes Service
	ips = append(ips, net.IP(first.AsSlice()))
	if cfg.VIP.IsValid() {
		ips = append(ips, net.IP(cfg.VIP.AsSlice()))
	}
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

func apiPort(hostPort string) string {
	_, port, _ := net.SplitHostPort(hostPort)
	return port
}

// listenFreebind listens on an address the board may not hold yet.
func listenFreebind(addr string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_FREEBIND, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	return lc.Listen(context.Background(), "tcp", addr)
}
