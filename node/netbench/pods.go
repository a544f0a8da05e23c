package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

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
	return pathPair{name: "board", clientNS: boardNS(clientBoard), serverNS: boardNS(serverBoard),
		server: netip.AddrPortFrom(srv.Addr, port)}, nil
}

// boardNS is a board's own network namespace (island's doc.go).
func boardNS(board string) string { return "/run/netns/isle-" + board }

// The hello image and the bench's pods: the server on serverBoard, the
// client on clientBoard.
const (
	helloRef    = "isle/hello:1.0"
	podManifest = `apiVersion: v1
kind: Pod
metadata: {name: netbench-server}
spec:
  nodeName: ` + serverBoard + `
  terminationGracePeriodSeconds: 1
  containers: [{name: hello, image: ` + island.RegistryHost + "/" + helloRef + `}]
---
apiVersion: v1
kind: Pod
metadata: {name: netbench-client}
spec:
  nodeName: ` + clientBoard + `
  terminationGracePeriodSeconds: 1
  containers: [{name: hello, image: ` + island.RegistryHost + "/" + helloRef + `}]
`
)

// startPods pushes the hello image for platform to the island's registry,
// runs the two pods and returns the path between them.
func startPods(ctx context.Context, st *island.State, platform string) (pathPair, error) {
	push := st.RegistryAddr() + "/" + helloRef
	slog.Info("building and pushing the hello image", "platform", platform, "to", push)
	if out, err := exec.CommandContext(ctx, "go", "run", "./deploy/hello/mkimage", "-platforms", platform, "-push", push).CombinedOutput(); err != nil {
		return pathPair{}, fmt.Errorf("pods: go run ./deploy/hello/mkimage (run the bench in the isle module): %w:\n%s", err, out)
	}
	if _, err := kubectl(ctx, st, podManifest, "apply", "-f", "-"); err != nil {
		return pathPair{}, err
	}
	pods, err := waitRunning(ctx, st, 2*time.Minute, "netbench-server", "netbench-client")
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
	pp := pathPair{name: "pod", clientNS: podNS(st, clientBoard, cli), serverNS: podNS(st, serverBoard, srv),
		server: netip.AddrPortFrom(ip, port)}
	for _, path := range []string{pp.clientNS, pp.serverNS} {
		if ok, err := netns.Exists(path); err != nil || !ok {
			return pathPair{}, fmt.Errorf("pods: no network namespace at %s (%v): the agent makes one per pod there", path, err)
		}
	}
	slog.Info("pods running", "server", srv.Status.PodIP, "client", cli.Status.PodIP)
	return pp, nil
}

// podNS is the network namespace the agent of board made for pod: the
// agent's run directory is DIR/BOARD/run on an island.
func podNS(st *island.State, board string, pod corev1.Pod) string {
	return filepath.Join(st.Dir, board, "run", "netns", string(pod.UID))
}

// waitRunning waits until the named pods are Running and returns them in
// the order named.
func waitRunning(ctx context.Context, st *island.State, d time.Duration, names ...string) ([]corev1.Pod, error) {
	deadline := time.Now().Add(d)
	for {
		out, err := kubectl(ctx, st, "", append([]string{"get", "pod", "-o", "json"}, names...)...)
		if err != nil {
			return nil, err
		}
		var list corev1.PodList
		if err := json.Unmarshal(out, &list); err != nil {
			return nil, fmt.Errorf("pods: kubectl get pod -o json: %w", err)
		}
		pods, waiting, err := byName(list.Items, names)
		if err != nil {
			return nil, err
		}
		if waiting == "" {
			return pods, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("pods: %s not Running after %v; see kubectl describe pod and DIR/BOARD/isle.log", waiting, d)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("pods: %w", ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// byName picks the named pods out of items, checks what the bench relies
// on, and names one that is not Running yet ("" when all are).
func byName(items []corev1.Pod, names []string) (pods []corev1.Pod, waiting string, err error) {
	for _, n := range names {
		i := -1
		for j := range items {
			if items[j].Name == n {
				i = j
			}
		}
		if i < 0 {
			return nil, "", fmt.Errorf("pods: kubectl get pod does not list %s", n)
		}
		p := items[i]
		switch {
		case p.UID == "" || strings.ContainsAny(string(p.UID), "/."):
			return nil, "", fmt.Errorf("pods: pod %s: metadata.uid %q is not a UID", n, p.UID)
		case p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded:
			return nil, "", fmt.Errorf("pods: pod %s ended (%s): %s", n, p.Status.Phase, p.Status.Message)
		case p.Status.Phase != corev1.PodRunning && waiting == "":
			waiting = fmt.Sprintf("pod %s (%s)", n, p.Status.Phase)
		}
		pods = append(pods, p)
	}
	return pods, waiting, nil
}

// kubectl runs kubectl against the island with stdin and returns its
// output.
func kubectl(ctx context.Context, st *island.State, stdin string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "kubectl", args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+st.Kubeconfig())
	cmd.Stdin = strings.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("pods: kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
