package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/storeapi"
	"github.com/isle-cluster/isle/raft/transport"
)

// serverFlags are the flags of `isle server`.
type serverFlags struct {
	init      bool
	join      string
	dataDir   string
	name      string
	raftAddr  string
	storeAddr string
	logLevel  string
}

func newServerCommand() *cobra.Command {
	var f serverFlags
	cmd := &cobra.Command{
		Use:   "server (--init | --join ADDR)",
		Short: "Run a control-plane board: a member of the replicated store",
		Long: `Run a control-plane board. The first board starts the cluster with --init;
the others join it with --join, giving the store address of any member. A data
directory that already holds a member restarts it: --init and --join are then
ignored, so the same command line works after a reboot.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runServer(cmd.Context(), f) },
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.init, "init", false, "start a new cluster with this board as its first member")
	fl.StringVar(&f.join, "join", "", "store address (host:port) of any member of the cluster to join")
	fl.StringVar(&f.dataDir, "data-dir", "/var/lib/isle", "directory for the store's log and snapshots")
	fl.StringVar(&f.name, "name", "", "member name (default: the hostname)")
	fl.StringVar(&f.raftAddr, "raft-addr", "127.0.0.1:6445", "address for raft traffic between members (host:port, advertised to peers)")
	fl.StringVar(&f.storeAddr, "store-addr", "127.0.0.1:6444", "address of the store API and /metrics (host:port)")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	return cmd
}

func (f *serverFlags) validate() error {
	if f.name == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("--name: not given and the hostname is unknown: %w", err)
		}
		f.name = h
	}
	for flag, addr := range map[string]string{"--raft-addr": f.raftAddr, "--store-addr": f.storeAddr} {
		host, port, err := net.SplitHostPort(addr)
		if err != nil || port == "" || port == "0" {
			return fmt.Errorf("%s %q: want host:port with a fixed port", flag, addr)
		}
		if flag == "--raft-addr" && (host == "" || net.ParseIP(host).IsUnspecified()) {
			return fmt.Errorf("--raft-addr %q: peers dial this address, so give the board's own address, not a wildcard", addr)
		}
	}
	if f.init && f.join != "" {
		return errors.New("--init and --join: give one, not both")
	}
	return nil
}

func runServer(ctx context.Context, f serverFlags) error {
	if err := f.validate(); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	log, err := newLogger(f.logLevel)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	storeDir := filepath.Join(f.dataDir, "store")
	boot := raft.Bootstrap{NewCluster: f.init}
	joining := false
	if !raft.HasMember(storeDir) {
		switch {
		case f.join != "":
			info, err := joinCluster(ctx, f)
			if err != nil {
				return err
			}
			boot.Join, joining = &info, true
		case !f.init:
			return fmt.Errorf("server: %s holds no member yet: start a new cluster with --init or join one with --join ADDR", storeDir)
		}
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	node, err := raft.Open(raft.Config{
		DataDir: storeDir, Name: f.name, RaftAddr: f.raftAddr, ClientAddr: f.storeAddr,
		Logger: log, Registerer: reg,
	}, boot)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	lis, err := net.Listen("tcp", f.raftAddr)
	if err != nil {
		node.Stop()
		return fmt.Errorf("server: listen for raft on %s: %w", f.raftAddr, err)
	}
	tr, err := transport.New(transport.Config{
		ID: node.ID(), ClusterID: node.ClusterID(), Listener: lis, Handler: node,
		Logger: log, Registerer: reg,
	})
	if err != nil {
		lis.Close()
		node.Stop()
		return fmt.Errorf("server: %w", err)
	}
	tr.Start()
	node.Start(tr)

	mux := http.NewServeMux()
	mux.Handle("/store/", storeapi.Handler(node, log))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Addr: f.storeAddr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.ListenAndServe() }()
	log.Info("server: store member running", "name", f.name, "id", fmt.Sprintf("%x", node.ID()),
		"cluster", fmt.Sprintf("%x", node.ClusterID()), "raft", f.raftAddr, "store", f.storeAddr)
	if joining {
		go promoteSelf(ctx, node, log)
	}

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("server: stopping")
	case <-node.Done():
		runErr = node.Err()
	case err := <-srvErr:
		runErr = fmt.Errorf("server: store API on %s: %w", f.storeAddr, err)
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutCtx)
	node.Stop()
	_ = tr.Close()
	if runErr == nil {
		runErr = node.Err()
	}
	if runErr != nil {
		return fmt.Errorf("server: %w", runErr)
	}
	return nil
}

// joinCluster asks a member to add this board as a learner.
func joinCluster(ctx context.Context, f serverFlags) (raft.JoinInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c := storeapi.NewClient(f.join, nil)
	info, err := c.AddMember(ctx, storeapi.AddMemberRequest{Name: f.name, RaftAddr: f.raftAddr, ClientAddr: f.storeAddr})
	if err != nil {
		return info, fmt.Errorf("server: join the cluster through %s: %w", f.join, err)
	}
	return info, nil
}
