package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/isle-cluster/isle/cmd/isle/board"
	"github.com/isle-cluster/isle/control/cluster"
	"github.com/isle-cluster/isle/hw"
	"github.com/isle-cluster/isle/node/agent"
	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/storeapi"
)

// serverFlags are the flags of `isle server`.
type serverFlags struct {
	init            bool
	join            []string
	token           string
	tokenFile       string
	gossipPort      int
	removeDeadAfter time.Duration
	nodeGrace       time.Duration
	mdns            bool
	vip             string
	dataDir         string
	name            string
	address         string
	apiPort         int
	raftPort        int
	storeAddr       string // gone: warned of
	adminSocket     string
	debug           bool
	metricsAddr     string
	logLevel        string
	memLimit        string
	snapshot        cluster.SnapshotTuning
	certValidity    time.Duration
	backups         cluster.BackupSchedule
	forceNewCluster bool
	node            nodeFlags
}

func newServerCommand() *cobra.Command {
	var f serverFlags
	cmd := &cobra.Command{
		Use:   "server (--init | --join ADDR --token T)",
		Short: "Run a control-plane board: store member and Kubernetes API server",
		Long: `Run a control-plane board: a member of the replicated store and a
Kubernetes API server (HTTPS on --api-port).

The first board starts the cluster with --init; it keeps the server token in
DATA-DIR/token and an agent token in DATA-DIR/agent-token (never printed or
logged). The other servers join with --join, giving the address of any board
of the cluster (server or agent; its gossip port 7946 if no port is given),
and the server token. The first three servers vote in the store; further ones
are standbys that replace a removed voter. A data directory that
already holds a server restarts it: --init, --join and --token are then
ignored, so the same command line works after a reboot.`,
		Args:    cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error { return applyConfigFile(cmd) },
		RunE:    func(cmd *cobra.Command, _ []string) error { return runServer(cmd.Context(), f) },
	}
	addConfigFlag(cmd)
	fl := cmd.Flags()
	fl.BoolVar(&f.init, "init", false, "start a new cluster with this board as its first server")
	fl.StringSliceVar(&f.join, "join", nil, "address (host or host:port) of any board of the cluster to join; repeat or separate with commas for more")
	fl.StringVar(&f.token, "token", "", "the server token (in the first server's DATA-DIR/token); on the command line every user of the board sees it: prefer --token-file")
	fl.StringVar(&f.tokenFile, "token-file", "", "file holding the server token, which only its owner may read (mode 0600)")
	fl.StringVar(&f.dataDir, "data-dir", "/var/lib/isle", "directory for the store and the cluster's keys")
	fl.StringVar(&f.name, "name", "", "server name (default: the hostname)")
	fl.StringVar(&f.address, "address", "127.0.0.1", "this board's address, which the other boards reach it at; auto: the address of the interface of its default route")
	fl.IntVar(&f.apiPort, "api-port", 6443, "port of the Kubernetes API (HTTPS)")
	fl.IntVar(&f.raftPort, "raft-port", 6445, "port for raft traffic between servers")
	fl.IntVar(&f.gossipPort, "gossip-port", 7946, "port of the gossip between boards (TCP and UDP)")
	fl.StringVar(&f.vip, "vip", "", "a free IPv4 address on the boards' LAN that the store leader holds (announced by gratuitous ARP) and serves the API on: one kubeconfig address for all servers; empty: off")
	fl.BoolVar(&f.mdns, "mdns", true, "advertise the cluster by multicast DNS on the LAN interface of --address, and find it there when joining without --join")
	fl.DurationVar(&f.nodeGrace, "node-monitor-grace-period", 40*time.Second, "how long a new leader waits to hear a board in gossip before it marks its Node NotReady")
	fl.DurationVar(&f.removeDeadAfter, "remove-dead-after", 0, "remove a voting server whose board has been dead this long, so a standby takes its place (0: never; use isle member remove)")
	fl.StringVar(&f.adminSocket, "admin-socket", "", "unix socket of the server's administration API (isle store, isle snapshot save, isle certs rotate-ca), which only root may open (default: RUN-DIR/"+adminSocketName+")")
	fl.BoolVar(&f.debug, "debug", false, "also serve the store's keys and /debug/pprof on the admin socket (they go past every check of the API server)")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "address (host:port) to serve Prometheus /metrics on, such as 127.0.0.1:10249; empty: off")
	fl.StringVar(&f.storeAddr, "store-addr", "", "gone: the administration API is --admin-socket, /metrics --metrics-addr")
	_ = fl.MarkHidden("store-addr")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fl.StringVar(&f.memLimit, "memory-limit", "auto", "soft limit of the Go runtime's memory, such as 128Mi (the garbage collector works harder near it, so that the server leaves the board's memory to its pods); auto: a quarter of the board's memory, unless GOMEMLIMIT is set; 0: none")
	fl.Uint64Var(&f.snapshot.Entries, "snapshot-entries", 0, "snapshot the store after this many writes (0: 100000, or sooner by size)")
	fl.Uint64Var(&f.snapshot.CatchUpEntries, "snapshot-catchup-entries", 0, "writes kept in memory after a snapshot for slow servers (0: 1000)")
	// For tests of certificate renewal only: lifetimes of minutes.
	fl.DurationVar(&f.certValidity, "cert-validity", 0, "validity of the certificates this server issues (0: a year); for tests of their renewal")
	_ = fl.MarkHidden("cert-validity")
	fl.StringVar(&f.backups.Dir, "snapshot-dir", "", "directory to write scheduled backups of the cluster to (a USB stick, say); empty: none (see isle snapshot)")
	fl.DurationVar(&f.backups.Interval, "snapshot-interval", 12*time.Hour, "time between two scheduled backups")
	fl.IntVar(&f.backups.Keep, "snapshot-keep", 5, "scheduled backups of this server kept in --snapshot-dir (older ones are removed)")
	fl.BoolVar(&f.forceNewCluster, "force-new-cluster", false, "recover the last surviving server after the store lost its quorum for good: it becomes the only store member of a new cluster with what it had committed; remove the flag once it runs, and empty the lost servers before they join again")
	f.node.add(fl)
	return cmd
}

