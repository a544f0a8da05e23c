package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/isle-cluster/isle/control/cluster"
)

func newKubeconfigCommand() *cobra.Command {
	var dataDir, out, server string
	cmd := &cobra.Command{
		Use:   "kubeconfig",
		Short: "Print (or write) an administrator's kubeconfig for the server of a data directory",
		Long: `Issue an administrator's client certificate (system:masters) from the cluster
CA kept in DATA-DIR and print a kubeconfig for it, or write it to -o FILE (0600).
The server of DATA-DIR renews the client certificate of a FILE written with -o
before it expires, as long as the file is as isle wrote it; a printed one is
not renewed (isle certs check lists the files and their expiry).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out != "" {
				return cluster.WriteAdminKubeconfig(dataDir, server, out, time.Now())
			}
			b, err := cluster.AdminKubeconfig(dataDir, server, time.Now())
			if err != nil {
				return err
			}
			if _, err := cmd.OutOrStdout().Write(b); err != nil {
				return err
			}
			fmt.Fprintln(cmd.ErrOrStderr(), "isle kubeconfig: its client certificate expires in a year and is not renewed: write the kubeconfig with -o FILE to have the server renew it")
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "/var/lib/isle", "data directory of a server")
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the kubeconfig to this file instead of printing it")
	cmd.Flags().StringVar(&server, "server", "", "API server URL (default: the one the server recorded)")
	return cmd
}
