package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/storeapi"
)

func newStoreCommand() *cobra.Command {
	var addr string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Inspect and debug the replicated store of a running server",
	}
	adminSocketFlag(cmd.PersistentFlags(), &addr)
	cmd.PersistentFlags().DurationVar(&timeout, "timeout", 10*time.Second, "how long to wait for an answer")
	client := func(cmd *cobra.Command) (*storeapi.Client, context.Context, context.CancelFunc) {
		ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
		return storeapi.NewClient(addr, nil), ctx, cancel
	}

	var jsonOut, leaderOnly bool
	status := &cobra.Command{
		Use:   "status",
		Short: "Show members, leader, term and applied index",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, cancel := client(cmd)
			defer cancel()
			st, err := c.Status(ctx)
			if err != nil {
				return err
			}
			if leaderOnly {
				for _, m := range st.Members {
					if m.ID == st.Leader {
						_, err := fmt.Fprintln(cmd.OutOrStdout(), m.Name)
						return err
					}
				}
				return fmt.Errorf("store: member %x (%s) knows no leader", st.ID, st.Name)
			}
			if jsonOut {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			return printStatus(cmd.OutOrStdout(), st)
		},
	}
	status.Flags().BoolVar(&jsonOut, "json", false, "print the status as JSON")
	status.Flags().BoolVar(&leaderOnly, "leader", false, "print only the leader's name")

	var local bool
	get := &cobra.Command{
		Use:   "get KEY",
		Short: "Print a key's value (a linearizable read unless --local)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, cancel := client(cmd)
			defer cancel()
			r, err := c.Get(ctx, args[0], local)
			if err != nil {
				return err
			}
			if r.KV == nil {
				return fmt.Errorf("store: key %q not found (revision %d)", args[0], r.Revision)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), r.KV.Value)
			return err
		},
	}
	get.Flags().BoolVar(&local, "local", false, "read this member's copy without asking the leader (may be stale)")

	var ifModRev int64
	put := &cobra.Command{
		Use:   "put KEY VALUE",
		Short: "Write a key and print the new store revision",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, cancel := client(cmd)
			defer cancel()
			r, err := c.Put(ctx, args[0], []byte(args[1]), ifModRev)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "revision %d\n", r.Revision)
			return err
		},
	}
	put.Flags().Int64Var(&ifModRev, "if-mod-rev", -1, "write only if the key's modification revision is this (0: only if absent)")

	del := &cobra.Command{
		Use:   "del KEY",
		Short: "Delete a key",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, cancel := client(cmd)
			defer cancel()
			r, err := c.Delete(ctx, args[0], -1)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "revision %d\n", r.Revision)
			return err
		},
	}

	list := &cobra.Command{
		Use:   "list [PREFIX]",
		Short: "List keys with a prefix",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, cancel := client(cmd)
			defer cancel()
			prefix := ""
			if len(args) == 1 {
				prefix = args[0]
			}
			r, err := c.List(ctx, prefix, 0)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tMOD-REV\tVERSION\tVALUE")
			for _, kv := range r.KVs {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", kv.Key, kv.ModRevision, kv.Version, kv.Value)
			}
			return tw.Flush()
		},
	}

	memberOp := func(use, short string, op func(*storeapi.Client, context.Context, uint64) error) *cobra.Command {
		return &cobra.Command{
			Use:   use + " MEMBER-ID",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				id, err := strconv.ParseUint(args[0], 16, 64)
				if err != nil || id == 0 {
					return fmt.Errorf("member ID %q: want the hexadecimal ID shown by `isle store status`", args[0])
				}
				c, ctx, cancel := client(cmd)
				defer cancel()
				return op(c, ctx, id)
			},
		}
	}
	cmd.AddCommand(status, get, put, del, list,
		memberOp("promote", "Make a learner a voter (ask the leader)", (*storeapi.Client).Promote),
		memberOp("remove", "Remove a member (ask the leader; refused if it would lose quorum)", (*storeapi.Client).RemoveMember),
		memberOp("transfer-leader", "Hand leadership to another voter (ask the leader)", (*storeapi.Client).TransferLeader),
	)
	return cmd
}

func printStatus(w io.Writer, st raft.Status) error {
	fmt.Fprintf(w, "cluster %x  member %x (%s)  role %s  term %d  leader %x\n",
		st.ClusterID, st.ID, st.Name, st.Role, st.Term, st.Leader)
	fmt.Fprintf(w, "commit %d  applied %d  snapshot %d  revision %d\n\n",
		st.Commit, st.Applied, st.SnapshotIndex, st.Revision)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tROLE\tRAFT\tAPI\tMATCH")
	for _, m := range st.Members {
		role := "voter"
		switch {
		case m.ID == st.Leader:
			role = "leader"
		case m.Learner:
			role = "learner"
		}
		match := "-"
		if st.Role == "leader" {
			match = strconv.FormatUint(m.Match, 10)
		}
		fmt.Fprintf(tw, "%x\t%s\t%s\t%s\t%s\t%s\n", m.ID, m.Name, role, m.RaftAddr, m.ClientAddr, match)
	}
	return tw.Flush()
}
