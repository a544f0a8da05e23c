package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/isle-cluster/isle/node/island"
)

func newStatusCommand() *cobra.Command {
	var (
		dir  string
		once bool
	)
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the island's boards with their readiness and activity LEDs, live",
		Long: `Show every board of the island with its two virtual LEDs as dots: the
readiness LED (green) and the activity LED (amber), and what the readiness
pattern means. On a terminal the table updates live until Ctrl-C; piped, or
with --once, it prints once.

Real boards report their readiness pattern in the Node annotation
isle.dev/led-ready (off, slow-blink, fast-blink, solid-dip, solid, solid-leader).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			tty := isTerminal(cmd.OutOrStdout())
			return island.Status(ctx, dir, cmd.OutOrStdout(), island.StatusOptions{
				Live:     tty && !once,
				Interval: 50 * time.Millisecond,
				Color:    tty && os.Getenv("NO_COLOR") == "",
			})
		},
	}
	cmd.Flags().StringVar(&dir, "dir", island.DefaultDir, "directory of the island")
	cmd.Flags().BoolVar(&once, "once", false, "print the table once")
	return cmd
}

// isTerminal reports whether w is a terminal.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
