// Package board assembles a board, the one place that joins control/ and
// node/: an agent board is gossip, the join to the cluster, the node agent,
// its LEDs and its metrics; a server board is the same plus the control
// plane (package cluster), which learns of the boards through its own
// interface (cluster.Boards). Command isle turns flags into a Config.
package board

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/isle-cluster/isle/control/apiserver"
	"github.com/isle-cluster/isle/control/cluster"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/hw"
	"github.com/isle-cluster/isle/hw/clock"
	"github.com/isle-cluster/isle/hw/pageout"
	"github.com/isle-cluster/isle/node/agent"
	"github.com/isle-cluster/isle/node/bootstrap"
	"github.com/isle-cluster/isle/node/gossip"
)

// Config configures a board.
type Config struct {
	// DataDir holds the board's node credential and, on a server, the
	// store and the cluster identity.
	DataDir string
	// Name is the board's name (its Node's). NameGiven says it was given,
	// not taken from the hostname: an agent then refuses a data directory
	// of another name.
	Name      string
	NameGiven bool
	// Init starts a new cluster (a server only); Join (gossip addresses,
	// host or host:port, of any boards of the cluster) with Token joins
	// one, found on the LAN by mDNS without Join. A board that has joined
	// already restarts and ignores all three.
	Init  bool
	Join  []string
	Token string
	// Address is the board's IP: gossip binds it (port GossipPort) and its
	// Node reports it.
	Address    netip.Addr
	GossipPort int
	// MDNS advertises the cluster on the board's LAN and, with a Token but
	// no Join, finds it there.
	MDNS bool
	// MetricsAddr serves the board's /metrics (empty: not served; a server
	// serves them on its store address).
	MetricsAddr string
	// Version and Commit of isle.
	Version, Commit string
	Logger          *slog.Logger
	// Clock is the board's clock, set by the servers' before the board
	// checks certificates, and saved at a clean stop (package clock).
	// Default: clock.System().
	Clock *clock.Clock
	// Agent holds the settings of the board's node agent (how it runs
	// pods); its identity, addresses and logger are filled in here.
	Agent agent.Config
	// Server, if not nil, makes a server board: the control plane's
	// settings. Its name, data directory, identity, store bootstrap, gossip
	// key, metrics, logger and hooks are filled in here.
	Server *cluster.Config
}

// Run runs the board until ctx ends or it fails.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System()
	}
	var err error
	if cfg.Server != nil {
		err = runServer(ctx, cfg)
	} else {
		err = runAgent(ctx, cfg)
	}
	if err == nil {
		// A clean stop: the next start, maybe without network time, is
		// not before now.
		if serr := clock.Save(cfg.DataDir, cfg.Clock.Now()); serr != nil {
			cfg.Logger.Warn("clock: the time is not saved", "err", serr)
		}
	}
	return err
}

