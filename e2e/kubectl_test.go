package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/control/apiserver"
)

// kubectlBin finds the real kubectl; without it the test fails in CI and
// skips on a developer's machine.
func kubectlBin(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("kubectl")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("kubectl is required: install it (/usr/bin/kubectl)")
		}
		t.Skip("no kubectl on this machine")
	}
	return p
}

// kubectlRunner runs kubectl against one server with an admin kubeconfig
// and a HOME of its own (kubectl caches discovery there).
type kubectlRunner struct {
	bin, home  string
	kubeconfig string
}

func newKubectl(t *testing.T, isle string, m *member) *kubectlRunner {
	t.Helper()
	return newKubectlBin(t, isle, m, kubectlBin(t))
}

func newKubectlBin(t *testing.T, isle string, m *member, bin string) *kubectlRunner {
	t.Helper()
	home := t.TempDir()
	kc := filepath.Join(home, "kubeconfig")
	out, err := exec.Command(isle, "kubeconfig", "--data-dir", m.dir, "-o", kc, "--server", "https://"+m.apiAddr()).CombinedOutput()
	if err != nil {
		t.Fatalf("isle kubeconfig: %v\n%s", err, out)
	}
	return &kubectlRunner{bin: bin, home: home, kubeconfig: kc}
}

func (k *kubectlRunner) cmd(stdin string, args ...string) *exec.Cmd {
	cmd := exec.Command(k.bin, args...)
	cmd.Env = append(os.Environ(), "HOME="+k.home, "KUBECONFIG="+k.kubeconfig)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	return cmd
}

// run runs kubectl and returns stdout and stderr; err is its exit status.
func (k *kubectlRunner) run(stdin string, args ...string) (string, string, error) {
	cmd := k.cmd(stdin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// ok runs kubectl, fails the test if it fails, and returns stdout.
func (k *kubectlRunner) ok(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := k.run("", args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// portForward starts kubectl port-forward to port of target (such as
// pod/hello) and returns the local address it listens on; it stops at the
// end of the test.
func (k *kubectlRunner) portForward(t *testing.T, target, port string) string {
	t.Helper()
	return k.startPortForward(t, target, port).local
}

// portForwarding is a kubectl port-forward running.
type portForwarding struct {
	local  string // the address it listens on
	cmd    *exec.Cmd
	stderr bytes.Buffer
}

// stop ends kubectl and returns what it wrote on stderr.
func (p *portForwarding) stop() string {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	return p.stderr.String()
}

// startPortForward starts kubectl port-forward to port of target; it stops
// at the end of the test if not before.
func (k *kubectlRunner) startPortForward(t *testing.T, target, port string) *portForwarding {
	t.Helper()
	p := &portForwarding{cmd: k.cmd("", "port-forward", target, ":"+port)}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.stop() })
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("kubectl port-forward %s %s ended: %s", target, port, p.stop())
			}
			// "Forwarding from 127.0.0.1:LOCAL -> PORT"
			var local, remote string
			if _, err := fmt.Sscanf(line, "Forwarding from %s -> %s", &local, &remote); err == nil && remote == port &&
				strings.HasPrefix(local, "127.0.0.1:") {
				go func() { // the rest, unread, must not block kubectl
					for range lines {
					}
				}()
				p.local = local
				return p
			}
		case <-timeout:
			t.Fatalf("kubectl port-forward %s %s: no Forwarding line in 30 s", target, port)
		}
	}
}

func mustMatch(t *testing.T, what, got string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile(p).MatchString(got) {
			t.Fatalf("%s: output does not match %q:\n%s", what, p, got)
		}
	}
}

