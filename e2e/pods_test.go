package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"

	"github.com/isle-cluster/isle/node/containers/ctrtest"
	"github.com/isle-cluster/isle/node/island"
)

// podBoard is an island whose board `node` runs the test's pods: the
// server itself (pi1), or an agent (pi2) beside it. The island's registry
// holds the test images.
type podBoard struct {
	isl      *testIsland
	kubectl  *kubectlRunner
	registry string // the name images on the island's registry go by
	busybox  string // image reference
	hello    string // the tutorial's app, with busybox beside it
	node     string // the board running the pods
}

func startPodBoard(t *testing.T, boardFlags ...string) *podBoard {
	t.Helper()
	return startPods(t, false, boardFlags...)
}

// startPods starts an island of one server, and (onAgent) an agent
// board, whose isle gets boardFlags.
func startPods(t *testing.T, onAgent bool, boardFlags ...string) *podBoard {
	t.Helper()
	agents, node := 0, "pi1"
	if onAgent {
		agents, node = 1, "pi2"
	}
	isl := startIsland(t, 1, agents, append([]string{"--pod-resync=2s"}, boardFlags...)...)
	pb := &podBoard{isl: isl, kubectl: isl.kubectl, registry: island.RegistryHost, busybox: isl.busybox, hello: isl.hello, node: node}
	pb.waitNodeReady(t)
	return pb
}

func (b *podBoard) waitNodeReady(t *testing.T) {
	t.Helper()
	waitFor(t, 30*time.Second, "the board's Node Ready", func() bool {
		out, _, err := b.kubectl.run("", "get", "node", b.node, "-o", "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}")
		return err == nil && out == "True"
	})
}

// pod reads a pod.
func (b *podBoard) pod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	return b.isl.pod(t, name)
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
	return httpGet(filepath.Join(b.isl.dir, b.node, "run", "netns", uid), url)
}