// runAgent runs an agent board: a new one joins the cluster first.
func runAgent(ctx context.Context, cfg Config) error {
	log := cfg.Logger
	cred, joined, err := wire.LoadCredential(cfg.DataDir)
	if err != nil {
		return err
	}
	newBoard := false
	switch {
	case joined && cfg.NameGiven && cred.Name != cfg.Name:
		return fmt.Errorf("agent: %s belongs to the node %q, not %q: use --name %s, or another --data-dir", cfg.DataDir, cred.Name, cfg.Name, cred.Name)
	case !joined && cfg.Token == "":
		return errors.New("agent: this board has not joined a cluster yet: give --token T (and --join ADDR of any board, unless the cluster is found by mDNS)")
	case !joined:
		newBoard = true
		_, _, cred, err = join(ctx, cfg, wire.JoinRequest{Name: cfg.Name, Role: wire.RoleAgent, Release: wire.Release})
		if err != nil {
			return fmt.Errorf("agent: %w", err)
		}
		if err := cred.Save(cfg.DataDir); err != nil {
			return err
		}
	}

	facts, err := hw.Read()
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	reg := newRegistry()
	ca, err := wire.ParseCertPEM(cred.CACert)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	g, stop, err := startGossip(cfg, gossip.Meta{Name: cred.Name, Role: gossip.RoleAgent, Arch: facts.Platform(), Version: cfg.Version},
		cred.GossipKey, credentialCAHash(cfg.DataDir, wire.CAHash(ca)), reg)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	defer stop()
	seeds := func() []string { return append(slices.Clone(cfg.Join), cred.Servers...) }
	switch {
	case newBoard:
		// It has just talked to a server, whose gossip answers.
		if !joinGossip(ctx, g, cfg, seeds, 0) {
			return nil
		}
		go keepGossip(ctx, g, cfg, seeds, rejoinEvery)
		log.Info("agent: in the cluster's gossip", "name", cred.Name, "members", len(g.Members()))
	case joinGossip(ctx, g, cfg, seeds, 1):
		go keepGossip(ctx, g, cfg, seeds, rejoinEvery)
		log.Info("agent: in the cluster's gossip", "name", cred.Name, "members", len(g.Members()))
	default:
		// After a power cut of the whole cluster the boards come up in
		// any order: a board that has been in the cluster goes on without
		// its servers (it adopts its containers, serves its streams,
		// shows its LEDs) and joins the gossip once one answers.
		log.Warn("agent: no server answers yet; the board starts without them and joins them when one answers")
		go func() {
			if joinGossip(ctx, g, cfg, seeds, 0) {
				log.Info("agent: in the cluster's gossip", "name", cred.Name, "members", len(g.Members()))
				keepGossip(ctx, g, cfg, seeds, rejoinEvery)
			}
		}()
	}
	// A new board set its clock as it joined.
	if !newBoard && !settleClock(ctx, cfg, wire.CAHash(ca), bootstrap.APIAddrs(g.Members()), ca) {
		go askTimeUntilTold(ctx, cfg, wire.CAHash(ca), g, "", askTimeEvery)
	}
	// The agent runs a fraction of the binary the servers run: what it
	// touched to start, or touches rarely, leaves its resident set.
	go pageout.Run(ctx, releaseAfter, releaseEvery, log)
	return runNode(ctx, cfg, cred, gossip.RoleAgent, g, reg, nil)
}

// A board gives back the pages of its binary it no longer uses (package
// pageout) once it has started (an agent's Node registered and its pods
// adopted; a server's store and API up), and every minute after: the
// pages it uses come back one fault each (a microsecond or two from the
// page cache, no read of the SD card), a few thousand a minute, and those
// of rare work (a burst of pod starts, a leader's first reconcile) leave
// again. A server too runs far less of the binary than it touched to
// start: make bench-scale, 10 boards, 300 pods: 35 MiB of its file pages
// resident before, 9 MiB a minute after, with the same API latencies.
const (
	releaseAfter = 30 * time.Second
	releaseEvery = time.Minute
)

func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	// Beside the MemStats, the heap the last collection found live
	// (go_gc_heap_live_bytes): what the heap in use is measured against.
	live := collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)}
	reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(live)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// startGossip starts the board's gossip member, with key, and what goes