func (f *serverFlags) validate() error {
	if err := takeTokenFile(&f.token, f.tokenFile); err != nil {
		return err
	}
	if err := checkBoard(&f.name, &f.address); err != nil {
		return err
	}
	for flag, p := range map[string]int{"--api-port": f.apiPort, "--raft-port": f.raftPort, "--gossip-port": f.gossipPort} {
		if p < 1 || p > 65535 {
			return fmt.Errorf("%s %d: want a port from 1 to 65535", flag, p)
		}
	}
	if _, err := memoryLimit(f.memLimit, 0); err != nil {
		return err
	}
	if f.apiPort == f.raftPort {
		return fmt.Errorf("--api-port and --raft-port are both %d: give two ports", f.apiPort)
	}
	if f.removeDeadAfter < 0 || f.removeDeadAfter > 0 && f.removeDeadAfter < 10*time.Second {
		return fmt.Errorf("--remove-dead-after %v: want 0 (never) or at least 10s, so a reboot is not taken for a death", f.removeDeadAfter)
	}
	if f.certValidity != 0 && f.certValidity < 10*time.Second {
		return fmt.Errorf("--cert-validity %v: want 0 (a year) or at least 10s", f.certValidity)
	}
	if f.backups.Interval < time.Second {
		return fmt.Errorf("--snapshot-interval %v: want at least 1s", f.backups.Interval)
	}
	if f.backups.Keep < 1 {
		return fmt.Errorf("--snapshot-keep %d: want at least 1", f.backups.Keep)
	}
	if f.nodeGrace < time.Second {
		return fmt.Errorf("--node-monitor-grace-period %v: want at least 1s", f.nodeGrace)
	}
	if f.vip != "" {
		if ip, err := netip.ParseAddr(f.vip); err != nil || !ip.Is4() || ip.IsUnspecified() || ip.IsLoopback() || ip.String() == f.address {
			return fmt.Errorf("--vip %q: want a free IPv4 address on the boards' LAN, not the board's own", f.vip)
		}
	}
	if err := checkJoinAddrs(f.join); err != nil {
		return err
	}
	if f.metricsAddr != "" {
		if _, port, err := net.SplitHostPort(f.metricsAddr); err != nil || port == "" || port == "0" {
			return fmt.Errorf("--metrics-addr %q: want host:port with a fixed port", f.metricsAddr)
		}
	}
	if f.adminSocket != "" && !filepath.IsAbs(f.adminSocket) {
		return fmt.Errorf("--admin-socket %q: want an absolute path", f.adminSocket)
	}
	switch {
	case f.init && len(f.join) > 0:
		return fmt.Errorf("--init and --join: give one, not both")
	case !f.init && len(f.join) == 0 && f.token != "" && !f.mdns:
		return fmt.Errorf("--token without --join needs --mdns to find the cluster: give --join ADDR of any board")
	case len(f.join) > 0 && f.token == "":
		return fmt.Errorf("--join needs --token (--token-file: the first server keeps it in its DATA-DIR/token)")
	}
	return f.node.apply(&agent.Config{})
}

