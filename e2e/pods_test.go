package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/isle-cluster/isle/node/containers/ctrtest"
	"github.com/isle-cluster/isle/node/netns"
)

// podBoard is one server board running pods through a containerd of the
// test's own, with a registry on loopback holding the test images.
type podBoard struct {
	c        *storeCluster
	kubectl  *kubectlRunner
	registry string
	busybox  string // image reference
	hello    string // the tutorial's app, with busybox beside it
	runDir   string
}

func startPodBoard(t *testing.T, extra ...string) *podBoard {
	t.Helper()
	bin := isleBinary(t)
	sock := ctrtest.Containerd(t)
	reg := ctrtest.Registry(t, "")
	bb := ctrtest.Busybox(t)
	busybox := ctrtest.Push(t, reg, "isle/busybox:1", bb, nil)
	helloImg := ctrtest.Busybox(t)
	helloImg.Files["/usr/bin/hello"] = ctrtest.File{Data: ctrtest.GoBinary(t, "github.com/isle-cluster/isle/deploy/hello"), Mode: 0o755}
	helloImg.Entrypoint, helloImg.Cmd = []string{"/usr/bin/hello"}, nil
	hello := ctrtest.Push(t, reg, "isle/hello:1.0", helloImg, nil)
	runDir, err := os.MkdirTemp("", "islerun")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Network namespaces the agent left (it is killed, not stopped).
		if ents, err := os.ReadDir(filepath.Join(runDir, "netns")); err == nil {
			for _, e := range ents {
				_ = netns.Delete(filepath.Join(runDir, "netns", e.Name()))
			}
		}
		_ = os.RemoveAll(runDir)
	})
	args := append([]string{"--containerd", sock, "--containerd-namespace", "isle-e2e", "--run-dir", runDir,
		"--stream-port", strconv.Itoa(freePort(t)), "--pod-resync", "2s"}, extra...)
	c := startStore(t, bin, 1, args...)
	k := newKubectl(t, bin, c.members[0])
	waitFor(t, 30*time.Second, "the board's Node Ready", func() bool {
		out, _, err := k.run("", "get", "node", "pi1", "-o", "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}")
		return err == nil && out == "True"
	})
	return &podBoard{c: c, kubectl: k, registry: reg, busybox: busybox, hello: hello, runDir: runDir}
}

// pod reads a pod.
func (b *podBoard) pod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	out, errOut, err := b.kubectl.run("", "get", "pod", name, "-o", "json")
	if err != nil {
		t.Fatalf("kubectl get pod %s: %v: %s", name, err, errOut)
	}
	p := &corev1.Pod{}
	if err := json.Unmarshal([]byte(out), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitPod waits until cond holds for the pod, showing it on failure.
func (b *podBoard) waitPod(t *testing.T, name string, d time.Duration, what string, cond func(p *corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var p *corev1.Pod
	deadline := time.Now().Add(d)
	for {
		p = b.pod(t, name)
		if cond(p) {
			return p
		}
		if time.Now().After(deadline) {
			st, _ := json.MarshalIndent(p.Status, "", "  ")
			desc, _, _ := b.kubectl.run("", "describe", "pod", name)
			t.Fatalf("pod %s: timed out after %v waiting for %s; status:\n%s\n%s", name, d, what, st, desc)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (b *podBoard) apply(t *testing.T, manifest string) {
	t.Helper()
	if out, errOut, err := b.kubectl.run(manifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s%s", err, out, errOut)
	}
}

// get fetches url from inside a pod's network namespace.
func (b *podBoard) get(uid, url string) (string, error) {
	tr := &http.Transport{DialContext: netns.Dialer(filepath.Join(b.runDir, "netns", uid)), DisableKeepAlives: true}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(body), fmt.Errorf("%s: %s", url, resp.Status)
	}
	return string(body), err
}

// TestHelloPod: a single board runs the tutorial's hello app: pulled from
// the registry, started, probed Ready, serving, logging.
func TestHelloPod(t *testing.T) {
	b := startPodBoard(t)
	b.apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: hello, labels: {app: hello}}
spec:
  containers:
  - name: hello
    image: %s
    ports: [{name: http, containerPort: 8080}]
    readinessProbe:
      httpGet: {path: /healthz, port: http}
      periodSeconds: 1
    resources:
      requests: {cpu: 50m, memory: 16Mi}
      limits: {memory: 64Mi}
`, b.hello))
	p := b.waitPod(t, "hello", 60*time.Second, "Running and Ready", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && podReady(p)
	})
	cs := p.Status.ContainerStatuses
	if len(cs) != 1 || cs[0].State.Running == nil || cs[0].RestartCount != 0 || !strings.HasPrefix(cs[0].ContainerID, "containerd://") ||
		!strings.Contains(cs[0].ImageID, "@sha256:") || p.Status.StartTime == nil || p.Status.HostIP != "127.0.0.1" {
		t.Fatalf("status of a running hello: %+v", p.Status)
	}
	body, err := b.get(string(p.UID), "http://127.0.0.1:8080/hello")
	if err != nil || body != "hello from hello\n" {
		t.Fatalf("GET /hello in the pod: %q, %v", body, err)
	}
	logs := b.kubectl.ok(t, "logs", "hello")
	mustMatch(t, "kubectl logs hello", logs, `hello: serving`)
	out := b.kubectl.ok(t, "exec", "hello", "--", "wget", "-qO-", "http://127.0.0.1:8080/hello")
	mustMatch(t, "kubectl exec wget", out, `^hello from hello\n$`)
}
