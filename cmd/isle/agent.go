package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/isle-cluster/isle/cmd/isle/board"
	"github.com/isle-cluster/isle/node/agent"
	"github.com/isle-cluster/isle/node/gossip"
)

type agentFlags struct {
	join        []string
	token       string
	tokenFile   string
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
	fl.StringVar(&f.token, "token", "", "an agent token (the first server's DATA-DIR/agent-token, or isle token create --agent); on the command line every user of the board sees it: prefer --token-file")
	fl.StringVar(&f.tokenFile, "token-file", "", "file holding the join token, which only its owner may read (mode 0600)")
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
	if err := takeTokenFile(&f.token, f.tokenFile); err != nil {
		return err
	}
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
	warnTokenArgument(os.Args, log)
	tuneAgentRuntime()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	var node agent.Config
	if err := f.node.apply(&node); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if node.LEDs, err = f.node.openLEDs(log); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	defer node.LEDs.Close()
	if err := resolveAddress(ctx, &f.address, log); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	clk, err := boardClock()
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	return board.Run(ctx, board.Config{Agent: node,
		DataDir: f.dataDir, Name: f.name, NameGiven: f.nameGiven, Join: f.join, Token: f.token,
		Address: netip.MustParseAddr(f.address), GossipPort: f.gossipPort, MDNS: f.mdns, MetricsAddr: f.metricsAddr,
		Version: version, Commit: commit, Logger: log, Clock: clk,
	})
}

// agentGCPercent is an agent's GOGC, unless the GOGC variable sets one.
// The agent's live heap is small and steady (~6 MiB with 50 pods), and
// Go's default lets the heap grow by as much again before collecting; the
// agent collects once it has grown by a quarter. make bench-agent (50
// pods, idle): GOGC 100 holds 30.6 MiB resident (21.4 anonymous) for
// 0.45% of a core, 50 26.1 MiB for 0.57%, 25 23.8 MiB (14.8) for 0.65%.
const agentGCPercent = 25

// tuneAgentRuntime sets the agent's GOGC (agentGCPercent) unless the GOGC
// variable has set one, and stops the runtime's heap profile: an agent
// serves no pprof (a server's --debug does), and each allocation stack
// the profile samples stays in memory for good.
func tuneAgentRuntime() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(agentGCPercent)
	}
	runtime.MemProfileRate = 0
}