func runServer(ctx context.Context, f serverFlags) error {
	if err := f.validate(); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	log, err := newLogger(f.logLevel)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	warnTokenArgument(os.Args, log)
	tuneServerRuntime(f.debug)
	if err := setMemoryLimit(f.memLimit, log); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	hostPort := func(p int) string { return net.JoinHostPort(f.address, strconv.Itoa(p)) }
	var node agent.Config
	if err := f.node.apply(&node); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if node.LEDs, err = f.node.openLEDs(log); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	defer node.LEDs.Close()
	if err := resolveAddress(ctx, &f.address, log); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	clk, err := boardClock()
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if f.storeAddr != "" {
		log.Warn("--store-addr is no longer served: the administration API is the unix socket --admin-socket, /metrics is on --metrics-addr; ignored", "store-addr", f.storeAddr)
	}
	if f.adminSocket == "" {
		f.adminSocket = filepath.Join(f.node.runDir, adminSocketName)
	}
	if f.vip == f.address {
		return fmt.Errorf("server: --vip %s is this board's own address: want a free IPv4 address on the boards' LAN", f.vip)
	}
	return board.Run(ctx, board.Config{Agent: node,
		DataDir: f.dataDir, Name: f.name, Init: f.init, Join: f.join, Token: f.token,
		Address: netip.MustParseAddr(f.address), GossipPort: f.gossipPort, MDNS: f.mdns, MetricsAddr: f.metricsAddr,
		Version: version, Commit: commit, Logger: log, Clock: clk,
		Server: &cluster.Config{
			RemoveDeadAfter: f.removeDeadAfter, NodeGrace: f.nodeGrace, VIP: optionalAddr(f.vip),
			RaftAddr: hostPort(f.raftPort), APIAddr: hostPort(f.apiPort), AdminSocket: f.adminSocket, Debug: f.debug, Snapshot: f.snapshot,
			LeafValidity: f.certValidity,
			Backups:      f.backups, Boot: raft.Bootstrap{ForceNewCluster: f.forceNewCluster},
		},
	})
}

// adminSocketName is the admin socket's name in the run directory.
const adminSocketName = "admin.sock"

// defaultAdminSocket is where the commands that ask a server find it.
const defaultAdminSocket = "/run/isle/" + adminSocketName

// adminSocketFlag adds --socket, the admin socket of the server to ask.
func adminSocketFlag(fl *pflag.FlagSet, socket *string) {
	fl.StringVar(socket, "socket", defaultAdminSocket, "admin socket of the server to ask (its --admin-socket; run as root)")
}

// adminDo asks the server's admin API at socket for path, with body (JSON;
// nil: none), and returns the answer's status and body.
func adminDo(ctx context.Context, method, socket, path string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://isle"+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Transport: storeapi.UnixTransport(socket)}).Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%w (is a server running here, with its admin socket at %s? it takes root)", err, socket)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<30))
	return resp.StatusCode, b, err
}

// adminJSON asks the server's admin API at socket for path and decodes
// its JSON answer into out (nil: ignored); an error answer comes back as
// the server worded it, prefixed with op.
func adminJSON(ctx context.Context, op, method, socket, path string, out any) error {
	return adminSend(ctx, op, method, socket, path, nil, out)
}

// adminSend is adminJSON with in, if not nil, sent as JSON.
func adminSend(ctx context.Context, op, method, socket, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	code, b, err := adminDo(ctx, method, socket, path, body)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if code/100 != 2 {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return fmt.Errorf("%s: %s", op, e.Error)
		}
		return fmt.Errorf("%s: HTTP %d: %s", op, code, strings.TrimSpace(string(b)))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s: the server's answer: %w", op, err)
	}
	return nil
}

