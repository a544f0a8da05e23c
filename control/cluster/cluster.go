// Package cluster is a server's control plane: it assembles the replicated
// store (package raft), the API registry and server, the controllers, the
// cluster identity (CA and token), the /isle/v1 endpoints (joins, members,
// node serving certificates), and the work done once on a new cluster
// (namespaces, the kubernetes Service). The board's assembly (cmd/isle/board)
// opens and runs it, and tells it of the boards through Boards.
package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/netutil"
	"golang.org/x/sys/unix"

	"github.com/isle-cluster/isle/control/apiserver"
	"github.com/isle-cluster/isle/control/authz"
	"github.com/isle-cluster/isle/control/controllers"
	"github.com/isle-cluster/isle/control/controllers/caexpiry"
	"github.com/isle-cluster/isle/control/controllers/hpa"
	"github.com/isle-cluster/isle/control/controllers/nodelifecycle"
	"github.com/isle-cluster/isle/control/crd"
	"github.com/isle-cluster/isle/control/events"
	resourcemetrics "github.com/isle-cluster/isle/control/metrics"
	"github.com/isle-cluster/isle/control/pki"
	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/control/scheduler"
	"github.com/isle-cluster/isle/control/webhooks"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/storeapi"
	"github.com/isle-cluster/isle/raft/transport"
)

// Config configures a server's control plane. Zero values take the
// documented defaults.
type Config struct {
	// DataDir holds the store and the cluster identity. Required.
	DataDir string
	// Name is the server's name (its board's hostname). Required.
	Name string
	// DrainVIP, if set, makes the board stop taking new connections on
	// the floating address before a leader that stops hands it on, until
	// undo (the board's vip.Drain).
	DrainVIP func() (undo func())
	// Identity is the cluster's (LoadIdentity, NewIdentity or
	// JoinedIdentity), and Boot how the store starts: a new cluster, a
	// join, or (zero) a restart.
	Identity Identity
	Boot     raft.Bootstrap
	// GossipKey is the key of the boards' gossip, which a joining board
	// is given.
	GossipKey []byte
	// RemoveDeadAfter removes a voter whose board has been dead this long
	// (0: never).
	RemoveDeadAfter time.Duration
	// VIP, if valid, is a floating API address the Raft leader holds (the
	// board's assembly takes and releases it, in Lead): the API is served
	// on it too and the serving certificate names it.
	VIP netip.Addr
	// NodeGrace is how long a new leader waits for a Node's board to show
	// up in gossip before it marks the Node NotReady (0: 40 s).
	NodeGrace time.Duration
	// RaftAddr is host:port for raft traffic, listened on and advertised.
	RaftAddr string
	// APIAddr is host:port the API server listens on; APIAdvertise is the
	// host:port other servers and clients reach it at (default APIAddr).
	APIAddr      string
	APIAdvertise string
	// AdminSocket is the path of the unix socket (mode 0600) of the
	// server's administration API: the store's status and membership,
	// backups (BackupPath), the CA's replacement (CARotationPath); with
	// Debug also the store's keys and /debug/pprof. Empty: not served.
	AdminSocket string
	Debug       bool
	// ServiceCIDR is the range of Service cluster IPs. Default 10.43.0.0/16.
	ServiceCIDR netip.Prefix
	// ClusterDNS is the cluster DNS's Service address (default: ClusterDNS
	// of ServiceCIDR); PodCIDR the range of the Nodes' pod ranges.
	ClusterDNS netip.Addr
	PodCIDR    netip.Prefix
	// Version and Commit of isle, for /version.
	Version, Commit string
	Logger          *slog.Logger
	// Metrics registers the control plane's metrics (the board serves them
	// on its metrics address). Required.
	Metrics *prometheus.Registry
	// Snapshot tunes when the store snapshots (zero values: the store's
	// defaults).
	Snapshot SnapshotTuning
	// Backups schedules backups of the store to files (zero: none).
	Backups BackupSchedule
	// Lead, if set, is called whenever this server becomes the leader,
	// with a context that ends when it stops leading; it must not block.
	Lead func(ctx context.Context)
	// Activity, if set, is called on the controllers' work (an LED blinks).
	Activity func()
	// Now is the board's clock: the time this server tells the boards
	// (wire.TimePath) and issues certificates at. Default time.Now.
	Now func() time.Time
	// LeafValidity is how long the certificates this server issues are
	// valid (0: pki.LeafValidity, a year); tests of their renewal shorten
	// it. They are renewed at three fifths of their life.
	LeafValidity time.Duration
}

