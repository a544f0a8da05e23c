package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/islandbench"
	"github.com/isle-cluster/isle/node/island"
	"github.com/isle-cluster/isle/node/netns"
)

// port is where the bench's TCP server listens, in the server's namespace.
const port = 5201

// pathPair is a client namespace and a server address in another
// namespace: the two pods, or the two boards.
type pathPair struct {
	name     string // "pod" or "board", in the report
	clientNS string // path of the client's network namespace
	serverNS string // path of the server's network namespace
	server   netip.AddrPort
}

// boardPair is the LAN between the two agent boards' own namespaces.
func boardPair(st *island.State) (pathPair, error) {
	srv, err := st.Board(serverBoard)
	if err != nil {
		return pathPair{}, err
	}
	return pathPair{name: "board", clientNS: islandbench.BoardNS(clientBoard), serverNS: islandbench.BoardNS(serverBoard),
		server: netip.AddrPortFrom(srv.Addr, port)}, nil
}

// The bench's pods, of the hello image: the server on serverBoard, the
// client on clientBoard.
const (
	podManifest = `apiVersion: v1
kind: Pod
metadata: {name: netbench-server}
spec:
  nodeName: ` + serverBoard + `
  terminationGracePeriodSeconds: 1
  containers: [{name: hello, image: ` + islandbench.HelloImage + `}]
---
apiVersion: v1
kind: Pod
metadata: {name: netbench-client}
spec:
  nodeName: ` + clientBoard + `
  terminationGracePeriodSeconds: 1
  containers: [{name: hello, image: ` + islandbench.HelloImage + `}]
`
)

// startPods pushes the hello image for platform to the island's registry,
// runs the two pods and returns the path between them.
func startPods(ctx context.Context, st *island.State, platform string) (pathPair, error) {
	if err := islandbench.PushHello(ctx, st, platform); err != nil {
		return pathPair{}, err
	}
	if _, err := islandbench.Kubectl(ctx, st, podManifest, "apply", "-f", "-"); err != nil {
		return pathPair{}, err
	}
	pods, err := islandbench.WaitRunning(ctx, st, 2*time.Minute, "netbench-server", "netbench-client")
	if err != nil {
		return pathPair{}, err
	}
	srv, cli := pods[0], pods[1]
	for _, p := range pods {
		if p.Status.PodIP == "" {
			return pathPair{}, fmt.Errorf("pods: the pod network is not there: pod %s has no IP", p.Name)
		}
	}
	ip, err := netip.ParseAddr(srv.Status.PodIP)
	if err != nil {
		return pathPair{}, fmt.Errorf("pods: pod %s: status.podIP %q: %w", srv.Name, srv.Status.PodIP, err)
	}
	pp := pathPair{name: "pod", clientNS: islandbench.PodNS(st, clientBoard, cli), serverNS: islandbench.PodNS(st, serverBoard, srv),
		server: netip.AddrPortFrom(ip, port)}
	for _, path := range []string{pp.clientNS, pp.serverNS} {
		if ok, err := netns.Exists(path); err != nil || !ok {
			return pathPair{}, fmt.Errorf("pods: no network namespace at %s (%v): the agent makes one per pod there", path, err)
		}
	}
	slog.Info("pods running", "server", srv.Status.PodIP, "client", cli.Status.PodIP)
	return pp, nil
}
