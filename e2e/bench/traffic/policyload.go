package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/islandbench"
	"github.com/isle-cluster/isle/node/island"
	"github.com/isle-cluster/isle/node/netns"
)

// policyPathName is the ClusterIP path with benchPolicies NetworkPolicies
// choosing the hello replica: each lets in the client (every IPv4 address
// but one of 198.51.100.0/24, and the pods of a label) on the http port
// alone. They are made before each round of the path and deleted after
// it; the other paths run without them.
const (
	policyPathName = "ClusterIP, 50 NetworkPolicies"
	benchPolicies  = 50
)

// policyManifest is the policies, as one List.
func policyManifest() string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: List\nitems:\n")
	for i := range benchPolicies {
		fmt.Fprintf(&b, `- apiVersion: networking.k8s.io/v1
  kind: NetworkPolicy
  metadata: {name: bench-%d, labels: {bench: traffic}}
  spec:
    podSelector: {matchLabels: {app: hello}}
    ingress:
    - from:
      - ipBlock: {cidr: 0.0.0.0/0, except: [198.51.100.%d/32]}
      - podSelector: {matchLabels: {client: c%d}}
      ports: [{port: http}]
`, i, i, i)
	}
	return b.String()
}

// policyPath is the ClusterIP path with the policies in force.
func (a app) policyPath(st *island.State) path {
	p := a.paths()[1]
	p.name = policyPathName
	canary := netip.AddrPortFrom(a.podIP, 9) // no server: refused, or dropped by the policies
	p.setup = func(ctx context.Context) error {
		if _, err := islandbench.Kubectl(ctx, st, policyManifest(), "apply", "-f", "-"); err != nil {
			return err
		}
		return waitCanary(ctx, a.clientNS, canary, true)
	}
	p.teardown = func(ctx context.Context) error {
		if _, err := islandbench.Kubectl(ctx, st, "", "delete", "networkpolicies", "-l", "bench=traffic"); err != nil {
			return err
		}
		return waitCanary(ctx, a.clientNS, canary, false)
	}
	return p
}

// waitCanary waits until a connection from ns to the canary port is
// dropped (the policies in force on the replica's board) or refused
// (none), for at most 30 s.
func waitCanary(ctx context.Context, ns string, canary netip.AddrPort, dropped bool) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		c, err := netns.Dialer(ns)(cctx, "tcp", canary.String())
		cancel()
		if c != nil {
			c.Close()
		}
		var ne net.Error
		switch timedOut := errors.As(err, &ne) && ne.Timeout(); {
		case ctx.Err() != nil:
			return ctx.Err()
		case dropped && timedOut, !dropped && errors.Is(err, syscall.ECONNREFUSED):
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("policies: a connection to %v (want it %s): %v", canary, map[bool]string{true: "dropped", false: "refused"}[dropped], err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
