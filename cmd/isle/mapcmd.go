package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/isle-cluster/isle/control/islemap"
	"github.com/isle-cluster/isle/control/pki"
)

func newMapCommand() *cobra.Command {
	var kubeconfig, addr string
	cmd := &cobra.Command{
		Use:   "map",
		Short: "Serve the island's live map on this machine and print its address",
		Long: `Serve the island's map, the first seed's picture of the cluster drawn live
from the API (the lighthouse village of the servers, the nest trees of the
boards with their pods, the gates and roads of the network, the ground of
storage, and the five flows as they happen), at a loopback address, with the
credentials of a kubeconfig: the map shows what that user may list.

It does what 'kubectl proxy' does for the map's path /isle/map/, for the
map's requests alone. Open the address it prints in a browser; Ctrl-C stops it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return fmt.Errorf("isle map: --address %q: %w", addr, err)
			}
			if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
				return fmt.Errorf("isle map: --address %q: the map is served on a loopback address only (it carries your credentials)", addr)
			}
			if kubeconfig == "" {
				kubeconfig = defaultKubeconfig()
			}
			client, err := pki.LoadClient(kubeconfig)
			if err != nil {
				return fmt.Errorf("isle map: %w", err)
			}
			lis, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("isle map: %w", err)
			}
			transport := &http.Transport{TLSClientConfig: client.TLS, Proxy: nil, IdleConnTimeout: 90 * time.Second, ForceAttemptHTTP2: true}
			srv := &http.Server{Handler: islemap.Proxy(client.Server, transport, client.Token), ReadHeaderTimeout: 10 * time.Second}
			fmt.Fprintf(cmd.OutOrStdout(), "The island's map: %s (of %s, as %s's user); Ctrl-C stops it\n",
				islemap.ProxyURL(lis.Addr()), client.Server.Host, filepath.Base(kubeconfig))
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			go func() {
				<-ctx.Done()
				sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				_ = srv.Shutdown(sctx)
			}()
			if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("isle map: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig whose current context to use (default: $KUBECONFIG's first file, or ~/.kube/config)")
	cmd.Flags().StringVar(&addr, "address", "127.0.0.1:8001", "loopback address to serve the map on (port 0: any free one)")
	return cmd
}

// defaultKubeconfig is the kubeconfig kubectl would read first.
func defaultKubeconfig() string {
	if env := os.Getenv("KUBECONFIG"); env != "" {
		return strings.Split(env, string(os.PathListSeparator))[0]
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".kube", "config")
}
