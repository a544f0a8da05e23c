package islandbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/isle-cluster/isle/node/island"
)

// HelloRef is the hello image's repository and tag on the island's
// registry; HelloImage is the name pods pull it by.
const (
	HelloRef   = "isle/hello:1.0"
	HelloImage = island.RegistryHost + "/" + HelloRef
)

// PushHello builds the hello image for platform ("linux/amd64") with
// deploy/hello/mkimage and pushes it to the island's registry. It runs
// `go run` in the working directory, which must be the isle module's.
func PushHello(ctx context.Context, st *island.State, platform string) error {
	push := st.RegistryAddr() + "/" + HelloRef
	slog.Info("building and pushing the hello image", "platform", platform, "to", push)
	if out, err := exec.CommandContext(ctx, "go", "run", "./deploy/hello/mkimage", "-platforms", platform, "-push", push).CombinedOutput(); err != nil {
		return fmt.Errorf("pods: go run ./deploy/hello/mkimage (run the bench in the isle module): %w:\n%s", err, out)
	}
	return nil
}

// BoardNS is a board's own network namespace (island's doc.go).
func BoardNS(board string) string { return "/run/netns/isle-" + board }

// PodNS is the network namespace the agent of board made for pod: the
// agent's run directory is DIR/BOARD/run on an island.
func PodNS(st *island.State, board string, pod corev1.Pod) string {
	return filepath.Join(st.Dir, board, "run", "netns", string(pod.UID))
}

// WaitRunning waits until the named pods are Running and returns them in
// the order named.
func WaitRunning(ctx context.Context, st *island.State, d time.Duration, names ...string) ([]corev1.Pod, error) {
	deadline := time.Now().Add(d)
	for {
		// All of them: for one name, kubectl would print the Pod, not a
		// list.
		out, err := Kubectl(ctx, st, "", "get", "pods", "-o", "json")
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

// Kubectl runs kubectl against the island with stdin and returns its
// output.
func Kubectl(ctx context.Context, st *island.State, stdin string, args ...string) ([]byte, error) {
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
