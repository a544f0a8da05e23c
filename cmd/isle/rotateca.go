package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/isle-cluster/isle/control/cluster"
	"github.com/isle-cluster/isle/control/wire"
)

func newRotateCACommand() *cobra.Command {
	var (
		addr           string
		status, nowait bool
		timeout        time.Duration
	)
	cmd := &cobra.Command{
		Use:   "rotate-ca",
		Short: "Replace the cluster CA across the running cluster",
		Long: `Replace the cluster CA with a new one, on a server board, without stopping
anything: first every server and board trusts both CAs, then the new one signs
and every certificate is issued anew from it, then the old one is dropped and
each server's token carries the new CA's hash (same secret). Each step waits
until every server and board has done the one before: a board that is off
holds the rotation, which goes on when it is back (--status names whom it
waits for). At the end the command prints the new token, which boards that
join later need (the old one's CA hash no longer matches).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			out := cmd.OutOrStdout()
			if status {
				st, err := caRotation(ctx, http.MethodGet, addr)
				if err != nil {
					return err
				}
				printRotation(out, st)
				return nil
			}
			st, err := caRotation(ctx, http.MethodPost, addr)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "rotate-ca: started; the new CA is %s\n", newCAHash(st))
			if nowait {
				return nil
			}
			return waitRotation(ctx, out, addr)
		},
	}
	adminSocketFlag(cmd.Flags(), &addr)
	cmd.Flags().BoolVar(&status, "status", false, "show the rotation under way (or the last one) and whom it waits for")
	cmd.Flags().BoolVar(&nowait, "no-wait", false, "start the rotation and return")
	cmd.Flags().DurationVar(&timeout, "timeout", time.Hour, "how long to wait for the rotation to end")
	return cmd
}

// caRotation asks the server's store API at addr for the rotation
// (GET) or to start one (POST).
func caRotation(ctx context.Context, method, addr string) (wire.CARotationStatus, error) {
	var st wire.CARotationStatus
	err := adminJSON(ctx, "rotate-ca", method, addr, cluster.CARotationPath, &st)
	return st, err
}

// waitRotation reports each phase and whom it waits for until the
// rotation is done.
func waitRotation(ctx context.Context, out io.Writer, addr string) error {
	var last wire.CARotationStatus
	for {
		st, err := caRotation(ctx, http.MethodGet, addr)
		switch {
		case err != nil && ctx.Err() != nil:
			return fmt.Errorf("rotate-ca: not done in time (phase %s); it goes on: isle certs rotate-ca --status", last.Phase)
		case err != nil:
			fmt.Fprintln(out, err)
		case st.Phase != last.Phase || !slices.Equal(st.Waiting, last.Waiting):
			printRotation(out, st)
			last = st
		}
		if st.Phase == wire.CAPhaseDone {
			return nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

func printRotation(out io.Writer, st wire.CARotationStatus) {
	fmt.Fprintf(out, "phase %s (started %s, new CA %s)\n", st.Phase, st.Started.Format(time.RFC3339), newCAHash(st))
	for _, w := range st.Waiting {
		fmt.Fprintf(out, "  waiting for %s\n", w)
	}
	if st.Token != "" {
		fmt.Fprintf(out, "done: the new token, for boards that join from now on:\n%s\n", st.Token)
	}
}

func newCAHash(st wire.CARotationStatus) string {
	c, err := wire.ParseCertPEM(st.New)
	if err != nil {
		return "?"
	}
	return wire.CAHash(c)
}
