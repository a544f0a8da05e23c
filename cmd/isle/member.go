package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/isle-cluster/isle/control/cluster"
	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/node/bootstrap"
)

// memberFlags say which server to ask and with which token: by default
// those recorded in a server's data directory.
type memberFlags struct {
	dataDir string
	server  string
	token   string
	output  string
}

func newMemberCommand() *cobra.Command {
	var f memberFlags
	cmd := &cobra.Command{
		Use:   "member",
		Short: "List the cluster's boards or remove one",
		Long: `List the cluster's boards as gossip sees them (alive, suspect, dead, left)
with their store standing, or remove a board: its store membership (refused
if the store would lose its quorum), its credential, so its name is free for
a new board, and its Node.

Run on a server, the command finds the API address and token in DATA-DIR;
elsewhere give --server host:port and --token.`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.dataDir, "data-dir", "/var/lib/isle", "data directory of a server (for its API address and token)")
	pf.StringVar(&f.server, "server", "", "API address (host:port) of a server (default: the one in DATA-DIR)")
	pf.StringVar(&f.token, "token", "", "the server token (default: the one in DATA-DIR)")
	list := &cobra.Command{
		Use:   "list",
		Short: "List the boards",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return memberList(cmd.Context(), f, cmd.OutOrStdout())
		},
	}
	list.Flags().StringVarP(&f.output, "output", "o", "", "output format: json, or empty for a table")
	remove := &cobra.Command{
		Use:   "remove NAME",
		Short: "Remove a board from the cluster",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := memberRemove(cmd.Context(), f, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "board %s removed\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(list, remove)
	return cmd
}

func (f memberFlags) target() (server string, tok wire.Token, err error) {
	server, token := f.server, f.token
	if server == "" || token == "" {
		id, err := cluster.LoadIdentity(f.dataDir)
		if err != nil {
			return "", tok, fmt.Errorf("member: give --server and --token, or run on a server: %w", err)
		}
		if token == "" {
			token = id.Token.String()
		}
		if server == "" {
			u, err := cluster.LocalAPIServer(f.dataDir)
			if err != nil {
				return "", tok, fmt.Errorf("member: %w", err)
			}
			server = strings.TrimPrefix(u, "https://")
		}
	}
	if tok, err = wire.ParseToken(token); err != nil {
		return "", tok, fmt.Errorf("member: --token: %w", err)
	}
	return server, tok, nil
}

// call sends one request to the membership endpoints, pinned to the
// token's CA like a join.
func (f memberFlags) call(ctx context.Context, method, path string, out any) error {
	server, tok, err := f.target()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := bootstrap.NewClient(tok, nil).Do(ctx, method, server, path, nil, out, ""); err != nil {
		var refused *bootstrap.Refused
		if errors.As(err, &refused) {
			return errors.New("member: " + refused.Reason)
		}
		return fmt.Errorf("member: %w", err)
	}
	return nil
}

func memberList(ctx context.Context, f memberFlags, w io.Writer) error {
	var members []wire.MemberInfo
	if err := f.call(ctx, http.MethodGet, wire.MembersPath, &members); err != nil {
		return err
	}
	switch f.output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(members)
	case "":
	default:
		return fmt.Errorf("member: --output %q: want json or nothing", f.output)
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLE\tSTATE\tSTORE\tADDRESS\tARCH\tVERSION\tFOR")
	for _, m := range members {
		since := "<unknown>"
		if !m.Since.IsZero() {
			since = duration.HumanDuration(time.Since(m.Since))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Name, m.Role, orNone(string(m.State)), orNone(m.Raft), orNone(m.Address), orNone(m.Arch), orNone(m.Version), since)
	}
	return tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func memberRemove(ctx context.Context, f memberFlags, name string) error {
	return f.call(ctx, http.MethodDelete, wire.MembersPath+"/"+url.PathEscape(name), nil)
}
