package main

import (
	"fmt"
	"runtime"

	"github.com/isle-cluster/isle/control/wire"
	"github.com/spf13/cobra"
)

// Stamped at link time by the Makefile (-ldflags -X).
var (
	version = "dev"
	commit  = "unknown"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print isle's release, version, commit and platform",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "isle %s (release %s, commit %s) %s/%s\n",
				version, wire.Release, commit, runtime.GOOS, runtime.GOARCH)
			return err
		},
	}
}