// mustMatchSoon is mustMatch for output that follows the cluster's
// controllers, agents or watches: it reads it again until it matches every
// pattern or d has passed, and fails with the last read.
func mustMatchSoon(t *testing.T, d time.Duration, what string, read func() string, patterns ...string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		got, missing := read(), ""
		for _, p := range patterns {
			if !regexp.MustCompile(p).MatchString(got) {
				missing = p
				break
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: output does not match %q after %v:\n%s", what, missing, d, got)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// kubectlVersions lists the kubectl binaries to test: the one on PATH, and
// the versioned ones bundled beside it on these machines (1.30 and later).
func kubectlVersions(t *testing.T) map[string]string {
	out := map[string]string{"default": kubectlBin(t)}
	for _, v := range []string{"1.30", "1.31", "1.32", "1.33"} {
		p := "/usr/lib/google-cloud-sdk/bin/kubectl." + v
		if _, err := os.Stat(p); err == nil {
			out[v] = p
		}
	}
	return out
}

// TestKubectl runs the seed's hands-on check and the usual kubectl verbs
// against a three-server cluster on loopback, with every kubectl version
// this machine has.
func TestKubectl(t *testing.T) {
	bin := isleBinary(t)
	c := startStore(t, bin, 3)
	waitAPIReady(t, adminClient(t, bin, c.members[0]))
	versions := kubectlVersions(t)
	names := make([]string, 0, len(versions))
	for v := range versions {
		names = append(names, v)
	}
	sort.Strings(names)
	for _, v := range names {
		t.Run("kubectl "+v, func(t *testing.T) { kubectlAcceptance(t, bin, c, versions[v]) })
	}
	t.Run("OpenAPI clients", func(t *testing.T) { openAPIClients(t, bin, c) })
	t.Run("the Gateway API's CRDs", func(t *testing.T) { gatewayAPICRDs(t, bin, c) })
	t.Run("a node's credential", func(t *testing.T) { nodeProbes(t, bin, c) })
	t.Run("a student's namespace: quota and limits", func(t *testing.T) { quotaAndLimits(t, bin, c) })
	t.Run("isle user", func(t *testing.T) { userAccounts(t, bin, c) })
	t.Run("CertificateSigningRequest", func(t *testing.T) { csrFlow(t, bin, c) })
	t.Run("service-account token", func(t *testing.T) { serviceAccountToken(t, bin, c) })
}

// oldRC is a ReplicationController as old manifests write them: no
// selector (the template's labels), no replicas field in the status.
const oldRC = `apiVersion: v1
kind: ReplicationController
metadata: {name: old}
spec:
  replicas: 2
  template:
    metadata: {labels: {app: old}}
    spec:
      containers: [{name: c, image: busybox, ports: [{containerPort: 8080}]}]
`

// historyDS is a DaemonSet whose history the kubectl tests walk.
const historyDS = `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: hist}
spec:
  selector: {matchLabels: {app: hist}}
  template:
    metadata: {labels: {app: hist}}
    spec:
      containers: [{name: c, image: "busybox:1"}]
`

func kubectlAcceptance(t *testing.T, bin string, c *storeCluster, kubectl string) {
	k := newKubectlBin(t, bin, c.members[0], kubectl)
	if out, err := exec.Command(kubectl, "version", "--client").Output(); err == nil {
		t.Logf("%s", strings.TrimSpace(string(out)))
	}
	hello, err := filepath.Abs("../deploy/examples/hello.yaml")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("seed hands-on check", func(t *testing.T) {
		if out := k.ok(t, "get", "--raw=/readyz"); out != "ok" {
			t.Fatalf("/readyz answered %q, want ok", out)
		}
		// Every server is also a node: it registers itself.
		var nodes string
		waitFor(t, 20*time.Second, "three Ready control-plane nodes", func() bool {
			nodes = k.ok(t, "get", "nodes")
			return len(regexp.MustCompile(`(?m)^pi\d +Ready +control-plane +\S+ +`+regexp.QuoteMeta(apiserver.KubeVersion)+`$`).FindAllString(nodes, -1)) == 3
		})
		mustMatch(t, "get all -A -o wide", k.ok(t, "get", "all", "-A", "-o", "wide"),
			`NAMESPACE +NAME +TYPE +CLUSTER-IP +EXTERNAL-IP +PORT\(S\) +AGE +SELECTOR`,
			`default +service/kubernetes +ClusterIP +10\.43\.0\.1 +<none> +443/TCP`)
		k.ok(t, "get", "deploy,rs,pod,svc,ingress,pvc,hpa", "-A")
		k.ok(t, "get", "pv")
		k.ok(t, "get", "endpointslices", "-l", "kubernetes.io/service-name=hello")
		k.ok(t, "get", "pvc", "-A")
		mustMatch(t, "get ns", k.ok(t, "get", "ns"), `default +Active`, `kube-system +Active`, `kube-public +Active`, `kube-node-lease +Active`)
	})

	t.Run("apply prints created then unchanged then configured", func(t *testing.T) {
		out := k.ok(t, "apply", "-f", hello)
		for _, obj := range []string{"deployment.apps/hello", "deployment.apps/hello-counter", "service/hello", "ingress.networking.k8s.io/hello",
			"persistentvolumeclaim/hello-data", "horizontalpodautoscaler.autoscaling/hello"} {
			mustMatch(t, "first apply", out, regexp.QuoteMeta(obj)+" created")
		}
		mustMatch(t, "second apply", k.ok(t, "apply", "-f", hello), `deployment.apps/hello unchanged`, `service/hello unchanged`)
		data, _ := os.ReadFile(hello)
		edited := filepath.Join(t.TempDir(), "hello.yaml")
		if err := os.WriteFile(edited, bytes.Replace(data, []byte("replicas: 3"), []byte("replicas: 4"), 1), 0o600); err != nil {
			t.Fatal(err)
		}
		mustMatch(t, "apply after an edit", k.ok(t, "apply", "-f", edited), `deployment.apps/hello configured`, `service/hello unchanged`)
		if got := k.ok(t, "get", "deploy", "hello", "-o", "jsonpath={.spec.replicas} {.metadata.generation}"); got != "4 2" {
			t.Fatalf("replicas and generation after apply: %q, want \"4 2\"", got)
		}
		mustMatch(t, "get the tutorial's kinds", k.ok(t, "get", "deploy,rs,pod,svc,ingress,pvc,hpa", "-A"),
			`deployment.apps/hello +0/4`, `service/hello +ClusterIP +10\.43\.`, `ingress.networking.k8s.io/hello +isle +\* +(\S+ +)?80 `,
			`persistentvolumeclaim/hello-data +(Pending|Bound)`, `horizontalpodautoscaler.autoscaling/hello +Deployment/hello +cpu: <unknown>/70% +3 +6`)
	})

	t.Run("label annotate scale edit outputs describe", func(t *testing.T) {
		mustMatch(t, "label", k.ok(t, "label", "deploy", "hello", "tier=web"), `deployment.apps/hello labeled`)
		mustMatch(t, "annotate", k.ok(t, "annotate", "deploy", "hello", "note=hi"), `deployment.apps/hello annotated`)
		// 4 and 5 are within the HPA's 3 to 6, which it leaves alone.
		mustMatch(t, "scale", k.ok(t, "scale", "deploy", "hello", "--replicas=4"), `deployment.apps/hello scaled`)
		editor := filepath.Join(t.TempDir(), "editor.sh")
		if err := os.WriteFile(editor, []byte("#!/bin/sh\nsed -i 's/replicas: 4/replicas: 5/' \"$1\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := k.cmd("", "edit", "deploy", "hello")
		cmd.Env = append(cmd.Env, "EDITOR="+editor)
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "edited") {
			t.Fatalf("edit: %v %s", err, out)
		}
		if got := k.ok(t, "get", "deploy", "hello", "-o", "jsonpath={.spec.replicas} {.metadata.labels.tier} {.metadata.annotations.note}"); got != "5 web hi" {
			t.Fatalf("after label, annotate, scale and edit: %q, want \"5 web hi\"", got)
		}
		mustMatch(t, "-o yaml", k.ok(t, "get", "svc", "hello", "-o", "yaml"), `kind: Service`, `clusterIP: 10\.43\.`, `resourceVersion: "\d+"`)
		mustMatch(t, "-o json", k.ok(t, "get", "pvc", "hello-data", "-o", "json"), `"kind": "PersistentVolumeClaim"`)
		mustMatch(t, "describe", k.ok(t, "describe", "deploy", "hello"), `Name: +hello`, `Replicas: +5 desired`,
			`Normal +ScalingReplicaSet +.+ +deployment-controller +Scaled up replica set hello-[a-z0-9]+ from 0 to 3`)
	})

	t.Run("watch streams changes", func(t *testing.T) {
		// kubectl lists, then watches from the list's version: once the
		// marker made before it is printed, every later change streams.
		k.ok(t, "create", "configmap", "watch-marker")
		cmd := k.cmd("", "get", "configmaps", "-w", "--output-watch-events")
		var out syncBuffer
		cmd.Stdout = &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		waitFor(t, 10*time.Second, "the watch to list the marker", func() bool { return strings.Contains(out.String(), "watch-marker") })
		k.ok(t, "create", "configmap", "watched", "--from-literal=a=b")
		k.ok(t, "patch", "configmap", "watched", "-p", `{"data":{"a":"c"}}`)
		k.ok(t, "delete", "configmap", "watched")
		k.ok(t, "delete", "configmap", "watch-marker")
		waitFor(t, 10*time.Second, "the watch to show ADDED, MODIFIED and DELETED", func() bool {
			s := out.String()
			return regexp.MustCompile(`ADDED +watched`).MatchString(s) && strings.Contains(s, "MODIFIED") && regexp.MustCompile(`DELETED +watched`).MatchString(s)
		})
	})

	t.Run("RBAC objects", func(t *testing.T) {
		mustMatch(t, "create role", k.ok(t, "create", "role", "pod-reader", "--verb=get,list,watch", "--resource=pods"),
			`role.rbac.authorization.k8s.io/pod-reader created`)
		mustMatch(t, "create rolebinding", k.ok(t, "create", "rolebinding", "read-pods", "--role=pod-reader", "--user=jane", "--serviceaccount=default:robot"),
			`rolebinding.rbac.authorization.k8s.io/read-pods created`)
		mustMatch(t, "create clusterrole", k.ok(t, "create", "clusterrole", "ns-viewer", "--verb=get,list", "--resource=namespaces"),
			`clusterrole.rbac.authorization.k8s.io/ns-viewer created`)
		mustMatch(t, "create clusterrolebinding", k.ok(t, "create", "clusterrolebinding", "view-ns", "--clusterrole=ns-viewer", "--group=students"),
			`clusterrolebinding.rbac.authorization.k8s.io/view-ns created`)
		mustMatch(t, "get roles", k.ok(t, "get", "roles"), `NAME +CREATED AT`, `pod-reader +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
		mustMatch(t, "get rolebindings -o wide", k.ok(t, "get", "rolebindings", "-o", "wide"),
			`NAME +ROLE +AGE +USERS +GROUPS +SERVICEACCOUNTS`, `read-pods +Role/pod-reader +\S+ +jane +default/robot`)
		mustMatch(t, "get clusterrolebindings -o wide", k.ok(t, "get", "clusterrolebinding", "view-ns", "-o", "wide"),
			`view-ns +ClusterRole/ns-viewer +\S+ +students`)
		if got := k.ok(t, "get", "role", "pod-reader", "-o", "jsonpath={.rules[0].verbs}"); got != `["get","list","watch"]` {
			t.Errorf("the role's verbs: %s", got)
		}
		if got := k.ok(t, "get", "rolebinding", "read-pods", "-o", "jsonpath={.roleRef.apiGroup} {.subjects[0].apiGroup}"); got != "rbac.authorization.k8s.io rbac.authorization.k8s.io" {
			t.Errorf("the binding's defaulted API groups: %q", got)
		}
		_, errOut, err := k.run("", "patch", "rolebinding", "read-pods", "--type=merge", "-p", `{"roleRef":{"name":"other"}}`)
		if err == nil || !strings.Contains(errOut, "cannot change roleRef") {
			t.Errorf("a binding's roleRef changed: %v %s", err, errOut)
		}
		// kubectl auth whoami (kubectl alpha auth whoami before 1.28).
		out, errOut, err := k.run("", "auth", "whoami")
		if err != nil && strings.Contains(errOut, "unknown command") {
			out, errOut, err = k.run("", "alpha", "auth", "whoami")
		}
		if err != nil {
			t.Errorf("auth whoami: %v %s", err, errOut)
		} else {
			mustMatch(t, "auth whoami", out, `Username +isle-admin`, `Groups +\[system:masters system:authenticated\]`)
		}
		t.Run("auth can-i", func(t *testing.T) {
			sfx := strings.ReplaceAll(strings.TrimPrefix(filepath.Base(kubectl), "kubectl."), ".", "-")
			if sfx == "kubectl" {
				sfx = "default"
			}
			canIMatrix(t, k, sfx)
		})
		k.ok(t, "delete", "rolebinding", "read-pods")
		k.ok(t, "delete", "role", "pod-reader")
		k.ok(t, "delete", "clusterrolebinding", "view-ns")
		k.ok(t, "delete", "clusterrole", "ns-viewer")
	})

	t.Run("every server serves the same API", func(t *testing.T) {
		k3 := newKubectlBin(t, bin, c.members[2], kubectl)
		k3.ok(t, "create", "configmap", "from-three", "--from-literal=x=y")
		if got := k.ok(t, "get", "configmap", "from-three", "-o", "jsonpath={.data.x}"); got != "y" {
			t.Fatalf("a write through the third server, read through the first: %q", got)
		}
		k.ok(t, "delete", "configmap", "from-three")
	})

	t.Run("ReplicationController and Endpoints, the old kinds", func(t *testing.T) {
		if out, errOut, err := k.run(oldRC, "create", "-f", "-"); err != nil || !strings.Contains(out, "replicationcontroller/old created") {
			t.Fatalf("create rc: %v %s%s", err, out, errOut)
		}
		waitFor(t, 20*time.Second, "kubectl get rc old: two current", func() bool {
			return regexp.MustCompile(`(?m)^NAME +DESIRED +CURRENT +READY +AGE\nold +2 +2 +0 +\d+`).MatchString(k.ok(t, "get", "rc", "old"))
		})
		mustMatch(t, "scale rc", k.ok(t, "scale", "rc", "old", "--replicas=3"), `replicationcontroller/old scaled`)
		waitFor(t, 20*time.Second, "three pods owned by the rc", func() bool {
			return strings.Count(k.ok(t, "get", "pods", "-l", "app=old", "-o", `jsonpath={range .items[*]}{.metadata.ownerReferences[0].kind}{"\n"}{end}`), "ReplicationController\n") == 3
		})
		// "current" is the rc's status, which its controller writes after
		// the pods are made.
		mustMatchSoon(t, 20*time.Second, "describe rc", func() string { return k.ok(t, "describe", "rc", "old") },
			`(?m)^Selector: +app=old$`, `(?m)^Replicas: +3 current / 3 desired$`)
		mustMatch(t, "expose rc", k.ok(t, "expose", "rc", "old", "--port=80", "--target-port=8080"), `service/old exposed`)
		waitFor(t, 20*time.Second, "the Service's Endpoints", func() bool {
			out, _, err := k.run("", "get", "endpoints", "old", "-o", "jsonpath={.metadata.labels.endpoints\\.kubernetes\\.io/managed-by}")
			return err == nil && out == "endpoint-controller"
		})
		mustMatch(t, "delete rc", k.ok(t, "delete", "rc", "old"), `replicationcontroller "old" deleted`)
		waitFor(t, 30*time.Second, "the rc's pods deleted with it", func() bool { return k.ok(t, "get", "pods", "-l", "app=old", "-o", "name") == "" })
		k.ok(t, "delete", "svc", "old")
		waitFor(t, 20*time.Second, "the Endpoints deleted with the Service", func() bool {
			_, _, err := k.run("", "get", "endpoints", "old")
			return err != nil
		})
	})

	t.Run("DaemonSet history: rollout history and undo", func(t *testing.T) {
		t.Cleanup(func() { k.run("", "delete", "ds", "hist", "--ignore-not-found") })
		if out, errOut, err := k.run(historyDS, "create", "-f", "-"); err != nil {
			t.Fatalf("create ds: %v %s%s", err, out, errOut)
		}
		history := func(want string) {
			t.Helper()
			re := regexp.MustCompile(`(?m)^REVISION +CHANGE-CAUSE\n` + want + `$`)
			waitFor(t, 20*time.Second, "rollout history: "+want, func() bool { return re.MatchString(k.ok(t, "rollout", "history", "ds/hist")) })
		}
		want := `1 +<none>\n`
		history(want)
		for _, v := range []string{"2", "3"} {
			k.ok(t, "annotate", "--overwrite", "ds/hist", "kubernetes.io/change-cause=busybox "+v)
			k.ok(t, "set", "image", "ds/hist", "c=busybox:"+v)
			want += v + ` +busybox ` + v + `\n`
			history(want)
		}
		mustMatch(t, "rollout history --revision", k.ok(t, "rollout", "history", "ds/hist", "--revision=2"), `(?m)^\s+Image:\s+busybox:2$`)
		mustMatch(t, "rollout undo --to-revision", k.ok(t, "rollout", "undo", "ds/hist", "--to-revision=1"), `daemonset.apps/hist rolled back`)
		if got := k.ok(t, "get", "ds", "hist", "-o", "jsonpath={.spec.template.spec.containers[0].image}"); got != "busybox:1" {
			t.Fatalf("image after the undo: %q, want busybox:1", got)
		}
		k.ok(t, "delete", "ds", "hist")
	})

	t.Run("delete", func(t *testing.T) {
		mustMatch(t, "delete -f", k.ok(t, "delete", "-f", hello), `deployment.apps "hello" deleted`, `service "hello" deleted`)
		_, errOut, err := k.run("", "get", "deploy", "hello")
		if err == nil || !strings.Contains(errOut, `deployments.apps "hello" not found`) {
			t.Fatalf("get after delete: %v %s", err, errOut)
		}
	})

	t.Run("anonymous requests get 401 except health and version", func(t *testing.T) {
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		for path, want := range map[string]int{"/api/v1/namespaces": 401, "/apis": 401, "/readyz": 200, "/livez": 200, "/version": 200} {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "https://"+c.members[1].apiAddr()+path, nil)
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("anonymous GET %s: %d, want %d", path, resp.StatusCode, want)
			}
		}
	})
}

// quotaAndLimits sets up a student's namespace as a teacher would, with
// kubectl create quota and a LimitRange, and checks what kubectl shows
// of them and the refusals it prints.
func quotaAndLimits(t *testing.T, bin string, c *storeCluster) {
	k := newKubectl(t, bin, c.members[0])
	k.ok(t, "create", "namespace", "student-1")
	k.ok(t, "create", "quota", "student", "-n", "student-1", "--hard=pods=3,requests.cpu=1,limits.memory=1Gi,count/configmaps=3")
	if _, errOut, err := k.run(`apiVersion: v1
kind: LimitRange
metadata: {name: limits, namespace: student-1}
spec:
  limits:
  - type: Container
    max: {memory: 512Mi}
    default: {cpu: 200m, memory: 256Mi}
    defaultRequest: {cpu: 100m, memory: 128Mi}
`, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply the LimitRange: %v\n%s", err, errOut)
	}
	mustMatch(t, "describe limitrange", k.ok(t, "describe", "limitrange", "limits", "-n", "student-1"),
		`(?m)^Container +memory +- +512Mi +128Mi +256Mi +-$`, `(?m)^Container +cpu +- +- +100m +200m +-$`)
	// A pod without resources gets the defaults.
	k.ok(t, "run", "first", "-n", "student-1", "--image=busybox", "--restart=Never")
	if got := k.ok(t, "get", "pod", "first", "-n", "student-1", "-o", "jsonpath={.spec.containers[0].resources}"); got !=
		`{"limits":{"cpu":"200m","memory":"256Mi"},"requests":{"cpu":"100m","memory":"128Mi"}}` {
		t.Errorf("the defaulted pod's resources: %s", got)
	}
	waitFor(t, 10*time.Second, "the quota's use counted", func() bool {
		out, _, _ := k.run("", "get", "quota", "student", "-n", "student-1")
		return regexp.MustCompile(`student +count/configmaps: 1/3, pods: 1/3, requests.cpu: 100m/1 +limits.memory: 256Mi/1Gi +\d+s`).MatchString(out)
	})
	mustMatch(t, "describe quota", k.ok(t, "describe", "quota", "student", "-n", "student-1"),
		`(?m)^Resource +Used +Hard$`, `(?m)^requests.cpu +100m +1$`, `(?m)^pods +1 +3$`)
	refused := func(manifest, want string) {
		t.Helper()
		out, errOut, err := k.run(manifest, "create", "-n", "student-1", "-f", "-")
		if err == nil || !strings.Contains(errOut, want) {
			t.Errorf("create: %v %s%s, want the error %q", err, out, errOut, want)
		}
	}
	pod := func(name, resources string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec:\n  containers: [{name: c, image: busybox, resources: " + resources + "}]\n"
	}
	refused(pod("greedy", "{requests: {cpu: 950m}, limits: {cpu: \"1\"}}"),
		`Error from server (Forbidden): error when creating "STDIN": pods "greedy" is forbidden: exceeded quota: student, requested: requests.cpu=950m, used: requests.cpu=100m, limited: requests.cpu=1`)
	refused(pod("hungry", "{limits: {memory: 1Gi}}"),
		`pods "hungry" is forbidden: maximum memory usage per Container is 512Mi, but limit is 1Gi`)
	k.ok(t, "delete", "namespace", "student-1", "--wait=false")
}