// with it: the /metrics of reg on cfg.MetricsAddr, and the advertisement
// of the cluster of CA caHash on the LAN. stop leaves the gossip and
// stops the rest.
func startGossip(cfg Config, meta gossip.Meta, key []byte, caHash func() string, reg *prometheus.Registry) (g *gossip.Gossip, stop func(), err error) {
	log := cfg.Logger
	g, err = gossip.Start(gossip.Config{Meta: meta, Addr: cfg.Address, Port: cfg.GossipPort, Key: key, Logger: log, Registerer: reg})
	if err != nil {
		return nil, nil, err
	}
	stops := []func(){func() { _ = g.Leave(2 * time.Second) }}
	stop = func() {
		for _, s := range slices.Backward(stops) {
			s()
		}
	}
	if cfg.MetricsAddr != "" {
		lis, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("--metrics-addr: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(lis) }()
		stops = append(stops, func() { _ = srv.Close() })
	}
	if cfg.MDNS {
		done := make(chan struct{})
		go advertise(done, cfg, meta.Name, caHash)
		stops = append(stops, func() { close(done) })
	}
	return g, stop, nil
}

// advertiseEvery is how often a board looks whether the CA hash it
// advertises by mDNS has changed (`isle certs rotate-ca`).
const advertiseEvery = 10 * time.Second

// advertise advertises the cluster of the CA caHash returns by mDNS on
// the LAN, anew when that changes, until done is closed.
func advertise(done <-chan struct{}, cfg Config, name string, caHash func() string) {
	hash := caHash()
	stop := gossip.AdvertiseOnLAN(name, cfg.Address, cfg.GossipPort, hash, cfg.Logger)
	t := time.NewTicker(advertiseEvery)
	defer t.Stop()
	for {
		select {
		case <-done:
			if stop != nil {
				stop()
			}
			return
		case <-t.C:
		}
		if h := caHash(); h != hash {
			if stop != nil {
				stop()
			}
			hash, stop = h, gossip.AdvertiseOnLAN(name, cfg.Address, cfg.GossipPort, h, cfg.Logger)
			cfg.Logger.Info("board: the cluster's CA changed; advertised by mDNS under its new hash", "ca", h)
		}
	}
}

// credentialCAHash is the hash of the signing CA of the credential in
// dataDir (the first of its bundle), or else fallback.
func credentialCAHash(dataDir, fallback string) func() string {
	return func() string {
		cred, ok, err := wire.LoadCredential(dataDir)
		if err != nil || !ok {
			return fallback
		}
		ca, err := wire.ParseCertPEM(cred.CACert)
		if err != nil {
			return fallback
		}
		return wire.CAHash(ca)
	}
}

// joinGossip joins the gossip through the boards seeds gives (asked again
// on each attempt, less the board itself) and retries every second until
// one answers, or tries attempts times if that is above 0; it reports
// false if none answered before ctx ended or the attempts ran out. With
// no seed it is done at once: the board is the only one so far, the
// others join it.
func joinGossip(ctx context.Context, g *gossip.Gossip, cfg Config, seeds func() []string, attempts int) bool {
	self := netip.AddrPortFrom(cfg.Address, uint16(cfg.GossipPort)).String()
	for attempt := 0; attempts <= 0 || attempt < attempts; attempt++ {
		s := slices.DeleteFunc(seeds(), func(s string) bool { return s == self })
		slices.Sort(s)
		s = slices.Compact(s)
		if len(s) == 0 {
			return true
		}
		_, err := g.Join(s)
		if err == nil {
			return true
		}
		if attempt%10 == 0 {
			cfg.Logger.Warn("board: no board answered gossip yet; retrying", "seeds", s, "err", err)
		}
		if attempt+1 == attempts {
			break
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Second):
		}
	}
	return false
}

// rejoinEvery is how often a board looks for servers missing from its
// gossip.
const rejoinEvery = 10 * time.Second

// keepGossip joins the gossip again, every period until ctx ends, through
// the servers the board knows of (the addresses seeds gives, and every
// server it has seen in the gossip) that are not alive members. memberlist
// never calls back a member it declared dead: when every server restarts
// at once, the servers find each other through their seeds but not the
// agents, which would otherwise stay among themselves for good.
func keepGossip(ctx context.Context, g *gossip.Gossip, cfg Config, seeds func() []string, period time.Duration) {
	self := netip.AddrPortFrom(cfg.Address, uint16(cfg.GossipPort))
	known := map[netip.AddrPort]bool{}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, s := range seeds() {
			// Names (a --join host) are left to the first join: a member
			// is known by its address.
			if a, err := netip.ParseAddrPort(s); err == nil {
				known[a] = true
			}
		}
		present := map[netip.AddrPort]bool{}
		for _, m := range g.Members() {
			if m.Role == gossip.RoleServer {
				known[m.Addr] = true
			}
			if m.State == gossip.Alive || m.State == gossip.Suspect {
				present[m.Addr] = true
			}
		}
		var missing []string
		for a := range known {
			if a != self && !present[a] {
				missing = append(missing, a.String())
			}
		}
		if len(missing) == 0 {
			continue
		}
		slices.Sort(missing)
		if n, err := g.Join(missing); n > 0 {
			cfg.Logger.Info("board: joined the gossip again through servers it had lost", "tried", missing, "answered", n)
		} else {
			cfg.Logger.Debug("board: servers missing from the gossip did not answer", "tried", missing, "err", err)
		}
	}
}

// runNode runs the board's node agent with its credential; fallback are
// API addresses to use until gossip shows a server.
func runNode(ctx context.Context, cfg Config, cred wire.Credential, role gossip.Role, g *gossip.Gossip, reg prometheus.Registerer, fallback []string) error {
	acfg := cfg.Agent
	acfg.Credential, acfg.Role, acfg.Address, acfg.DataDir = cred, role, cfg.Address.String(), cfg.DataDir
	acfg.Gossip, acfg.Fallback, acfg.KubeVersion, acfg.Logger, acfg.Registerer = g, fallback, apiserver.KubeVersion, cfg.Logger, reg
	acfg.Now = cfg.Clock.Now
	return agent.Run(ctx, acfg)
}