// nodeIP is the address of the board running the pods.
func (b *podBoard) nodeIP() string { return b.isl.boardAddr(b.node) }

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
		!strings.Contains(cs[0].ImageID, "@sha256:") || p.Status.StartTime == nil || p.Status.HostIP != b.nodeIP() ||
		!strings.HasPrefix(p.Status.PodIP, "10.42.") {
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
	// kubectl port-forward: the pod's port 8080 (its localhost, inside its
	// network namespace) on a port of this machine's loopback.
	local := b.kubectl.portForward(t, "pod/hello", "8080")
	for i := range 2 { // one connection each
		resp, err := (&http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Get("http://" + local + "/hello")
		if err != nil {
			t.Fatalf("GET /hello through kubectl port-forward (%d): %v", i+1, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "hello from hello\n" {
			t.Fatalf("GET /hello through kubectl port-forward (%d): %q", i+1, body)
		}
	}
}

// TestPodLifecycle: what a kubelet does, seen through the real kubectl,
// on one board with a real containerd: restarts and their back-off,
// probes, OOM kills, volumes following their objects, images that do not
// pull and commands that do not start, logs, exec and usage.
func TestPodLifecycle(t *testing.T) {
	b := startPodBoard(t)
	bb := b.busybox
	b.apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: crash}
spec:
  containers:
  - {name: c, image: %[1]s, command: [sh, -c, "echo boom; exit 2"]}
---
apiVersion: v1
kind: Pod
metadata: {name: hang}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: %[1]s
    command: [sh, -c, "touch /tmp/alive; sleep 2; rm /tmp/alive; sleep 3600"]
    livenessProbe:
      exec: {command: [cat, /tmp/alive]}
      initialDelaySeconds: 1
      periodSeconds: 1
      failureThreshold: 2
---
apiVersion: v1
kind: Pod
metadata: {name: flip}
spec:
  containers:
  - name: c
    image: %[1]s
    command: [sleep, "3600"]
    readinessProbe:
      exec: {command: [cat, /tmp/ready]}
      periodSeconds: 1
---
apiVersion: v1
kind: Pod
metadata: {name: hog}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: %[1]s
    command: [sh, -c, "x=$(head -c 100000000 /dev/zero | tr '\\0' a); echo survived"]
    resources: {limits: {memory: 16Mi}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {greeting: hello}
---
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {password: s3cret}
---
apiVersion: v1
kind: Pod
metadata: {name: files}
spec:
  containers:
  - name: c
    image: %[1]s
    command: [sleep, "3600"]
    env:
    - name: GREETING
      valueFrom: {configMapKeyRef: {name: settings, key: greeting}}
    - name: MY_NODE
      valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
    volumeMounts:
    - {name: cfg, mountPath: /etc/cfg}
    - {name: sec, mountPath: /etc/sec}
  volumes:
  - name: cfg
    configMap: {name: settings}
  - name: sec
    secret: {secretName: creds}
---
apiVersion: v1
kind: Pod
metadata: {name: noimage}
spec:
  containers:
  - {name: c, image: %[2]s/isle/nothere:1}
---
apiVersion: v1
kind: Pod
metadata: {name: badcmd}
spec:
  containers:
  - {name: c, image: %[1]s, command: [/no/such/program]}
---
apiVersion: v1
kind: Pod
metadata: {name: talker}
spec:
  containers:
  - {name: c, image: %[1]s, command: [sh, -c, "i=0; while true; do echo line $i; i=$((i+1)); sleep 0.2; done"]}
`, bb, b.registry))

	t.Run("crash loop backs off", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		p := b.waitPod(t, "crash", 60*time.Second, "two restarts and CrashLoopBackOff", func(p *corev1.Pod) bool {
			cs := p.Status.ContainerStatuses
			return len(cs) == 1 && cs[0].RestartCount >= 2 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "CrashLoopBackOff"
		})
		cs := p.Status.ContainerStatuses[0]
		if lt := cs.LastTerminationState.Terminated; lt == nil || lt.ExitCode != 2 || lt.Reason != "Error" {
			t.Fatalf("lastState of a crashing container: %+v", cs.LastTerminationState)
		}
		// Restarts at once, then after 10 s: not sooner.
		if took := time.Since(start); took < 10*time.Second {
			t.Fatalf("two restarts within %v: no back-off", took)
		}
		mustMatch(t, "logs --previous", b.kubectl.ok(t, "logs", "crash", "--previous"), `^boom\n$`)
	})

	t.Run("liveness restarts a hung container", func(t *testing.T) {
		t.Parallel()
		p := b.waitPod(t, "hang", 60*time.Second, "a restart by liveness", func(p *corev1.Pod) bool {
			cs := p.Status.ContainerStatuses
			return len(cs) == 1 && cs[0].RestartCount >= 1 && cs[0].LastTerminationState.Terminated != nil
		})
		// It was alive for 2 s, then hung: killed after that, not before.
		if last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated; last.FinishedAt.Sub(last.StartedAt.Time) < 2*time.Second {
			t.Fatalf("killed %v after it started, while it was still alive", last.FinishedAt.Sub(last.StartedAt.Time))
		}
		// The board posts its Events from a queue of their own, beside
		// the pod's status.
		mustMatchSoon(t, 15*time.Second, "events of hang", func() string {
			return b.kubectl.ok(t, "get", "events", "--field-selector", "involvedObject.name=hang", "-o", "jsonpath={range .items[*]}{.reason}: {.message}{\"\\n\"}{end}")
		}, `Unhealthy: Liveness probe failed`, `Killing: Container c failed liveness probe, will be restarted`)
	})

	t.Run("readiness flips Ready", func(t *testing.T) {
		t.Parallel()
		b.waitPod(t, "flip", 60*time.Second, "running, not ready", func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodRunning && !podReady(p)
		})
		b.kubectl.ok(t, "exec", "flip", "--", "touch", "/tmp/ready")
		b.waitPod(t, "flip", 20*time.Second, "Ready", podReady)
		b.kubectl.ok(t, "exec", "flip", "--", "rm", "/tmp/ready")
		b.waitPod(t, "flip", 20*time.Second, "not Ready again", func(p *corev1.Pod) bool { return !podReady(p) })
	})

	t.Run("OOM is OOMKilled", func(t *testing.T) {
		t.Parallel()
		p := b.waitPod(t, "hog", 60*time.Second, "terminated", func(p *corev1.Pod) bool {
			cs := p.Status.ContainerStatuses
			return len(cs) == 1 && cs[0].State.Terminated != nil
		})
		term := p.Status.ContainerStatuses[0].State.Terminated
		if term.Reason != "OOMKilled" || term.ExitCode != 137 || p.Status.Phase != corev1.PodFailed {
			t.Fatalf("a container over its memory limit: phase %s, %+v", p.Status.Phase, term)
		}
	})

	t.Run("configMap and secret changes reach the files", func(t *testing.T) {
		t.Parallel()
		b.waitPod(t, "files", 60*time.Second, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
		out := b.kubectl.ok(t, "exec", "files", "--", "sh", "-c", "cat /etc/cfg/greeting; echo; cat /etc/sec/password; echo; echo $GREETING $MY_NODE")
		mustMatch(t, "files and env", out, `^hello\ns3cret\nhello pi1\n$`)
		b.kubectl.ok(t, "patch", "configmap", "settings", "-p", `{"data":{"greeting":"bonjour"}}`)
		b.kubectl.ok(t, "patch", "secret", "creds", "-p", `{"stringData":{"password":"n3w"}}`)
		waitFor(t, 30*time.Second, "the new values in the files", func() bool {
			out, _, err := b.kubectl.run("", "exec", "files", "--", "sh", "-c", "cat /etc/cfg/greeting /etc/sec/password")
			return err == nil && out == "bonjourn3w"
		})
	})

	t.Run("missing image", func(t *testing.T) {
		t.Parallel()
		p := b.waitPod(t, "noimage", 60*time.Second, "ErrImagePull or ImagePullBackOff", func(p *corev1.Pod) bool {
			cs := p.Status.ContainerStatuses
			return len(cs) == 1 && cs[0].State.Waiting != nil &&
				(cs[0].State.Waiting.Reason == "ErrImagePull" || cs[0].State.Waiting.Reason == "ImagePullBackOff")
		})
		if p.Status.Phase != corev1.PodPending {
			t.Fatalf("phase %s, want Pending", p.Status.Phase)
		}
		mustMatchSoon(t, 15*time.Second, "describe noimage", func() string { return b.kubectl.ok(t, "describe", "pod", "noimage") },
			`Failed to pull image .*nothere:1.*not found`)
	})

	t.Run("bad command", func(t *testing.T) {
		t.Parallel()
		p := b.waitPod(t, "badcmd", 60*time.Second, "StartError", func(p *corev1.Pod) bool {
			cs := p.Status.ContainerStatuses
			if len(cs) != 1 {
				return false
			}
			term := cs[0].State.Terminated
			if term == nil {
				term = cs[0].LastTerminationState.Terminated
			}
			return term != nil && term.Reason == "StartError"
		})
		cs := p.Status.ContainerStatuses[0]
		term := cs.State.Terminated
		if term == nil {
			term = cs.LastTerminationState.Terminated
		}
		if term.ExitCode != 128 || !strings.Contains(term.Message, "/no/such/program") {
			t.Fatalf("a command that does not exist: %+v", term)
		}
	})

	t.Run("logs follow, exec with stdin and exit codes", func(t *testing.T) {
		t.Parallel()
		b.waitPod(t, "talker", 60*time.Second, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
		// Running comes when the container starts, its first line a
		// moment later.
		mustMatchSoon(t, 10*time.Second, "logs --tail", func() string { return b.kubectl.ok(t, "logs", "talker", "--tail=1") }, `^line \d+\n$`)
		mustMatch(t, "logs --timestamps", b.kubectl.ok(t, "logs", "talker", "--timestamps", "--tail=1"), `^\d{4}-\d\d-\d\dT\S+Z line \d+\n$`)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		cmd := b.kubectl.cmd("", "logs", "-f", "talker", "--since=1s")
		cmd = execContext(ctx, cmd)
		out, _ := cmd.Output()
		if n := strings.Count(string(out), "line "); n < 5 {
			t.Fatalf("logs -f for 3 s of a pod logging 5 lines a second: %d lines:\n%s", n, out)
		}
		got, _, err := b.kubectl.run("from stdin\n", "exec", "-i", "talker", "--", "sh", "-c", "read x; echo got $x")
		if err != nil || got != "got from stdin\n" {
			t.Fatalf("exec -i: %q, %v", got, err)
		}
		_, _, err = b.kubectl.run("", "exec", "talker", "--", "sh", "-c", "exit 3")
		if code := exitCode(err); code != 3 {
			t.Fatalf("kubectl exec of a command exiting 3 exited %d (%v)", code, err)
		}
		// A terminal: kubectl needs one on its side too, which script(1)
		// (util-linux) gives it.
		if _, err := exec.LookPath("script"); err != nil {
			t.Fatal("kubectl exec -it needs script(1) to give kubectl a terminal: install bsdutils")
		}
		tty := b.kubectl.cmd("", "exec", "-it", "talker", "--", "sh", "-c", "tty; stty size")
		ttyOut, err := execScript(tty)
		if err != nil || !strings.Contains(ttyOut, "/dev/pts/") {
			t.Fatalf("exec -it: %q, %v", ttyOut, err)
		}
	})

	t.Run("kubectl top pod", func(t *testing.T) {
		t.Parallel()
		b.waitPod(t, "talker", 60*time.Second, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
		waitFor(t, 60*time.Second, "talker in kubectl top pod", func() bool {
			out, _, err := b.kubectl.run("", "top", "pod", "talker", "--no-headers")
			return err == nil && strings.HasPrefix(out, "talker ")
		})
		out := b.kubectl.ok(t, "top", "pod", "talker", "--containers", "--no-headers")
		mustMatch(t, "top --containers", out, `^talker\s+c\s+\d+m\s+\d+Mi`)
	})
}

func execContext(ctx context.Context, cmd *exec.Cmd) *exec.Cmd {
	c := exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	c.Env, c.Stdin = cmd.Env, cmd.Stdin
	return c
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err == nil {
		return 0
	}
	return -1
}

// execScript runs cmd under script(1), which gives it a terminal.
func execScript(cmd *exec.Cmd) (string, error) {
	line := ""
	for _, a := range cmd.Args {
		line += " '" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	s := exec.Command("script", "-qec", line, "/dev/null")
	s.Env = cmd.Env
	out, err := s.CombinedOutput()
	return string(out), err
}

// TestAgentRestart: killing the agent (kill -9) or losing every server
// stops no container; the restarted agent adopts what runs (nothing
// restarts, the status stays right) and cleans up a pod deleted while it
// was down.
func TestAgentRestart(t *testing.T) {
	b := startPods(t, true)
	b.apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: hello}
spec:
  nodeSelector: {kubernetes.io/hostname: pi2}
  containers:
  - name: hello
    image: %s
    readinessProbe:
      httpGet: {path: /healthz, port: 8080}
      periodSeconds: 1
---
apiVersion: v1
kind: Pod
metadata: {name: doomed}
spec:
  nodeSelector: {kubernetes.io/hostname: pi2}
  terminationGracePeriodSeconds: 2
  containers:
  - {name: c, image: %s, command: [sleep, "3600"]}
`, b.hello, b.busybox))
	running := func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && podReady(p) }
	before := b.waitPod(t, "hello", 60*time.Second, "Running and Ready", running)
	b.waitPod(t, "doomed", 60*time.Second, "Running", running)
	uid := string(before.UID)
	serving := func() bool {
		body, err := b.get(uid, "http://127.0.0.1:8080/hello")
		return err == nil && body == "hello from hello\n"
	}
	if !serving() {
		t.Fatal("hello does not answer in its pod")
	}

	// The agent's isle dies (kill -9); a pod is deleted meanwhile.
	b.isl.killIsle(t, "pi2")
	if !serving() {
		t.Fatal("hello stopped answering when its agent was killed")
	}
	if out, errOut, err := b.kubectl.run("", "delete", "pod", "doomed", "--wait=false"); err != nil {
		t.Fatalf("kubectl delete pod doomed: %v\n%s%s", err, out, errOut)
	}
	// The server goes too.
	b.isl.killIsle(t, "pi1")
	time.Sleep(2 * time.Second)
	if !serving() {
		t.Fatal("hello stopped answering without any server")
	}
	b.isl.board(t, "restart", "pi1")
	b.isl.board(t, "restart", "pi2")
	b.waitNodeReady(t)

	after := b.waitPod(t, "hello", 60*time.Second, "Running and Ready after the restarts", running)
	bc, ac := before.Status.ContainerStatuses[0], after.Status.ContainerStatuses[0]
	if ac.ContainerID != bc.ContainerID || ac.RestartCount != 0 || !ac.State.Running.StartedAt.Equal(&bc.State.Running.StartedAt) {
		t.Fatalf("hello's container changed across the agent's restart:\nbefore %+v\nafter  %+v", bc, ac)
	}
	if !serving() {
		t.Fatal("hello does not answer after the restarts")
	}
	mustMatch(t, "logs after the restart", b.kubectl.ok(t, "logs", "hello"), `hello: serving`)
	waitFor(t, 30*time.Second, "the pod deleted while the agent was down to be gone", func() bool {
		_, errOut, err := b.kubectl.run("", "get", "pod", "doomed")
		return err != nil && strings.Contains(errOut, "NotFound")
	})
	if ents, _ := os.ReadDir(filepath.Join(b.isl.dir, "pi2", "run", "netns")); len(ents) != 1 {
		t.Fatalf("network namespaces left: %d, want 1 (hello's)", len(ents))
	}
}

