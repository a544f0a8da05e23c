package main

import (
	"fmt"
	"runtime"

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
		Short: "Print isle's version, commit and platform",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "isle %s (commit %s) %s/%s\n",
				version, commit, runtime.GOOS, runtime.GOARCH)
			return err
		},
	}
}
