package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/isle-cluster/isle/node/netns"
	"github.com/isle-cluster/isle/node/podnet"
	"github.com/isle-cluster/isle/node/proxy"
	"github.com/isle-cluster/isle/node/volumes"
)

func newUninstallCommand() *cobra.Command {
	var dataDir, runDir string
	var purge bool
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove what isle made on this board outside its data directory (stop isle first)",
		Long: `Remove what isle made on this board: the Pod network (bridge isle0, the
pods' veths and addresses, the routes to other boards' pods, the nftables
table isle-podnet; the LAN link's forwarding and rp_filter as they were), the
Service rules (nftables table isle-proxy) and the pods' network namespaces
under RUN-DIR. With --purge, DATA-DIR goes
too (the board's credential, store, volumes and logs): the board leaves the
cluster for good (remove it with isle member remove NAME). Stop isle first;
containerd's containers of the board are containerd's to remove.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return uninstall(dataDir, runDir, purge, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "/var/lib/isle", "the board's data directory")
	cmd.Flags().StringVar(&runDir, "run-dir", "/run/isle", "the board's run directory (pods' network namespaces)")
	cmd.Flags().BoolVar(&purge, "purge", false, "remove the data directory too")
	return cmd
}

func uninstall(dataDir, runDir string, purge bool, out io.Writer) error {
	if !filepath.IsAbs(dataDir) || !filepath.IsAbs(runDir) || filepath.Clean(dataDir) == "/" || filepath.Clean(runDir) == "/" {
		return fmt.Errorf("uninstall: --data-dir %q and --run-dir %q: want absolute paths of isle's own directories", dataDir, runDir)
	}
	var errs []error
	if err := podnet.Uninstall(podnet.Config{StateDir: filepath.Join(dataDir, "podnet")}); err != nil {
		errs = append(errs, err)
	} else {
		fmt.Fprintln(out, "uninstall: the Pod network is removed")
	}
	if err := proxy.Uninstall(""); err != nil {
		errs = append(errs, err)
	} else {
		fmt.Fprintln(out, "uninstall: the Service rules are removed")
	}
	nss, _ := filepath.Glob(filepath.Join(runDir, "netns", "*"))
	for _, ns := range nss {
		if err := netns.Delete(ns); err != nil {
			errs = append(errs, err)
		}
	}
	if len(nss) > 0 {
		fmt.Fprintf(out, "uninstall: %d pods' network namespaces removed\n", len(nss))
	}
	if purge {
		if err := volumes.UnmountUnder(dataDir); err != nil {
			errs = append(errs, fmt.Errorf("uninstall: %w", err))
		} else if err := os.RemoveAll(dataDir); err != nil {
			errs = append(errs, fmt.Errorf("uninstall: %w", err))
		} else {
			fmt.Fprintf(out, "uninstall: %s removed\n", dataDir)
		}
	}
	return errors.Join(errs...)
}