// TestPodSpecs: init containers in order, preStop hooks and the stop
// signal on deletion, a private registry through imagePullSecrets,
// kubectl attach, and a local-path volume whose data goes with its claim.
func TestPodSpecs(t *testing.T) {
	// The private registry is on the island's LAN, beside its own, in
	// plain HTTP.
	const privateAddr = "10.77.0.1:5001"
	tools := buildInClusterTools(t.TempDir()) // the in-cluster operator's, while the island starts
	t.Cleanup(func() { _ = tools.wait() })    // before its directory goes
	b := startPodBoard(t, "--insecure-registry="+privateAddr)
	bb := b.busybox
	host := t.TempDir()
	// A registry asking for a password, holding an image only there.
	hash, err := bcrypt.GenerateFromPassword([]byte("p4ss"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	htpasswd := filepath.Join(t.TempDir(), "htpasswd")
	if err := os.WriteFile(htpasswd, []byte("puller:"+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	private := ctrtest.RegistryAt(t, privateAddr, htpasswd)
	secretImg := ctrtest.Push(t, private, "isle/secret:1", ctrtest.Busybox(t), &ctrtest.Auth{Username: "puller", Password: "p4ss"})
	b.kubectl.ok(t, "create", "secret", "docker-registry", "regcred", "--docker-server="+private, "--docker-username=puller", "--docker-password=p4ss")

	b.apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: inits}
spec:
  initContainers:
  - {name: one, image: %[1]s, command: [sh, -c, "echo one >> /work/order"], volumeMounts: [{name: work, mountPath: /work}]}
  - {name: two, image: %[1]s, command: [sh, -c, "echo two >> /work/order"], volumeMounts: [{name: work, mountPath: /work}]}
  containers:
  - {name: c, image: %[1]s, command: [sh, -c, "cat /work/order; sleep 3600"], volumeMounts: [{name: work, mountPath: /work}]}
  volumes: [{name: work, emptyDir: {}}]
---
apiVersion: v1
kind: Pod
metadata: {name: polite}
spec:
  terminationGracePeriodSeconds: 10
  containers:
  - name: c
    image: %[1]s
    command: [sh, -c, "trap 'echo term >> /host/log; exit 0' TERM; while true; do sleep 0.1; done"]
    lifecycle:
      preStop:
        exec: {command: [sh, -c, "echo prestop >> /host/log"]}
    volumeMounts: [{name: host, mountPath: /host}]
  volumes: [{name: host, hostPath: {path: %[2]s}}]
---
apiVersion: v1
kind: Pod
metadata: {name: nosecret}
spec:
  containers: [{name: c, image: %[3]s, imagePullPolicy: Always, command: [sleep, "3600"]}]
---
apiVersion: v1
kind: Pod
metadata: {name: withsecret}
spec:
  imagePullSecrets: [{name: regcred}]
  containers: [{name: c, image: %[3]s, command: [sleep, "3600"]}]
---
apiVersion: v1
kind: Pod
metadata: {name: echoer}
spec:
  restartPolicy: OnFailure
  containers:
  - {name: c, image: %[1]s, stdin: true, stdinOnce: true, command: [sh, -c, "while read x; do echo got $x; done; echo bye"]}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 10Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: writer}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: c, image: %[1]s, command: [sh, -c, "echo kept > /data/f; sleep 3600"], volumeMounts: [{name: d, mountPath: /data}]}
  volumes: [{name: d, persistentVolumeClaim: {claimName: data}}]
---
apiVersion: v1
kind: Pod
metadata: {name: envs}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: %[1]s
    env: [{name: WHO, value: "$(KUBERNETES_SERVICE_HOST)"}]
    command: [sh, -c, "echo 'api at $(WHO):$(KUBERNETES_SERVICE_PORT) $(NOPE)'; env | grep ^KUBERNETES_SERVICE_ | sort; exit 3"]
    terminationMessagePolicy: FallbackToLogsOnError
---
apiVersion: v1
kind: Pod
metadata: {name: deadline}
spec:
  terminationGracePeriodSeconds: 1
  containers: [{name: c, image: %[1]s, command: [sleep, "3600"]}]
---
apiVersion: v1
kind: Pod
metadata: {name: nonroot-message}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: %[1]s
    command: [sh, -c, "echo -n DONE > /dev/termination-custom-log"]
    terminationMessagePath: /dev/termination-custom-log
    securityContext: {runAsUser: 10000}
---
apiVersion: v1
kind: Pod
metadata: {name: sysctls}
spec:
  restartPolicy: Never
  securityContext: {sysctls: [{name: kernel/shm_rmid_forced, value: "1"}]}
  containers: [{name: c, image: %[1]s, command: [cat, /proc/sys/kernel/shm_rmid_forced]}]
---
apiVersion: v1
kind: Pod
metadata: {name: unsafe-sysctl}
spec:
  securityContext: {sysctls: [{name: kernel.msgmax, value: "10000000"}]}
  containers: [{name: c, image: %[1]s, command: [sleep, "3600"]}]
---
apiVersion: v1
kind: Pod
metadata: {name: incluster}
spec:
  containers:
  - name: c
    image: %[1]s
    command: [sh, -c, "cd /var/run/secrets/kubernetes.io/serviceaccount && cat namespace && echo && head -1 ca.crt && cat token && echo && sleep 3600"]
`, bb, host, secretImg))
	isRunning := func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }

	t.Run("an operator in a pod, installed by Helm with its RBAC", func(t *testing.T) {
		t.Parallel()
		inClusterOperator(t, b, tools)
	})

	t.Run("Helm install, upgrade and rollback with server-side apply", func(t *testing.T) {
		t.Parallel()
		helmLifecycle(t, b, tools)
	})

	t.Run("a chart of a StatefulSet, a PodDisruptionBudget and a NetworkPolicy, with Helm", func(t *testing.T) {
		t.Parallel()
		helmStatefulChart(t, b, tools)
	})

	t.Run("admission webhooks served by a pod", func(t *testing.T) {
		t.Parallel()
		admissionWebhooks(t, b)
	})

	t.Run("the pod's service-account credentials", func(t *testing.T) {
		t.Parallel()
		b.waitPod(t, "incluster", 60*time.Second, "Running", isRunning)
		var lines []string
		waitFor(t, 10*time.Second, "the pod's output", func() bool {
			out, _, err := b.kubectl.run("", "logs", "incluster")
			lines = strings.Split(strings.TrimSpace(out), "\n")
			return err == nil && len(lines) == 3
		})
		if lines[0] != "default" || lines[1] != "-----BEGIN CERTIFICATE-----" {
			t.Fatalf("namespace and ca.crt: %q", lines)
		}
		// The token is the pod's service account's, bound to the pod.
		sa := &kubectlRunner{bin: b.kubectl.bin, home: t.TempDir(), kubeconfig: filepath.Join(t.TempDir(), "kubeconfig")}
		kc, err := os.ReadFile(b.kubectl.kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(sa.kubeconfig, kc, 0o600); err != nil {
			t.Fatal(err)
		}
		sa.ok(t, "config", "set-credentials", "sa", "--token="+lines[2])
		sa.ok(t, "config", "set-context", "--current", "--user=sa")
		mustMatch(t, "whoami with the pod's token", sa.ok(t, "auth", "whoami"), `Username +system:serviceaccount:default:default`,
			`authentication.kubernetes.io/pod-name +\[incluster\]`)
	})

	t.Run("init containers run in order first", func(t *testing.T) {
		t.Parallel()
		p := b.waitPod(t, "inits", 60*time.Second, "Running", isRunning)
		for _, cs := range p.Status.InitContainerStatuses {
			if cs.State.Terminated == nil || cs.State.Terminated.Reason != "Completed" || !cs.Ready {
				t.Fatalf("init container %s: ready %v, %+v", cs.Name, cs.Ready, cs.State)
			}
		}
		waitFor(t, 10*time.Second, "the main container's output", func() bool {
			out, _, err := b.kubectl.run("", "logs", "inits", "-c", "c")
			return err == nil && out == "one\ntwo\n"
		})
	})

	t.Run("deletion runs preStop, then the stop signal", func(t *testing.T) {
		t.Parallel()
		b.waitPod(t, "polite", 60*time.Second, "Running", isRunning)
		time.Sleep(500 * time.Millisecond) // the shell sets its trap
		start := time.Now()
		b.kubectl.ok(t, "delete", "pod", "polite")
		if took := time.Since(start); took > 8*time.Second {
			t.Errorf("a pod leaving on SIGTERM took %v to delete", took)
		}
		got, _ := os.ReadFile(filepath.Join(host, "log"))
		if string(got) != "prestop\nterm\n" {
			t.Fatalf("the pod's hooks and signal, in order: %q", got)
		}
	})

	t.Run("private registry needs imagePullSecrets", func(t *testing.T) {
		t.Parallel()
		b.waitPod(t, "withsecret", 60*time.Second, "Running", isRunning)
		b.waitPod(t, "nosecret", 60*time.Second, "a pull refused", func(p *corev1.Pod) bool {
			cs := p.Status.ContainerStatuses
			return len(cs) == 1 && cs[0].State.Waiting != nil && strings.Contains(cs[0].State.Waiting.Reason, "Image")
		})
		mustMatchSoon(t, 15*time.Second, "events of a pull without credentials", func() string {
			return b.kubectl.ok(t, "get", "events", "--field-selector", "involvedObject.name=nosecret", "-o", "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}")
		}, `(?i)failed to pull image .*(401|unauthorized|authorization failed)`)
	})

	t.Run("attach", func(t *testing.T) {
		t.Parallel()
		b.waitPod(t, "echoer", 60*time.Second, "Running", isRunning)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := execContext(ctx, b.kubectl.cmd("hi\n", "attach", "-i", "echoer"))
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		out, errOut := stdout.String(), stderr.String()
		if err != nil || !strings.Contains(out, "got hi") || !strings.Contains(out, "bye") {
			t.Fatalf("kubectl attach -i: %q, %q, %v", out, errOut, err)
		}
	})

	// As the kubelet: the kubernetes Service's variables in every pod,
	// $(VAR) in env and command expanded, the log's end as the message of
	// a container that failed with FallbackToLogsOnError.
	t.Run("Service variables, $(VAR) expansion, termination message from the log", func(t *testing.T) {
		t.Parallel()
		p := b.waitPod(t, "envs", 60*time.Second, "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
		ip := b.kubectl.ok(t, "get", "service", "kubernetes", "-o", "jsonpath={.spec.clusterIP}")
		port := b.kubectl.ok(t, "get", "service", "kubernetes", "-o", "jsonpath={.spec.ports[0].port}")
		want := fmt.Sprintf("api at %[1]s:%[2]s $(NOPE)\nKUBERNETES_SERVICE_HOST=%[1]s\nKUBERNETES_SERVICE_PORT=%[2]s\nKUBERNETES_SERVICE_PORT_HTTPS=%[2]s\n", ip, port)
		if out := b.kubectl.ok(t, "logs", "envs"); out != want {
			t.Errorf("log %q, want %q", out, want)
		}
		cs := p.Status.ContainerStatuses
		if len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 3 || cs[0].State.Terminated.Message != want {
			t.Fatalf("container status %+v: want exit 3 and the log as the message", cs)
		}
	})

	t.Run("a user that is not root writes the termination message", func(t *testing.T) {
		t.Parallel()
		p := b.waitPod(t, "nonroot-message", 60*time.Second, "Succeeded", func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		})
		cs := p.Status.ContainerStatuses
		if p.Status.Phase != corev1.PodSucceeded || len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.Message != "DONE" {
			t.Fatalf("phase %s, container statuses %+v: want Succeeded with the message DONE", p.Status.Phase, cs)
		}
	})

	t.Run("safe sysctls are set in the pod, others refused", func(t *testing.T) {
		t.Parallel()
		b.waitPod(t, "sysctls", 60*time.Second, "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
		if out := b.kubectl.ok(t, "logs", "sysctls"); out != "1\n" {
			t.Errorf("sysctl in the pod: %q", out)
		}
		p := b.waitPod(t, "unsafe-sysctl", 60*time.Second, "Failed with SysctlForbidden", func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodFailed && p.Status.Reason == "SysctlForbidden"
		})
		if !strings.Contains(p.Status.Message, `"kernel.msgmax" not allowlisted`) {
			t.Errorf("message %q", p.Status.Message)
		}
	})

	t.Run("a deadline set on a running pod fails it", func(t *testing.T) {
		t.Parallel()
		b.waitPod(t, "deadline", 60*time.Second, "Running", isRunning)
		b.kubectl.ok(t, "patch", "pod", "deadline", "-p", `{"spec":{"activeDeadlineSeconds":2}}`)
		failed := func(p *corev1.Pod) bool {
			cs := p.Status.ContainerStatuses
			return p.Status.Phase == corev1.PodFailed && p.Status.Reason == "DeadlineExceeded" && len(cs) == 1 && cs[0].State.Terminated != nil
		}
		p := b.waitPod(t, "deadline", 60*time.Second, "Failed with DeadlineExceeded", failed)
		if p.Status.Message != "Pod was active on the node longer than the specified deadline" {
			t.Errorf("message %q", p.Status.Message)
		}
		// The stopped container stays, with its logs, until the pod is
		// deleted: a later sync of the pod must not see it gone (it once
		// went back to waiting "ContainerCreating").
		b.kubectl.ok(t, "logs", "deadline")
		time.Sleep(3 * time.Second)
		if p := b.waitPod(t, "deadline", time.Second, "still Failed with its container terminated", failed); p.Status.ContainerStatuses[0].ContainerID == "" {
			t.Errorf("container status lost its container: %+v", p.Status.ContainerStatuses[0])
		}
	})

	t.Run("a local-path volume's data goes with its claim", func(t *testing.T) {
		t.Parallel()
		b.waitPod(t, "writer", 60*time.Second, "Running", isRunning)
		pv := b.kubectl.ok(t, "get", "pvc", "data", "-o", "jsonpath={.spec.volumeName}")
		dir := filepath.Join(b.isl.dir, b.node, "data", "storage", pv+"_default_data")
		waitFor(t, 10*time.Second, "the file in the volume's directory", func() bool {
			got, err := os.ReadFile(filepath.Join(dir, "f"))
			return err == nil && string(got) == "kept\n"
		})
		b.kubectl.ok(t, "delete", "pod", "writer")
		b.kubectl.ok(t, "delete", "pvc", "data")
		waitFor(t, 60*time.Second, "the volume and its directory to be gone", func() bool {
			_, errOut, err := b.kubectl.run("", "get", "pv", pv)
			_, statErr := os.Stat(dir)
			return err != nil && strings.Contains(errOut, "NotFound") && errors.Is(statErr, os.ErrNotExist)
		})
	})
}

// bundledKubectl is the path of the kubectl of that minor version bundled
// on these machines; without it the test fails in CI and skips elsewhere.
func bundledKubectl(t *testing.T, minor string) string {
	t.Helper()
	p := "/usr/lib/google-cloud-sdk/bin/kubectl." + minor
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("kubectl %s is required (%s): %v", minor, p, err)
		}
		t.Skipf("no kubectl %s on this machine", minor)
	}
	return p
}

// klogLine is a line of kubectl's own log (klog: "E1201 12:00:00.000000 …").
var klogLine = regexp.MustCompile(`(?m)^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ `)

// TestKubectlStreamsQuiet: kubectl exec (with and without -i, and -it),
// attach and port-forward work and print on stderr nothing of their own,
// with the oldest and the newest kubectl bundled, and the oldest speaking
// WebSocket (issue 21: kubectl 1.30 to 1.33 logged "Unknown stream id 1,
// discarding message" when a message came before it had made its
// streams). Exec and attach speak SPDY up to 1.29, WebSocket from 1.30 on.
func TestKubectlStreamsQuiet(t *testing.T) {
	b := startPodBoard(t)
	b.apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: hello}
spec:
  containers:
  - name: hello
    image: %s
    ports: [{containerPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata: {name: chatty}
spec:
  containers:
  - name: chatty
    image: %s
    stdin: true
    command: [sh, -c, "while true; do echo tick; sleep 0.02; done"]
`, b.hello, b.busybox))
	for _, name := range []string{"hello", "chatty"} {
		b.waitPod(t, name, 60*time.Second, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	}
	if _, err := exec.LookPath("script"); err != nil {
		t.Fatal("kubectl exec -it needs script(1) to give kubectl a terminal: install bsdutils")
	}
	quiet := func(t *testing.T, what, stderr string) {
		t.Helper()
		// kubectl attach says this of its own, unless -q.
		if strings.ReplaceAll(stderr, "If you don't see a command prompt, try pressing enter.\n", "") != "" {
			t.Errorf("kubectl %s wrote on stderr:\n%s", what, stderr)
		}
	}
	for _, minor := range []string{"1.27", "1.30", "1.33"} {
		t.Run("exec and attach with kubectl "+minor, func(t *testing.T) {
			k := *b.kubectl
			k.bin = bundledKubectl(t, minor)
			// Several times: what kubectl drops comes in a short window.
			for i := range 5 {
				out, errOut, err := k.run("", "exec", "hello", "--", "echo", "hi")
				if err != nil || out != "hi\n" {
					t.Fatalf("exec %d: %q, %v\n%s", i, out, err, errOut)
				}
				quiet(t, "exec", errOut)
			}
			out, errOut, err := k.run("from stdin\n", "exec", "-i", "hello", "--", "sh", "-c", "read x; echo got $x")
			if err != nil || out != "got from stdin\n" {
				t.Fatalf("exec -i: %q, %v\n%s", out, err, errOut)
			}
			quiet(t, "exec -i", errOut)
			// With a terminal, stdout and stderr are one: no log line in it.
			ttyOut, err := execScript(k.cmd("", "exec", "-it", "hello", "--", "echo", "on a tty"))
			if err != nil || !strings.Contains(ttyOut, "on a tty") || klogLine.MatchString(ttyOut) {
				t.Fatalf("exec -it: %q, %v", ttyOut, err)
			}
			// Attached to a process that writes at every moment, with
			// and without stdin, until it has written a few lines.
			for _, args := range [][]string{{"attach", "chatty"}, {"attach", "-i", "chatty"}} {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				cmd := execContext(ctx, k.cmd("", args...))
				stdin, err := cmd.StdinPipe() // kept open: the session lasts
				if err != nil {
					t.Fatal(err)
				}
				var stdout, stderr syncBuffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				waitFor(t, 15*time.Second, "ticks through kubectl "+strings.Join(args, " "), func() bool {
					return strings.Count(stdout.String(), "tick\n") >= 5
				})
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				stdin.Close()
				cancel()
				quiet(t, strings.Join(args, " "), stderr.String())
			}
		})
	}
	for _, minor := range []string{"1.27", "1.33"} {
		t.Run("port-forward with kubectl "+minor, func(t *testing.T) {
			k := *b.kubectl
			k.bin = bundledKubectl(t, minor)
			pf := k.startPortForward(t, "pod/hello", "8080")
			for i := range 2 {
				resp, err := (&http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Get("http://" + pf.local + "/hello")
				if err != nil {
					t.Fatalf("GET /hello through kubectl port-forward (%d): %v", i+1, err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(body) != "hello from hello\n" {
					t.Fatalf("GET /hello through kubectl port-forward (%d): %q", i+1, body)
				}
			}
			quiet(t, "port-forward", pf.stop())
		})
	}
}

// syncBuffer is a process's output that the test reads while it is
// written.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