// checkJoinAddrs checks --join addresses: host or host:port each.
func checkJoinAddrs(addrs []string) error {
	for _, a := range addrs {
		host := a
		if h, port, err := net.SplitHostPort(a); err == nil {
			if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
				return fmt.Errorf("--join %q: port %q is not a port number", a, port)
			}
			host = h
		}
		if host == "" || strings.ContainsAny(host, "/ ") {
			return fmt.Errorf("--join %q: want host or host:port of a board", a)
		}
	}
	return nil
}

// checkBoard checks the flags every board has: --name (default: the
// hostname) and --address, which may be auto (resolveAddress resolves it
// once the LEDs show that isle is starting).
func checkBoard(name, address *string) error {
	if *name == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("--name: not given and the hostname is unknown: %w", err)
		}
		*name = h
	}
	if *address == "auto" {
		return nil
	}
	if ip, err := netip.ParseAddr(*address); err != nil || ip.IsUnspecified() || ip.Zone() != "" {
		return fmt.Errorf("--address %q: want this board's own IP address (other boards dial it), or auto", *address)
	}
	return nil
}

// resolveAddress replaces --address auto by the address of the board's
// default route, waiting for the network to come up.
func resolveAddress(ctx context.Context, address *string, log *slog.Logger) error {
	if *address != "auto" {
		return nil
	}
	a, err := autoAddress(ctx, "/", interfaceIPv4, autoAddressWait, time.Second, log)
	if err != nil {
		return err
	}
	*address = a
	return nil
}

func optionalAddr(s string) netip.Addr {
	a, _ := netip.ParseAddr(s)
	return a
}

// serverGCPercent is a server's GOGC, unless the GOGC variable sets one.
// Go's default lets the heap grow by as much again as the last collection
// found live before the next; a server collects once it has grown by
// half. make bench-scale, the same build with GOGC 100 and 50, two runs
// each: the leader at 10 boards and 300 pods (live heap ~25 MiB) holds 75
// and 77 MiB resident against 60 and 65; at 100 boards and 2,000 pods the
// largest server 184 and 189 against 150 and 156 MiB, for an idle leader
// at 20.4% of a core against 22.4% (followers 2.2% against 2.7%) and 69
// pods bound/s against 59 while the cluster grows.
const serverGCPercent = 50

// tuneServerRuntime sets the server's GOGC (serverGCPercent) unless the
// GOGC variable has set one, and stops the runtime's heap profile unless
// debug (only --debug serves /debug/pprof, and each allocation stack the
// profile samples stays in memory for good).
func tuneServerRuntime(debugging bool) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(serverGCPercent)
	}
	if !debugging {
		runtime.MemProfileRate = 0
	}
}

// setMemoryLimit sets the Go runtime's soft memory limit as --memory-limit
// says: auto is a quarter of the board's memory, unless the GOMEMLIMIT
// variable has set one.
func setMemoryLimit(flag string, log *slog.Logger) error {
	if flag == "auto" && os.Getenv("GOMEMLIMIT") != "" {
		return nil
	}
	var board int64
	if flag == "auto" {
		facts, err := hw.Read()
		if err != nil {
			return fmt.Errorf("--memory-limit auto: %w", err)
		}
		board = facts.Memory
	}
	limit, err := memoryLimit(flag, board)
	if err != nil || limit == 0 {
		return err
	}
	debug.SetMemoryLimit(limit)
	log.Info("server: Go memory limit set", "limit", resource.NewQuantity(limit, resource.BinarySI).String(), "flag", flag)
	return nil
}

// memoryLimit is the limit --memory-limit flag gives on a board of
// boardMemory bytes: a size, 0 for none, or auto for a quarter of the
// board's memory.
func memoryLimit(flag string, boardMemory int64) (int64, error) {
	if flag == "auto" {
		return boardMemory / 4, nil
	}
	q, err := resource.ParseQuantity(flag)
	if err != nil || q.Sign() < 0 {
		return 0, fmt.Errorf("--memory-limit %q: want a size such as 128Mi, auto or 0", flag)
	}
	return q.Value(), nil
}
