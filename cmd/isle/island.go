package main

import (
	"github.com/spf13/cobra"

	"github.com/isle-cluster/isle/node/island"
)

func newUpCommand() *cobra.Command {
	cfg := island.Config{}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run a whole cluster on this machine: every board a network namespace (the island)",
		Long: `Run an island: a whole isle cluster on this Linux machine. Every simulated
board is a network namespace with its own address on a LAN bridge, its own
containerd, data directory and isle process: servers start (the first with
--init) and join, agents join with the token, and the command returns when
every Node is Ready, printing what it made and how to use kubectl.

Images named registry.island/NAME:TAG are pulled from a registry on the
island (10.77.0.1:5000): push yours there. Needs root, containerd, runc,
docker-registry, nftables and the memory cgroup. One island per machine.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Out = cmd.OutOrStdout()
			_, err := island.Up(cmd.Context(), cfg)
			return err
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&cfg.Servers, "servers", 3, "boards that run the control plane (1 to 7)")
	fl.IntVar(&cfg.Agents, "agents", 2, "boards that only run pods (0 to 40)")
	fl.StringVar(&cfg.Dir, "dir", island.DefaultDir, "directory of the island's state, the boards' data and logs")
	fl.StringArrayVar(&cfg.BoardFlags, "board-flag", nil, "a flag for every board's isle, such as --pod-resync=2s; repeat for more")
	fl.StringArrayVar(&cfg.Mirrors, "mirror", nil, "a registry host, such as registry.k8s.io, whose images the boards pull from the island's registry (pushed there as REPO:TAG); repeat for more")
	fl.DurationVar(&cfg.Timeout, "timeout", 0, "how long to wait for every Node to be Ready (0: 2m)")
	return cmd
}

func newDownCommand() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Remove the island: its processes, namespaces, links, routes, mounts and files",
		Long: `Remove everything isle up made, from the state it recorded in DIR: also
after a crash of isle up or of the machine. What is already gone is skipped;
if something cannot be removed, the state is kept and isle down can be run
again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return island.Down(dir, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&dir, "dir", island.DefaultDir, "directory of the island")
	return cmd
}

func newBoardCommand() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "board",
		Short: "Act on one board of the island (stop, start, kill, restart, upgrade, partition, heal) or list them",
	}
	cmd.PersistentFlags().StringVar(&dir, "dir", island.DefaultDir, "directory of the island")
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the island's boards",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return island.List(dir, cmd.OutOrStdout())
		},
	})
	for _, a := range []struct{ action, short string }{
		{island.ActionStop, "Shut a board down: isle and containerd stop, then its power and LAN link go"},
		{island.ActionStart, "Power a board on: a fresh network stack, containerd, then isle"},
		{island.ActionKill, "Pull a board's power: kill -9 of everything of it"},
		{island.ActionRestart, "Kill -9 a board's isle alone and start it again (containerd and the pods keep running)"},
		{island.ActionUpgrade, "Stop a board's isle (SIGTERM) and start it again from this isle binary, as a package upgrade does (containerd and the pods keep running)"},
		{island.ActionPartition, "Cut a board's LAN link (its processes keep running)"},
		{island.ActionHeal, "Plug a partitioned board's LAN link back"},
	} {
		cmd.AddCommand(&cobra.Command{
			Use:   a.action + " NAME",
			Short: a.short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return island.Act(dir, a.action, args[0], "", cmd.OutOrStdout())
			},
		})
	}
	return cmd
}
