package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/isle-cluster/isle/control/cluster"
	"github.com/isle-cluster/isle/control/wire"
)

func newTokenCommand() *cobra.Command {
	var socket string
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Make, list and revoke the cluster's join tokens",
		Long: `A cluster has two kinds of join tokens. The server token (the file token
in a server's data directory) admits servers and agents and is the only
credential that ever receives the CA key; keep it on the servers. Agent
tokens admit boards as agents only: no CA key, no store membership, no
member removal. The first server writes one to agent-token in its data
directory; make more, with a time to live, for a lab's boards.

Boards that have joined keep working on their node credentials whatever
happens to the token they joined with. Run on a server, as root.`,
	}
	cmd.PersistentFlags().StringVar(&socket, "socket", defaultAdminSocket, "admin socket of the server to ask (its --admin-socket; run as root)")
	var (
		agent bool
		ttl   time.Duration
		desc  string
	)
	create := &cobra.Command{
		Use:   "create --agent",
		Short: "Make an agent token (printed this once; the servers keep only its hash)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !agent {
				return errors.New("token create: give --agent: the cluster has one server token (isle token rotate --server replaces it)")
			}
			if ttl < 0 {
				return fmt.Errorf("token create: --ttl %v: want a positive duration, or 0 for none", ttl)
			}
			q := url.Values{}
			if ttl > 0 {
				q.Set("ttl", ttl.String())
			}
			if desc != "" {
				q.Set("description", desc)
			}
			var resp wire.NewTokenResponse
			if err := tokenCall(cmd.Context(), http.MethodPost, socket, cluster.TokensPath+"?"+q.Encode(), &resp); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), resp.Token)
			return nil
		},
	}
	create.Flags().BoolVar(&agent, "agent", false, "make an agent token")
	create.Flags().DurationVar(&ttl, "ttl", 0, "how long the token admits boards (e.g. 24h; 0: until revoked)")
	create.Flags().StringVar(&desc, "description", "", "what the token is for, shown by isle token list")

	var output string
	list := &cobra.Command{
		Use:   "list",
		Short: "List the agent tokens (their IDs, never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var infos []wire.AgentTokenInfo
			if err := tokenCall(cmd.Context(), http.MethodGet, socket, cluster.TokensPath, &infos); err != nil {
				return err
			}
			return printTokens(cmd.OutOrStdout(), infos, output, time.Now())
		},
	}
	list.Flags().StringVarP(&output, "output", "o", "", "output format: json, or empty for a table")

	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke an agent token: boards that joined with it keep working",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !wire.ValidAgentTokenID(args[0]) {
				return fmt.Errorf("token revoke: %q is not an agent token's ID (6 of a-z and 0-9; isle token list shows them)", args[0])
			}
			if err := tokenCall(cmd.Context(), http.MethodDelete, socket, cluster.TokensPath+"/"+args[0], nil); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "agent token %s revoked\n", args[0])
			return nil
		},
	}

	var rotAgent, rotServer bool
	rotate := &cobra.Command{
		Use:   "rotate --agent | --server",
		Short: "Replace the agent tokens or the server token",
		Long: `With --agent, revoke every agent token and make a new one. With --server,
replace the server token: every server takes the new one within seconds (its
DATA-DIR/token, and its CA key sealed anew) and refuses the old one. A server
that is off takes it when it starts. Backups made before need the old token to
be restored. Boards that have joined keep working either way. The new token
is printed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rotAgent == rotServer {
				return errors.New("token rotate: give --agent or --server")
			}
			kind := "agent"
			if rotServer {
				kind = "server"
			}
			var resp wire.NewTokenResponse
			if err := tokenCall(cmd.Context(), http.MethodPost, socket, cluster.TokensPath+"/rotate?kind="+kind, &resp); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), resp.Token)
			return nil
		},
	}
	rotate.Flags().BoolVar(&rotAgent, "agent", false, "replace the agent tokens")
	rotate.Flags().BoolVar(&rotServer, "server", false, "replace the server token")
	cmd.AddCommand(create, list, revoke, rotate)
	return cmd
}

// tokenCall asks the server's admin API and decodes its answer into out.
func tokenCall(ctx context.Context, method, socket, path string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return adminJSON(ctx, "token", method, socket, path, out)
}

func printTokens(w io.Writer, infos []wire.AgentTokenInfo, output string, now time.Time) error {
	switch output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(infos)
	case "":
	default:
		return fmt.Errorf("token list: --output %q: want json or nothing", output)
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "ID\tCREATED\tEXPIRES\tDESCRIPTION")
	for _, t := range infos {
		exp := "<never>"
		switch {
		case t.Expires.IsZero():
		case !now.Before(t.Expires):
			exp = "expired " + t.Expires.Local().Format(time.RFC3339)
		default:
			exp = t.Expires.Local().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.ID, t.Created.Local().Format(time.RFC3339), exp, orNone(t.Description))
	}
	return tw.Flush()
}
