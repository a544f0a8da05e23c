package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/isle-cluster/isle/e2e/bench/benchkit/isleserver"
)

// connect builds a client-go clientset for the server with the
// administrator's configuration, unthrottled: the benchmark measures the
// server, not client-side rate limits; and waits until the server is ready.
func connect(ctx context.Context, srv *isleserver.Server) (*kubernetes.Clientset, error) {
	cfg, err := srv.RESTConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit
	cfg.Proxy = nil            // all traffic stays on 127.0.0.1
	cfg.Timeout = time.Minute
	cfg.UserAgent = rest.DefaultKubernetesUserAgent() // as kubernetes.NewForConfig sets it
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	// The readiness checks go over the clientset's own connection.
	if err := srv.WaitReady(ctx, hc); err != nil {
		return nil, err
	}
	c, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return c, nil
}
