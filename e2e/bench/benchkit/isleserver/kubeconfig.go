package isleserver

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RESTConfig is the administrator's client configuration for the server,
// from `isle kubeconfig`.
func (s *Server) RESTConfig(ctx context.Context) (*rest.Config, error) {
	return RESTConfig(ctx, s.bin, s.dataDir(), s.apiURL())
}

// RESTConfig runs `isle kubeconfig` on a server's data directory and
// returns the administrator's client configuration for the API at server
// (https://HOST:PORT), as kubectl would read it.
func RESTConfig(ctx context.Context, isle, dataDir, server string) (*rest.Config, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, isle, "kubeconfig", "--data-dir", dataDir, "--server", server)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("isle kubeconfig: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(out)
	if err != nil {
		return nil, fmt.Errorf("isle kubeconfig: %w", err)
	}
	return cfg, nil
}
