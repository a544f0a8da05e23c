package main

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/isle-cluster/isle/control/cluster"
	"github.com/isle-cluster/isle/control/wire"
)

func newUserCommand() *cobra.Command {
	var socket string
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Add, list and revoke people's accounts (a kubeconfig each)",
		Long: `A person's account is a client certificate of the cluster CA for their name
and groups, and a binding of admin, edit or view: in one namespace (made if
missing), as a classroom gives each student theirs, or cluster-wide.
isle user add writes the person's kubeconfig, whose private key exists
nowhere else; isle user revoke deletes the binding and revokes the
certificate: the API servers refuse it from then on. Run on a server, as
root.`,
	}
	adminSocketFlag(cmd.PersistentFlags(), &socket)

	var (
		req    wire.UserRequest
		ttl    time.Duration
		output string
	)
	add := &cobra.Command{
		Use:   "add NAME [--group G]… [--namespace NS --role admin|edit|view] [--ttl D] [-o FILE]",
		Short: "Make an account and write its kubeconfig (to -o FILE, mode 0600, or print it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Name = args[0]
			if ttl < 0 {
				return fmt.Errorf("user add: --ttl %v: want a positive duration", ttl)
			}
			if ttl > 0 {
				req.TTL = ttl.String()
			}
			var added wire.UserAdded
			if err := adminSend(cmd.Context(), "user add", http.MethodPost, socket, cluster.UsersPath, req, &added); err != nil {
				return err
			}
			where := "cluster-wide"
			if added.User.Namespace != "" {
				where = "in namespace " + added.User.Namespace
			}
			if added.User.Role != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "user %s: %s %s; the certificate expires %s\n", added.User.Name, added.User.Role, where,
					added.User.NotAfter.Format(time.RFC3339))
			}
			if output == "" {
				_, err := cmd.OutOrStdout().Write(added.Kubeconfig)
				return err
			}
			if err := os.WriteFile(output, added.Kubeconfig, 0o600); err != nil {
				return fmt.Errorf("user add: %w (the account exists: isle user revoke %s, then add it again)", err, added.User.Name)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "kubeconfig written to %s\n", output)
			return nil
		},
	}
	add.Flags().StringArrayVar(&req.Groups, "group", nil, "a group the user is in (repeat for more)")
	add.Flags().StringVar(&req.Namespace, "namespace", "", "bind the role in this namespace (made if missing); the kubeconfig's default namespace")
	add.Flags().StringVar(&req.Role, "role", "", "admin, edit or view (default with --namespace: admin; without: no binding)")
	add.Flags().DurationVar(&ttl, "ttl", 0, "how long the certificate is valid (default 2160h, 90 days)")
	add.Flags().StringVarP(&output, "output", "o", "", "write the kubeconfig to this file (mode 0600) instead of printing it")

	list := &cobra.Command{
		Use:   "list",
		Short: "List the accounts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var infos []wire.UserInfo
			if err := adminJSON(cmd.Context(), "user list", http.MethodGet, socket, cluster.UsersPath, &infos); err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tGROUPS\tNAMESPACE\tROLE\tEXPIRES")
			for _, u := range infos {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", u.Name, orNone(strings.Join(u.Groups, ",")), orNone(u.Namespace), orNone(u.Role),
					u.NotAfter.Format(time.RFC3339))
			}
			return tw.Flush()
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke an account: its certificate is refused from now on and its binding deleted",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := adminJSON(cmd.Context(), "user revoke", http.MethodDelete, socket, cluster.UsersPath+"/"+url.PathEscape(args[0]), nil); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "user %s revoked\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(add, list, revoke)
	return cmd
}
