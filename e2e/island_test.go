package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/isle-cluster/isle/node/containers/ctrtest"
	"github.com/isle-cluster/isle/node/island"
	"github.com/isle-cluster/isle/node/netns"
)

// testIsland is an island made with `isle up` for one test, removed with
// `isle down` when the test ends, also when it fails.
type testIsland struct {
	bin, dir string
	state    *island.State
	kubectl  *kubectlRunner
	busybox  string // image references as pods name them
	hello    string
}

// startIsland runs `isle up` with the given boards and pushes the test
// images (busybox, and the hello app with busybox beside it) to the
// island's registry.
func startIsland(t *testing.T, servers, agents int, boardFlags ...string) *testIsland {
	t.Helper()
	return startIslandOf(t, isleBinary(t), servers, agents, boardFlags...)
}

// startIslandOf is startIsland with the isle binary bin.
func startIslandOf(t *testing.T, bin string, servers, agents int, boardFlags ...string) *testIsland {
	t.Helper()
	requireRoot(t)
	ctrtest.Require(t, "containerd", "runc", "docker-registry")
	i := &testIsland{bin: bin, dir: t.TempDir()}
	args := []string{"up", "--dir", i.dir, "--servers", strconv.Itoa(servers), "--agents", strconv.Itoa(agents)}
	for _, f := range boardFlags {
		args = append(args, "--board-flag", f)
	}
	t.Cleanup(func() { i.down(t) })
	out, err := exec.Command(i.bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("isle up: %v\n%s", err, out)
	}
	if i.state, err = island.Load(i.dir); err != nil {
		t.Fatal(err)
	}
	i.kubectl = &kubectlRunner{bin: kubectlBin(t), home: t.TempDir(), kubeconfig: i.state.Kubeconfig()}
	bb := ctrtest.Busybox(t)
	i.busybox = i.image(ctrtest.Push(t, i.state.RegistryAddr(), "isle/busybox:1", bb, nil))
	helloImg := ctrtest.Busybox(t)
	helloImg.Files["/usr/bin/hello"] = ctrtest.File{Data: ctrtest.GoBinary(t, "github.com/isle-cluster/isle/deploy/hello"), Mode: 0o755}
	helloImg.Entrypoint, helloImg.Cmd = []string{"/usr/bin/hello"}, nil
	i.hello = i.image(ctrtest.Push(t, i.state.RegistryAddr(), "isle/hello:1.0", helloImg, nil))
	return i
}

// image turns a reference on the registry's address into the name pods
// use (registry.island/...).
func (i *testIsland) image(ref string) string {
	return island.RegistryHost + strings.TrimPrefix(ref, i.state.RegistryAddr())
}

// down removes the island; on a failed test it logs the boards' logs'
// tails first.
func (i *testIsland) down(t *testing.T) {
	if t.Failed() {
		i.logTails(t)
	}
	if _, err := os.Stat(filepath.Join(i.dir, "island.json")); err != nil {
		return // no island made, or removed already
	}
	if out, err := exec.Command(i.bin, "down", "--dir", i.dir).CombinedOutput(); err != nil {
		t.Errorf("isle down: %v\n%s", err, out)
	}
}

// logTails logs the end of every board's isle log.
func (i *testIsland) logTails(t *testing.T) {
	if i.state != nil {
		for _, b := range i.state.Boards {
			if out, err := os.ReadFile(filepath.Join(i.dir, b.Name, "isle.log")); err == nil {
				if len(out) > 6000 {
					out = out[len(out)-6000:]
				}
				t.Logf("--- %s isle.log (tail) ---\n%s", b.Name, out)
			}
		}
	}
}

// killIsle kills (kill -9) the isle of a board, and nothing else of it.
func (i *testIsland) killIsle(t *testing.T, name string) {
	t.Helper()
	s, err := island.Load(i.dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Board(name)
	if err != nil {
		t.Fatal(err)
	}
	if !b.Isle.Alive() {
		t.Fatalf("%s's isle is not running", name)
	}
	if err := syscall.Kill(b.Isle.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, name+"'s isle gone", func() bool { return !b.Isle.Alive() })
}

func (i *testIsland) boardList(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(i.bin, "board", "list", "--dir", i.dir).CombinedOutput()
	if err != nil {
		t.Fatalf("isle board list: %v\n%s", err, out)
	}
	return string(out)
}

// board runs `isle board ACTION NAME`.
func (i *testIsland) board(t *testing.T, action, name string) {
	t.Helper()
	if out, err := exec.Command(i.bin, "board", action, name, "--dir", i.dir).CombinedOutput(); err != nil {
		t.Fatalf("isle board %s %s: %v\n%s", action, name, err, out)
	}
}

func (i *testIsland) apply(t *testing.T, manifest string) {
	t.Helper()
	if out, errOut, err := i.kubectl.run(manifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s%s", err, out, errOut)
	}
}

func (i *testIsland) pod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	out, errOut, err := i.kubectl.run("", "get", "pod", name, "-o", "json")
	if err != nil {
		t.Fatalf("kubectl get pod %s: %v: %s", name, err, errOut)
	}
	p := &corev1.Pod{}
	if err := json.Unmarshal([]byte(out), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitRunning waits until the pods are Running and Ready with an IP.
func (i *testIsland) waitRunning(t *testing.T, d time.Duration, names ...string) map[string]*corev1.Pod {
	t.Helper()
	out := map[string]*corev1.Pod{}
	for _, n := range names {
		var p *corev1.Pod
		waitFor(t, d, "pod "+n+" Running and Ready with an IP", func() bool {
			p = i.pod(t, n)
			return p.Status.Phase == corev1.PodRunning && podReady(p) && p.Status.PodIP != ""
		})
		out[n] = p
	}
	return out
}

// podNetns is the network namespace of a pod on its board.
func (i *testIsland) podNetns(p *corev1.Pod) string {
	return filepath.Join(i.dir, p.Spec.NodeName, "run", "netns", string(p.UID))
}

// adminSocket is the admin socket of a server board (in its run
// directory).
func (i *testIsland) adminSocket(board string) string {
	return filepath.Join(i.dir, board, "run", "admin.sock")
}

// boardNetns is a board's own network namespace.
func boardNetns(name string) string { return "/run/netns/isle-" + name }

// httpGet fetches url from inside the network namespace at ns.
func httpGet(ns, url string) (string, error) {
	tr := &http.Transport{DialContext: netns.Dialer(ns), DisableKeepAlives: true}
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

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
