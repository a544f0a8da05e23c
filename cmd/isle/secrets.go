package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/isle-cluster/isle/control/cluster"
	"github.com/isle-cluster/isle/control/wire"
)

func newSecretsCommand() *cobra.Command {
	var socket string
	cmd := &cobra.Command{
		Use:   "secrets",
		Short: "The Secrets' encryption at rest",
		Long: `Secrets are stored encrypted (AES-256-GCM, as kube-apiserver's aesgcm
provider stores them) with a random key held by the servers alone, sealed
with the cluster CA's key: the store's log, its snapshots and backups hold no
Secret in clear. Run on a server, as root.`,
	}
	cmd.PersistentFlags().StringVar(&socket, "socket", defaultAdminSocket, "admin socket of the server to ask (its --admin-socket; run as root)")
	status := &cobra.Command{
		Use:   "status",
		Short: "Show the keys and how many Secrets each encrypts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := secretsCall(cmd.Context(), http.MethodGet, socket, cluster.SecretsPath)
			if err != nil {
				return err
			}
			printSecrets(cmd.OutOrStdout(), st)
			return nil
		},
	}
	var (
		nowait  bool
		timeout time.Duration
	)
	rotate := &cobra.Command{
		Use:   "rotate-key",
		Short: "Encrypt the Secrets with a new key",
		Long: `Add a new key and make it the one Secrets are encrypted with; the leader then
stores every Secret anew with it (each one's resourceVersion changes). The
command waits until every Secret is (unless --no-wait). The key before stays
until the next rotation, for what a server still wrote with it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			out := cmd.OutOrStdout()
			st, err := secretsCall(ctx, http.MethodPost, socket, cluster.SecretsPath+"/rotate-key")
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "secrets: new key %s\n", st.Primary)
			for !nowait && st.Rewritten != st.Primary {
				select {
				case <-ctx.Done():
					return fmt.Errorf("secrets: not every Secret rewritten in time (%d of %d); it goes on: isle secrets status", st.ByKey[st.Primary], st.Secrets)
				case <-time.After(2 * time.Second):
				}
				if st, err = secretsCall(ctx, http.MethodGet, socket, cluster.SecretsPath); err != nil {
					return err
				}
			}
			printSecrets(out, st)
			return nil
		},
	}
	rotate.Flags().BoolVar(&nowait, "no-wait", false, "add the key and return")
	rotate.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "how long to wait for every Secret to be rewritten")
	cmd.AddCommand(status, rotate)
	return cmd
}

func secretsCall(ctx context.Context, method, socket, path string) (wire.SecretsStatus, error) {
	var st wire.SecretsStatus
	err := adminJSON(ctx, "secrets", method, socket, path, &st)
	return st, err
}

func printSecrets(w io.Writer, st wire.SecretsStatus) {
	if st.Primary == "" {
		fmt.Fprintf(w, "no key yet: %d Secrets stored in clear (the servers are being upgraded?)\n", st.Secrets)
		return
	}
	done := "rewriting"
	if st.Rewritten == st.Primary {
		done = "every Secret under it"
	}
	fmt.Fprintf(w, "primary key %s (%s); keys held: %s\n", st.Primary, done, strings.Join(st.Keys, ", "))
	names := make([]string, 0, len(st.ByKey))
	for n := range st.ByKey {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-16s %d Secrets\n", n, st.ByKey[n])
	}
}