// SnapshotTuning tunes the store's snapshots: boards with little memory
// may want them sooner.
type SnapshotTuning struct {
	Entries        uint64 // snapshot after this many entries
	CatchUpEntries uint64 // entries kept in memory after a snapshot
}

// Validate checks the configuration and fills in the defaults.
func (c *Config) Validate() error {
	switch {
	case c.DataDir == "":
		return errors.New("cluster: DataDir is required")
	case c.Name == "":
		return errors.New("cluster: Name is required")
	case c.RaftAddr == "" || c.APIAddr == "":
		return errors.New("cluster: RaftAddr and APIAddr are required")
	case c.Metrics == nil:
		return errors.New("cluster: Metrics is required")
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
	if !c.ClusterDNS.IsValid() {
		c.ClusterDNS = ClusterDNS(c.ServiceCIDR)
	}
	if !c.ServiceCIDR.Contains(c.ClusterDNS) {
		return fmt.Errorf("cluster: cluster DNS address %v is not in the service range %v", c.ClusterDNS, c.ServiceCIDR)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.LeafValidity != 0 && c.LeafValidity < 10*time.Second {
		return fmt.Errorf("cluster: certificate validity %v: want at least 10s", c.LeafValidity)
	}
	return c.Backups.validate()
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

// Server is a control plane whose store is open.
type Server struct {
	cfg     Config
	node    *raft.Node
	tr      *transport.Transport
	raftTLS *raftTLS
	member  *pki.Leaf // the store member certificate
}

// Open opens the store and starts its raft traffic; Run serves the rest.
func Open(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Identity.live = new(atomic.Pointer[wire.Token])
	apiServer := "https://" + cfg.APIAdvertise
	if cfg.VIP.IsValid() {
		apiServer = "https://" + net.JoinHostPort(cfg.VIP.String(), apiPort(cfg.APIAddr))
	}
	if err := saveLocalInfo(cfg.DataDir, localInfo{APIServer: apiServer, LeafValidity: cfg.LeafValidity}); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	// A prepared restore seeds a new store; after a crash that left the
	// store made, it is finished below.
	pending, err := loadRestore(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if pending != nil && !HasServer(cfg.DataDir) {
		cfg.Boot = raft.Bootstrap{NewCluster: true, Seed: pending.state}
	}
	events.RegisterMetrics(cfg.Metrics)
	scheduler.RegisterMetrics(cfg.Metrics)
	node, err := raft.Open(raft.Config{
		DataDir: filepath.Join(cfg.DataDir, storeDirName), Name: cfg.Name, RaftAddr: cfg.RaftAddr, ClientAddr: cfg.APIAdvertise,
		Logger: cfg.Logger, Registerer: cfg.Metrics,
		SnapshotEntries: cfg.Snapshot.Entries, CatchUpEntries: cfg.Snapshot.CatchUpEntries,
	}, cfg.Boot)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	lis, err := net.Listen("tcp", cfg.RaftAddr)
	if err != nil {
		node.Stop()
		return nil, fmt.Errorf("cluster: listen for raft on %s: %w", cfg.RaftAddr, err)
	}
	// The links to the other members are mutual TLS with this member's
	// certificate; plain TCP only while members of a release without TLS
	// remain (rafttls.go). A new store has none.
	rtls := newRaftTLS(node, cfg.DataDir, cfg.Logger)
	if cfg.Boot.NewCluster || cfg.Boot.ForceNewCluster {
		rtls.end()
	}
	cfg.Identity.CA.LeafValidity = cfg.LeafValidity
	member, err := cfg.Identity.CA.MemberLeaf(node.ClusterID(), node.ID(), cfg.Name, cfg.Now)
	if err != nil {
		lis.Close()
		node.Stop()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	tlsCfg, peerID := pki.RaftConfig(cfg.Identity.CA, member, node.ClusterID(), rtls.isMember)
	tr, err := transport.New(transport.Config{ID: node.ID(), ClusterID: node.ClusterID(), Listener: lis, Handler: node, Logger: cfg.Logger, Registerer: cfg.Metrics,
		TLS: tlsCfg, PeerID: peerID, AllowPlain: rtls.allowPlain})
	if err != nil {
		lis.Close()
		node.Stop()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	tr.Start()
	node.Start(tr)
	s := &Server{cfg: cfg, node: node, tr: tr, raftTLS: rtls, member: member}
	if pending != nil {
		if err := s.finishRestore(pending); err != nil {
			s.Close()
			return nil, fmt.Errorf("cluster: %w", err)
		}
	}
	return s, nil
}

// Close stops the store.
func (s *Server) Close() {
	s.tr.Close()
	s.node.Stop()
}

// ID is the server's member ID in the store.
func (s *Server) ID() uint64 { return s.node.ID() }

// Peers are the other store members' raft addresses (host:port).
func (s *Server) Peers() []string {
	var out []string
	for _, m := range s.node.Members() {
		if m.ID != s.node.ID() {
			out = append(out, m.RaftAddr)
		}
	}
	return out
}

// NodeAddrs are the InternalIP addresses of the Nodes in this server's
// copy of the store: where a server that starts looks for the boards'
// gossip, besides the other servers (after a restart of every server the
// agents, which kept running, hold the cluster's gossip).
func (s *Server) NodeAddrs() []string {
	kvs, _, _ := s.node.KV().List(nodesKeyPrefix, "", 0)
	var out []string
	for _, kvp := range kvs {
		var n corev1.Node
		data, err := registry.StoredJSON(kvp.Value)
		if err != nil || json.Unmarshal(data, &n) != nil {
			continue
		}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				out = append(out, a.Address)
			}
		}
	}
	return out
}

// listenAdmin listens on the unix socket at path, which only the owner
// (root) may open; a socket left by a server that crashed is replaced.
func listenAdmin(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), directoryMode); err != nil {
		return nil, fmt.Errorf("cluster: admin socket: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("cluster: admin socket %s: a file that is not a socket is in the way", path)
		}
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("cluster: admin socket %s: another server answers on it (is this data directory's server running already?)", path)
		}
		_ = os.Remove(path)
	}
	// Connecting takes write permission on the socket, which the usual
	// umask gives the owner alone; 0600 then takes read from the rest.
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("cluster: admin socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		lis.Close()
		return nil, fmt.Errorf("cluster: admin socket: %w", err)
	}
	return lis, nil
}

// maxAPIConns bounds the connections an API listener serves at once:
// every board's agent holds one or two, kubectl and controllers a few.
const maxAPIConns = 512

// apiIdleTimeout is how long the API keeps a connection without a request.
const apiIdleTimeout = 90 * time.Second

// nodesKeyPrefix is where the store keeps the Nodes (registry's keys).
const nodesKeyPrefix = "/registry/core/nodes/"

// Run serves the control plane until ctx ends or it fails: the API server,
// the /isle/v1 endpoints, the store's debugging API and, while this server
// leads, the membership upkeep, the initial objects and the controllers.
// boards is what it knows of the boards beyond the store.
func (s *Server) Run(ctx context.Context, boards Boards) error {
	cfg, node, log, reg := s.cfg, s.node, s.cfg.Logger, s.cfg.Metrics
	id := cfg.Identity
	secrets := &secretsKeys{node: node, ca: id.CA, log: log}
	if err := secrets.load(); err != nil {
		log.Warn("cluster: the Secrets' keys are not read yet", "err", err)
	}
	// Values are stored compressed once every store member runs this
	// release, which the end of plain Raft links says (as for the
	// Secrets' keys): an older server would not read them.
	store := registry.New(registry.Config{Node: node, Logger: log, ServiceCIDR: cfg.ServiceCIDR, Secrets: secrets,
		Compress:  s.raftTLS.allCurrent,
		Resources: registry.NewResources(append(registry.Table(), crd.Resource()))})
	// What the boards report of their usage, in memory only: kubectl top and the HPA controller read it.
	usage := resourcemetrics.NewCache(resourcemetrics.Config{Registerer: reg})
	members := &membership{node: node, boards: boards, store: store, log: log, removeDeadAfter: cfg.RemoveDeadAfter}
	id.CA.LeafValidity = cfg.LeafValidity
	serving, servingTLS, err := servingConfig(id, cfg)
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The API server's client certificate for the boards' streaming servers.
	kick := make(chan struct{}, 1)
	nodeClient, err := startCerts(runCtx, cfg, serving, kick)
	if err != nil {
		return err
	}
	rotator := &caRotator{node: node, store: store, id: id, name: cfg.Name, dataDir: cfg.DataDir,
		leaves: []*pki.Leaf{serving, nodeClient, s.member}, kubeconfig: kick, log: log, now: cfg.Now}
	go s.member.Run(runCtx, log)
	serverTok := &serverTokens{node: node, id: id, gossipKey: cfg.GossipKey, dataDir: cfg.DataDir, log: log, now: cfg.Now}
	go serverTok.run(runCtx)
	go secrets.follow(runCtx)
	go s.raftTLS.register(runCtx)
	go rotator.run(runCtx)
	nodeTLS := pki.ClientConfig(id.CA, nodeClient)
	tokens := &tokenKeeper{node: node, ca: id.CA, gossipKey: cfg.GossipKey, now: cfg.Now, log: log}
	certs := &servingCertHandler{ca: id.CA, members: node.Members, log: log, now: cfg.Now,
		nodeOf: func(token string) (string, bool) { return nodeOfToken(node.KV(), token) }}
	// The kinds of the CustomResourceDefinitions, served on every server,
	// and the admission webhooks, called by every server on every write.
	hookClient := webhooks.NewClient(store)
	go crd.NewServer(store, hookClient, log).Run(runCtx)
	hooks := webhooks.NewDispatcher(store, hookClient, log)
	store.SetWebhooks(hooks)
	go hooks.Run(runCtx)
	// Who may do what: kept in memory from the store on every server.
	index := authz.NewIndex(store, log)
	go index.Run(runCtx)
	chain := &authz.Chain{RBAC: &authz.RBAC{Index: index}, Node: &authz.NodeAuthorizer{Index: index, IsServer: func(name string) bool {
		return slices.ContainsFunc(node.Members(), func(m raft.Member) bool { return m.Name == name })
	}}}
	people := &users{node: node, store: store, id: &id, log: log, now: cfg.Now, server: func() string {
		if cfg.VIP.IsValid() {
			return "https://" + net.JoinHostPort(cfg.VIP.String(), apiPort(cfg.APIAddr))
		}
		return "https://" + cfg.APIAdvertise
	}}
	saTok := &saTokens{node: node, ca: id.CA, log: log, now: cfg.Now}
	go saTok.publish(runCtx)
	api := apiserver.New(apiserver.Config{
		Store: store, AdvertiseAddr: cfg.APIAdvertise, Metrics: reg, Logger: log,
		Tokens: nodeTokens(store), Authz: chain, ServiceAccounts: saTok,
		CertRevoked: func(c *x509.Certificate) bool { return revoked(node.KV(), c.SerialNumber.Text(16)) }, IsleVersion: cfg.Version, IsleCommit: cfg.Commit,
		Ready:     func(ctx context.Context) error { return node.Sync(ctx) },
		Extra:     isleHandler(certs, &joinHandler{node: node, id: id, gossipKey: cfg.GossipKey, tokens: tokens, log: log, members: members}),
		NodeLease: members.nodeLease, Usage: usage, NodeTLS: nodeTLS,
	})
	apiLis, err := net.Listen("tcp", cfg.APIAddr)
	if err != nil {
		return fmt.Errorf("cluster: listen for the API on %s: %w", cfg.APIAddr, err)
	}
	// Idle connections close after a while: clients reconnect when they
	// have something to ask, and a flood of idle ones does not stay.
	srv := &http.Server{Handler: api, TLSConfig: servingTLS, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: apiIdleTimeout,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	errc := make(chan error, 3)
	// Connections served at once are bounded (the rest wait to be
	// accepted): each holds memory, and a flood of them would take the
	// board's.
	apiLis = netutil.LimitListener(apiLis, maxAPIConns)
	go func() { errc <- fmt.Errorf("cluster: API server: %w", srv.ServeTLS(apiLis, "", "")) }()
	if cfg.VIP.IsValid() {
		// Bound now, though the address is not here yet (IP_FREEBIND): it
		// serves as soon as this board leads and holds the address.
		vipLis, err := listenFreebind(net.JoinHostPort(cfg.VIP.String(), apiPort(cfg.APIAddr)))
		if err != nil {
			return fmt.Errorf("cluster: listen for the API on the VIP: %w", err)
		}
		vipLis = netutil.LimitListener(vipLis, maxAPIConns)
		go func() { errc <- fmt.Errorf("cluster: API server on the VIP: %w", srv.ServeTLS(vipLis, "", "")) }()
	}
	defer shutdown(srv)
	if cfg.AdminSocket != "" {
		mux := http.NewServeMux()
		mux.Handle("/store/", storeapi.Handler(node, log, cfg.Debug, storeapi.ShowValues(func(key string, value []byte) []byte {
			if out, err := registry.StoredJSON(value); err == nil {
				return out // the JSON of a compressed object; any other value as stored
			}
			return value
		})))
		mux.Handle("GET "+BackupPath, backupHandler(node, id, cfg.Name, log))
		mux.HandleFunc(CARotationPath, rotator.handler)
		mux.Handle(SecretsPath, secrets.handler())
		mux.Handle(SecretsPath+"/", secrets.handler())
		mux.Handle(UsersPath, people.handler())
		mux.Handle(UsersPath+"/", people.handler())
		th := tokens.handler(serverTok)
		mux.Handle(TokensPath, th)
		mux.Handle(TokensPath+"/", th)
		if cfg.Debug {
			// Profiles, for measuring memory and CPU on a board.
			mux.HandleFunc("GET /debug/pprof/", pprof.Index)
			mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		}
		lis, err := listenAdmin(cfg.AdminSocket)
		if err != nil {
			return err
		}
		admin := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { errc <- fmt.Errorf("cluster: admin API on %s: %w", cfg.AdminSocket, admin.Serve(lis)) }()
		defer shutdown(admin)
	}

	go scheduleBackups(runCtx, node, id, cfg.Name, cfg.Backups, log)
	// Leading (the controllers, the floating address) goes on after ctx
	// ends, until handOff has passed it to another server.
	leadCtx, stopLead := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLead()
	go whileLeader(leadCtx, node, func(ctx context.Context) {
		if cfg.Lead != nil {
			cfg.Lead(ctx)
		}
		go members.maintain(ctx)
		go s.raftTLS.maintain(ctx)
		go secrets.maintain(ctx)
		if err := authz.Reconcile(ctx, store); err != nil {
			log.Error("cluster: the bootstrap RBAC policy", "err", err)
		}
		bootstrapObjects(ctx, store, id, cfg.ClusterDNS, log)
		opts := []controllers.Option{controllers.WithHPA(hpa.Config{Metrics: usage}), controllers.WithRootCA(id.CA.BundlePEM),
			controllers.WithCSRSigning(id.CA.SignClientRequest), controllers.WithServiceAccountSecrets(saTok.IssueLegacy),
			controllers.WithCAExpiry(caexpiry.Config{CA: id.CA.Cert}),
			controllers.WithNodeLifecycle(boards, nodelifecycle.Config{Grace: cfg.NodeGrace, PodCIDR: cfg.PodCIDR})}
		if cfg.Activity != nil {
			opts = append(opts, controllers.WithActivity(cfg.Activity))
		}
		controllers.RunAll(ctx, controllers.Table(store, log, opts...), log)
	})
	log.Info("cluster: server running", "name", cfg.Name, "member", fmt.Sprintf("%x", node.ID()),
		"api", "https://"+cfg.APIAdvertise, "raft", cfg.RaftAddr)
	if cfg.Boot.NewCluster {
		go tokens.first(runCtx, cfg.DataDir)
		log.Info("cluster: new cluster started; join agents with the agent token in " + filepath.Join(cfg.DataDir, agentTokenFile) +
			", servers with the server token in " + filepath.Join(cfg.DataDir, tokenFile) + " (readable by root alone; never logged)")
	}

	select {
	case <-ctx.Done():
		log.Info("cluster: stopping")
		handOff(srv, node, cfg.DrainVIP, log)
		return nil
	case <-node.Done():
		return fmt.Errorf("cluster: store stopped: %w", node.Err())
	case err := <-errc:
		return err
	}
}

// NodeCredential returns the server's node credential; the first server of
// a cluster issues its own once the store has a leader.
func (s *Server) NodeCredential(ctx context.Context) (wire.Credential, error) {
	cfg := s.cfg
	cred, ok, err := wire.LoadCredential(cfg.DataDir)
	if err != nil || ok {
		return cred, err
	}
	for {
		token, err := issueNodeToken(ctx, s.node, cfg.Name)
		if err == nil {
			cred = wire.Credential{Name: cfg.Name, NodeToken: token, CACert: cfg.Identity.CA.BundlePEM(), GossipKey: cfg.GossipKey}
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

func shutdown(srv *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
}

// servingConfig issues this server's serving certificate from the CA, and
// serves it renewed.
func servingConfig(id Identity, cfg Config) (*pki.Leaf, *tls.Config, error) {
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
	names = append(names, cfg.Name, "kubernetes", "kubernetes.default", wire.APIServerName, wire.APIServerName+".cluster.local")
	first := cfg.ServiceCIDR.Addr().Next() // the kubernetes Service
	ips = append(ips, net.IP(first.AsSlice()))
	if cfg.VIP.IsValid() {
		ips = append(ips, net.IP(cfg.VIP.AsSlice()))
	}
	leaf, err := id.CA.ServingLeaf(cfg.Name, names, ips, cfg.Now)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: %w", err)
	}
	c, err := pki.ServerConfig(id.CA, leaf)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: %w", err)
	}
	return leaf, c, nil
}

// handOff lets a server that stops (isle upgraded, the board shut down)
// leave without a client noticing: its API closes idle connections and
// closes each of the others after its request (clients reconnect, while
// the floating address still leads here), then a leader hands leadership
// on, which moves the floating address at once instead of after an
// election timeout, and requests in flight get a moment to finish.
func handOff(srv *http.Server, node *raft.Node, drain func() (undo func()), log *slog.Logger) {
	srv.SetKeepAlivesEnabled(false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if node.Leader() != node.ID() {
		return
	}
	// New connections to the floating address wait for the next leader;
	// those this board has accepted finish first.
	if drain != nil {
		undo := drain()
		defer undo()
		time.Sleep(handOffDrain)
	}
	if err := node.HandOff(ctx); err != nil {
		log.Warn("cluster: leadership not handed off before stopping", "err", err)
		return
	}
	log.Info("cluster: leadership handed off", "leader", fmt.Sprintf("%x", node.Leader()))
	time.Sleep(handOffDrain)
}

// handOffDrain is how long a server that handed leadership off keeps
// serving the requests it has.
const handOffDrain = time.Second

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
