package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/miekg/dns"

	"github.com/isle-cluster/isle/hw/led"
	"github.com/isle-cluster/isle/node/containers/ctrtest"
	"github.com/isle-cluster/isle/node/island"
	"github.com/isle-cluster/isle/node/netns"
)

// echoAnswer is what e2e/echoserver answers.
type echoAnswer struct {
	Host   string      `json:"host"`
	Path   string      `json:"path"`
	Remote string      `json:"remote"`
	Header http.Header `json:"header"`
}

// trafficManifest: three echo replicas and one other, Services of every
// kind over them, and a client pod on pi4 (busybox and the hello client).
const trafficManifest = `apiVersion: apps/v1
kind: Deployment
metadata: {name: echo}
spec:
  replicas: 3
  selector: {matchLabels: {app: echo}}
  template:
    metadata: {labels: {app: echo}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: echo
        image: ECHO
        ports: [{name: http, containerPort: 8080}]
        readinessProbe:
          httpGet: {path: /ready, port: http}
          periodSeconds: PERIOD
          failureThreshold: 1
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: other}
spec:
  replicas: 1
  selector: {matchLabels: {app: other}}
  template:
    metadata: {labels: {app: other}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: echo
        image: ECHO
        ports: [{name: http, containerPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: echo}
spec:
  selector: {app: echo}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: v1
kind: Service
metadata: {name: echo-np}
spec:
  type: NodePort
  selector: {app: echo}
  ports: [{name: http, port: 80, targetPort: http, nodePort: 30080}]
---
apiVersion: v1
kind: Service
metadata: {name: echo-local}
spec:
  type: NodePort
  externalTrafficPolicy: Local
  selector: {app: echo}
  ports: [{name: http, port: 80, targetPort: http, nodePort: 30081}]
---
apiVersion: v1
kind: Service
metadata: {name: echo-sticky}
spec:
  sessionAffinity: ClientIP
  selector: {app: echo}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: v1
kind: Service
metadata: {name: echo-headless}
spec:
  clusterIP: None
  selector: {app: echo}
  ports: [{name: http, port: 8080, targetPort: http}]
---
apiVersion: v1
kind: Service
metadata: {name: other}
spec:
  selector: {app: other}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: v1
kind: Service
metadata: {name: nothing}
spec:
  selector: {app: nothing}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  nodeName: pi4
  terminationGracePeriodSeconds: 1
  containers:
  - name: client
    image: HELLO
    command: [sleep, "3600"]
`

// probePeriod is the echo replicas' readiness probe period.
const probePeriod = 2 * time.Second

// TestServiceTraffic runs Services, the cluster DNS and the Ingress on an
// island of three servers and two agents, then the tutorial's hands-on
// check verbatim, then stops every server: the boards keep answering.
func TestServiceTraffic(t *testing.T) {
	isl := startIsland(t, 3, 2)
	echoImg := ctrtest.Busybox(t)
	echoImg.Files["/usr/bin/echoserver"] = ctrtest.File{Data: ctrtest.GoBinary(t, "github.com/isle-cluster/isle/e2e/echoserver"), Mode: 0o755}
	echoImg.Entrypoint, echoImg.Cmd = []string{"/usr/bin/echoserver"}, nil
	echo := isl.image(ctrtest.Push(t, isl.state.RegistryAddr(), "isle/echo:1", echoImg, nil))
	isl.apply(t, strings.NewReplacer("ECHO", echo, "HELLO", isl.hello, "PERIOD", fmt.Sprint(probePeriod.Seconds())).Replace(trafficManifest))
	// A CronJob every minute, for the whole test: its runs, history limit
	// and catching up after the control plane was down are checked late.
	isl.apply(t, strings.ReplaceAll(cronJobManifest, "HELLO", isl.hello))
	cronStart := time.Now()
	k := isl.kubectl
	waitFor(t, 120*time.Second, "three echo replicas and one other Ready", func() bool {
		return readyPods(k, "app=echo") == 3 && readyPods(k, "app=other") == 1
	})
	client := isl.waitRunning(t, 60*time.Second, "client")["client"]
	from := isl.podNetns(client)
	echoes := podsByName(t, k, "app=echo")
	clusterIP := func(svc string) string { return k.ok(t, "get", "svc", svc, "-o", "jsonpath={.spec.clusterIP}") }
	waitFor(t, 30*time.Second, "the echo Service answering the client", func() bool {
		_, err := echoGet(from, "http://"+clusterIP("echo")+"/", "")
		return err == nil
	})

	echoURL := "http://" + clusterIP("echo") + "/"
	t.Run("ClusterIP balances over three replicas", func(t *testing.T) {
		// The client's board has the rules for one replica at least;
		// the three arrive as their EndpointSlice entries do.
		reached := map[string]bool{}
		waitFor(t, 30*time.Second, "the client reaching each replica", func() bool {
			if a, err := echoGet(from, echoURL, ""); err == nil {
				reached[a.Host] = true
			}
			return len(reached) == len(echoes)
		})
		seen := map[string]int{}
		for range 60 {
			a, err := echoGet(from, echoURL, "")
			if err != nil {
				t.Fatal(err)
			}
			seen[a.Host]++
			// A pod's address is kept inside the pod network.
			if host, _, _ := net.SplitHostPort(a.Remote); host != client.Status.PodIP {
				t.Fatalf("%s saw the client as %s, want its pod address %s", a.Host, a.Remote, client.Status.PodIP)
			}
		}
		for name := range echoes {
			if seen[name] == 0 {
				t.Errorf("replica %s got none of 60 connections: %v", name, seen)
			}
		}
		if len(seen) != 3 {
			t.Errorf("60 connections went to %v, want the three replicas", seen)
		}
	})
	t.Run("a replica reaches itself through its Service (hairpin)", func(t *testing.T) {
		for name := range echoes {
			ns := isl.podNetns(isl.pod(t, name))
			self := 0
			for range 30 {
				a, err := echoGet(ns, echoURL, "")
				if err != nil {
					t.Fatalf("from %s through the Service: %v", name, err)
				}
				if a.Host == name {
					self++
				}
			}
			if self == 0 {
				t.Errorf("%s never reached itself in 30 connections through its Service", name)
			}
		}
	})
	t.Run("packets per Service on the board's /metrics", func(t *testing.T) {
		for range 5 {
			if _, err := echoGet(boardNetns("pi1"), echoURL, ""); err != nil {
				t.Fatalf("from pi1 itself through the Service: %v", err)
			}
		}
		body, err := httpGet(boardNetns("pi1"), "http://127.0.0.1:10249/metrics")
		if err != nil {
			t.Fatal(err)
		}
		mustMatch(t, "pi1's /metrics", body, `(?m)^isle_proxy_service_packets_total\{namespace="default",port="http",service="echo"\} [1-9]`,
			`(?m)^isle_proxy_sync_duration_seconds_count [1-9]`, `(?m)^# HELP isle_dns_`, `(?m)^# HELP isle_ingress_`)
	})
	t.Run("sessionAffinity ClientIP keeps a client on one replica", func(t *testing.T) {
		seen := map[string]int{}
		for range 20 {
			a, err := echoGet(from, "http://"+clusterIP("echo-sticky")+"/", "")
			if err != nil {
				t.Fatal(err)
			}
			seen[a.Host]++
		}
		if len(seen) != 1 {
			t.Fatalf("20 connections of one client went to %v, want one replica", seen)
		}
	})
	t.Run("a Service without ready endpoints refuses at once", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		addr := clusterIP("nothing") + ":80"
		start := time.Now()
		c, err := netns.Dialer(from)(ctx, "tcp", addr)
		if err == nil {
			c.Close()
			t.Fatal("connected to a Service without endpoints")
		}
		if took := time.Since(start); !errors.Is(err, syscall.ECONNREFUSED) || took > time.Second {
			t.Fatalf("dial: %v after %v, want connection refused at once", err, took)
		}
	})
	t.Run("NodePort from another board", func(t *testing.T) {
		a, err := echoGet(boardNetns("pi4"), "http://"+isl.boardAddr("pi5")+":30080/np", "")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := echoes[a.Host]; !ok || a.Path != "/np" {
			t.Fatalf("node port answered %+v", a)
		}
		// externalTrafficPolicy Local: the board's own replica, and the
		// client's address kept. (From a board to its own node port, as
		// kube-proxy does, every replica serves.)
		checked := 0
		for name, node := range echoes {
			if node == "pi4" {
				continue
			}
			checked++
			a, err := echoGet(boardNetns("pi4"), "http://"+isl.boardAddr(node)+":30081/", "")
			if err != nil {
				t.Fatalf("node port with externalTrafficPolicy Local on %s: %v", node, err)
			}
			if host, _, _ := net.SplitHostPort(a.Remote); a.Host != name || host != isl.boardAddr("pi4") {
				t.Fatalf("node port with externalTrafficPolicy Local on %s: answered by %s from %s, want %s seeing %s", node, a.Host, a.Remote, name, isl.boardAddr("pi4"))
			}
		}
		if checked == 0 {
			t.Fatalf("no echo replica on a board other than pi4: %v", echoes)
		}
	})
	t.Run("DNS inside a pod", func(t *testing.T) {
		mustMatch(t, "the client's resolv.conf", k.ok(t, "exec", "client", "--", "cat", "/etc/resolv.conf"),
			`(?m)^nameserver 10\.43\.0\.10$`, `(?m)^search default\.svc\.cluster\.local svc\.cluster\.local cluster\.local$`, `(?m)^options ndots:5$`)
		// The search path, the DNS and the Service, from the container's
		// own resolver (Go's, in the hello client).
		out := k.ok(t, "exec", "client", "--", "/usr/bin/hello", "get", "http://echo/by-name")
		var a echoAnswer
		if err := json.Unmarshal([]byte(out), &a); err != nil || a.Path != "/by-name" {
			t.Fatalf("GET http://echo/by-name from the client: %q (%v)", out, err)
		}
		stub := startStubDNS(t, isl.state.Host.String()+":53", "outside.isle.test.", "192.0.2.7")
		q := func(name string, typ uint16) *dns.Msg {
			t.Helper()
			m, err := dnsQuery(from, "10.43.0.10:53", name, typ)
			if err != nil {
				t.Fatalf("DNS %s %s: %v", dns.TypeToString[typ], name, err)
			}
			return m
		}
		if got := answers(q("echo.default.svc.cluster.local.", dns.TypeA)); !slices.Equal(got, []string{clusterIP("echo")}) {
			t.Errorf("A echo: %v, want %s", got, clusterIP("echo"))
		}
		var ips []string
		for name := range echoes {
			ips = append(ips, isl.pod(t, name).Status.PodIP)
		}
		slices.Sort(ips)
		if got := answers(q("echo-headless.default.svc.cluster.local.", dns.TypeA)); !slices.Equal(got, ips) {
			t.Errorf("A of the headless Service: %v, want the pods' %v", got, ips)
		}
		if got := answers(q("_http._tcp.echo.default.svc.cluster.local.", dns.TypeSRV)); !slices.Equal(got, []string{"80 echo.default.svc.cluster.local."}) {
			t.Errorf("SRV _http._tcp.echo: %v", got)
		}
		rev, _ := dns.ReverseAddr(clusterIP("echo"))
		if got := answers(q(rev, dns.TypePTR)); !slices.Equal(got, []string{"echo.default.svc.cluster.local."}) {
			t.Errorf("PTR %s: %v", rev, got)
		}
		if m := q("missing.default.svc.cluster.local.", dns.TypeA); m.Rcode != dns.RcodeNameError {
			t.Errorf("a missing Service: %s, want NXDOMAIN", dns.RcodeToString[m.Rcode])
		}
		if got := answers(q("outside.isle.test.", dns.TypeA)); !slices.Equal(got, []string{"192.0.2.7"}) {
			t.Errorf("a name outside the cluster: %v, want the stub resolver's 192.0.2.7", got)
		}
		if stub.queries() == 0 {
			t.Error("the stub resolver was never asked")
		}
	})
	t.Run("Ingress", func(t *testing.T) { testIngress(t, isl) })
	t.Run("NetworkPolicies between pods of three namespaces on four boards", func(t *testing.T) { testNetworkPolicy(t, isl, echo) })
	t.Run("Endpoints: kept for a Service with a selector, mirrored for one without", func(t *testing.T) {
		var ips []string
		for name := range echoes {
			ips = append(ips, isl.pod(t, name).Status.PodIP)
		}
		slices.Sort(ips)
		waitFor(t, 30*time.Second, "kubectl get endpoints echo: the three replicas", func() bool {
			got := strings.Fields(k.ok(t, "get", "endpoints", "echo", "-o", "jsonpath={.subsets[*].addresses[*].ip}"))
			slices.Sort(got)
			return slices.Equal(got, ips)
		})
		mustMatch(t, "kubectl get ep echo", k.ok(t, "get", "ep", "echo"), `(?m)^NAME +ENDPOINTS +AGE\necho +10\.42\.\d+\.\d+:8080,10\.42\.\d+\.\d+:8080,10\.42\.\d+\.\d+:8080 +\d+`)
		var servers []string
		for _, b := range []string{"pi1", "pi2", "pi3"} {
			servers = append(servers, isl.boardAddr(b))
		}
		waitFor(t, 30*time.Second, "the kubernetes Service's Endpoints: the three servers", func() bool {
			got := strings.Fields(k.ok(t, "get", "endpoints", "kubernetes", "-o", "jsonpath={.subsets[*].addresses[*].ip}"))
			slices.Sort(got)
			return slices.Equal(got, servers)
		})
		// A Service without a selector, its Endpoints written by hand: the
		// address of one echo replica, reached through the Service.
		var target, targetIP string
		for name := range echoes {
			target, targetIP = name, isl.pod(t, name).Status.PodIP
			break
		}
		isl.apply(t, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: by-hand}
spec:
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: by-hand}
subsets:
- addresses: [{ip: %s}]
  ports: [{name: http, port: 8080}]
`, targetIP))
		mirrored := regexp.MustCompile(`^endpointslicemirroring-controller\.k8s\.io ` + regexp.QuoteMeta(targetIP) + `\n$`)
		waitFor(t, 30*time.Second, "the Endpoints by-hand mirrored into a slice", func() bool {
			return mirrored.MatchString(k.ok(t, "get", "endpointslices", "-l", "kubernetes.io/service-name=by-hand", "-o",
				`jsonpath={range .items[*]}{.metadata.labels.endpointslice\.kubernetes\.io/managed-by} {.endpoints[*].addresses[*]}{"\n"}{end}`))
		})
		waitFor(t, 30*time.Second, "the Service by-hand answering from "+target, func() bool {
			a, err := echoGet(from, "http://"+clusterIP("by-hand")+"/by-hand", "")
			return err == nil && a.Host == target && a.Path == "/by-hand"
		})
		k.ok(t, "delete", "svc", "by-hand")
		waitFor(t, 30*time.Second, "the Endpoints and their slice gone with the Service", func() bool {
			_, _, err := k.run("", "get", "endpoints", "by-hand")
			return err != nil && k.ok(t, "get", "endpointslices", "-l", "kubernetes.io/service-name=by-hand", "-o", "name") == ""
		})
	})
	t.Run("an unready replica leaves the rotation within one probe period", func(t *testing.T) {
		var victim string
		for name := range echoes {
			victim = name
			break
		}
		vp := isl.pod(t, victim)
		ip := vp.Status.PodIP
		// Under a loaded machine the POST to the pod's IP from the client
		// pod has gone unanswered, in CI once for 30 s (not understood
		// yet; the test's other requests to pods, thousands, never stall).
		// Each try logs what both ends of the path and the pod itself
		// show, then the readiness is turned off from inside the pod, so
		// that the rotation is still measured.
		for try := 1; try <= 3; try++ {
			err := postFrom(from, "http://"+ip+":8080/ready/off")
			if err == nil {
				break
			}
			t.Logf("POST /ready/off to %s, try %d: %v", ip, try, err)
			sh := func(ns, cmd string) string {
				out, _ := exec.Command("nsenter", "--net="+ns, "sh", "-c", cmd).CombinedOutput()
				return string(out)
			}
			clientIP := isl.pod(t, "client").Status.PodIP
			inside, serr, eerr := k.run("", "exec", victim, "--", "timeout", "3", "wget", "-qO-", "http://127.0.0.1:8080/ready")
			t.Logf("the client's route: %s\npi4's route and neighbours:\n%s\n%s's (the pod's board) route back and neighbours:\n%s\nGET /ready from %s's netns: %s\nthe pod asked from inside: %q %s %v",
				sh(from, "ip route get "+ip), sh(boardNetns("pi4"), "ip route get "+ip+"; ip neigh"),
				vp.Spec.NodeName, sh(boardNetns(vp.Spec.NodeName), "ip route get "+clientIP+"; ip route get "+ip+"; ip neigh"),
				vp.Spec.NodeName, sh(boardNetns(vp.Spec.NodeName), "curl -sS -m 3 http://"+ip+":8080/ready"),
				inside, serr, eerr)
			if try == 3 {
				k.ok(t, "exec", victim, "--", "timeout", "5", "wget", "-qO-", "--post-data=", "http://127.0.0.1:8080/ready/off")
			}
		}
		off := time.Now()
		// It has left when 30 connections in a row miss it; it left when
		// the first of them was made.
		misses, left := 0, off
		for misses < 30 {
			at := time.Now()
			a, err := echoGet(from, echoURL, "")
			if err != nil {
				t.Fatal(err)
			}
			if a.Host == victim {
				misses = 0
			} else {
				if misses == 0 {
					left = at
				}
				misses++
			}
			if time.Since(off) > 10*probePeriod {
				t.Fatalf("%s still gets connections %v after its readiness failed", victim, time.Since(off))
			}
		}
		took := left.Sub(off)
		t.Logf("the unready replica left the rotation after %v (probe period %v)", took.Round(time.Millisecond), probePeriod)
		// One period to notice, plus the way to the rules (status,
		// EndpointSlice, every board's rules).
		if took > probePeriod+1500*time.Millisecond {
			t.Errorf("the unready replica left after %v, want within one probe period (%v) and 1.5 s", took, probePeriod)
		}
	})
	t.Run("a StatefulSet: stable names, storage and DNS, a partitioned rollout, history and undo", func(t *testing.T) {
		testStatefulSet(t, isl, echo, from)
	})
	t.Run("the tutorial's hands-on check, verbatim", func(t *testing.T) { testHandsOn(t, isl) })
	t.Run("a rollout flashes activity on the boards of the new pods", func(t *testing.T) { testRolloutFlashes(t, isl) })
	t.Run("kubectl drain waits for the PodDisruptionBudget", func(t *testing.T) { testDrain(t, isl) })
	t.Run("a pod of higher priority preempts one of lower priority", func(t *testing.T) { testPreemption(t, isl) })
	var missed time.Time // a schedule of the CronJob while every server was stopped
	t.Run("with every server stopped, the boards still answer", func(t *testing.T) {
		// A replica on each board, so that the agents have their own (the
		// autoscaler would take them back).
		k.ok(t, "delete", "hpa", "hello")
		k.ok(t, "scale", "deploy", "hello", "--replicas=5")
		waitFor(t, 120*time.Second, "five hello replicas Ready", func() bool { return readyPods(k, "app=hello") == 5 })
		before, err := podPlaces(k)
		if err != nil {
			t.Fatal(err)
		}
		// The outage covers the start of a minute: the CronJob misses a
		// schedule. The servers stop in the 40th to 50th second of a
		// minute, and the schedule missed is the first one after the last
		// of them stopped (however long stopping took).
		switch sec := time.Now().Second(); {
		case sec < 40:
			time.Sleep(time.Duration(40-sec) * time.Second)
		case sec >= 50:
			time.Sleep(time.Duration(100-sec) * time.Second)
		}
		for _, s := range []string{"pi1", "pi2", "pi3"} {
			isl.board(t, "stop", s)
		}
		missed = time.Now().Truncate(time.Minute).Add(time.Minute)
		for _, b := range []string{"pi4", "pi5"} {
			for n := range 10 {
				out, err := exec.Command("curl", "-s", "-m", "5", "-o", "/dev/null", "-w", "%{http_code}", "http://"+isl.boardAddr(b)+"/hello").Output()
				if err != nil || string(out) != "200" {
					t.Fatalf("curl http://%s/hello (%s, try %d) with every server stopped: %q, %v", isl.boardAddr(b), b, n, out, err)
				}
			}
		}
		testServersBack(t, isl, before, missed.Add(5*time.Second))
	})
	t.Run("a CronJob every minute: its runs, history limit, the schedule missed while the servers were down, a job made from it", func(t *testing.T) {
		testCronJob(t, isl, cronStart, missed)
	})
	t.Run("a power cut of every board: the cluster whole again, nothing lost or moved", func(t *testing.T) { testPowerCut(t, isl) })
	t.Run("a board whose containerd dies blinks fast and is NotReady within a second", func(t *testing.T) {
		testRuntimeDownLED(t, isl, "pi5")
	})
	t.Run("SIGTERM leaves a board's LEDs dark", func(t *testing.T) { testSIGTERMDark(t, isl, "pi4") })
}

// podPlaces maps each pod's "namespace/name uid" to its Node and whether
// it is being deleted (the CronJob's pods, which come and go, left out).
func podPlaces(k *kubectlRunner) (map[string]string, error) {
	out, _, err := k.run("", "get", "pods", "-A", "-l", "app!=tick", "-o", `jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {.metadata.uid} {.spec.nodeName} {.metadata.deletionTimestamp}{"\n"}{end}`)
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 {
			m[f[0]+" "+f[1]] = strings.Join(f[2:], " ")
		}
	}
	return m, nil
}

// samePlaces fails unless every pod of before is still there, on its
// Node, not being deleted, and no pod was added.
func samePlaces(t *testing.T, what string, before, now map[string]string) {
	t.Helper()
	for pod, node := range before {
		if now[pod] != node {
			t.Errorf("%s: pod %s was on %s, now %q", what, pod, node, now[pod])
		}
	}
	for pod, node := range now {
		if _, ok := before[pod]; !ok {
			t.Errorf("%s: a new pod %s on %s (a pod was replaced)", what, pod, node)
		}
	}
}

// ledPattern is the pattern of a board's readiness LED, from its state file.
func ledPattern(isl *testIsland, board string) string {
	st, err := led.ReadStateFile(filepath.Join(isl.dir, board, "run", led.StateFileName))
	if err != nil {
		return err.Error()
	}
	return st.Pattern()
}

// testServersBack is issue 21's orphaned agents: with the three servers
// stopped for longer than memberlist gossips to the dead (30 s), the agents
// show on their LEDs that they are cut off; when the servers start again
// they find the agents, whose Nodes stay Ready past the new leader's grace
// (40 s), and no pod is evicted or moved. The servers stay stopped until
// downUntil at least.
func testServersBack(t *testing.T, isl *testIsland, before map[string]string, downUntil time.Time) {
	for _, b := range []string{"pi4", "pi5"} {
		waitFor(t, 30*time.Second, b+"'s readiness LED solid-dip (cut off)", func() bool { return ledPattern(isl, b) == "solid-dip" })
	}
	time.Sleep(35 * time.Second)
	time.Sleep(time.Until(downUntil))
	for _, s := range []string{"pi1", "pi2", "pi3"} {
		isl.board(t, "start", s)
	}
	k := isl.kubectl
	waitFor(t, 60*time.Second, "the API answering again", func() bool { _, _, err := k.run("", "get", "nodes"); return err == nil })
	up := time.Now()
	for time.Since(up) < 50*time.Second {
		for _, b := range []string{"pi4", "pi5"} {
			if _, _, err := k.run("", "get", "nodes"); err == nil && !nodeReady(k, b) {
				t.Fatalf("%s's Node went NotReady %v after the servers came back: its agent was orphaned", b, time.Since(up).Round(time.Second))
			}
		}
		time.Sleep(time.Second)
	}
	for _, b := range []string{"pi4", "pi5"} {
		if p := ledPattern(isl, b); p != "solid" {
			t.Errorf("%s's readiness LED %s with the servers back, want solid", b, p)
		}
	}
	now, err := podPlaces(k)
	if err != nil {
		t.Fatal(err)
	}
	samePlaces(t, "after the servers' restart", before, now)
}

// testPowerCut kills every board at once and powers them on in a random
// order (an agent first) with random delays: every Node Ready again, every pod where it
// was (none evicted or rescheduled), every acknowledged write there, and
// the hello app answering.
func testPowerCut(t *testing.T, isl *testIsland) {
	k := isl.kubectl
	waitFor(t, 60*time.Second, "five hello replicas Ready", func() bool { return readyPods(k, "app=hello") == 5 })
	for i := range 20 {
		k.ok(t, "create", "configmap", fmt.Sprintf("before-the-cut-%d", i), "--from-literal=n="+fmt.Sprint(i))
	}
	before, err := podPlaces(k)
	if err != nil {
		t.Fatal(err)
	}
	boards := []string{"pi1", "pi2", "pi3", "pi4", "pi5"}
	for _, b := range boards {
		isl.board(t, "kill", b)
	}
	mrand.Shuffle(len(boards), func(i, j int) { boards[i], boards[j] = boards[j], boards[i] })
	// An agent first, before any server (it once waited for one to
	// answer before it did anything), the rest in any order.
	first := slices.IndexFunc(boards, func(b string) bool { return b == "pi4" || b == "pi5" })
	boards[0], boards[first] = boards[first], boards[0]
	for _, b := range boards {
		time.Sleep(time.Duration(mrand.IntN(5000)) * time.Millisecond)
		isl.board(t, "start", b)
	}
	t.Logf("powered on in the order %v", boards)
	// The boards' processes are new: the later subtests signal them.
	st, err := island.Load(isl.dir)
	if err != nil {
		t.Fatal(err)
	}
	isl.state = st
	waitFor(t, 120*time.Second, "every Node Ready and five hello replicas Ready", func() bool {
		for _, b := range boards {
			if !nodeReady(k, b) {
				return false
			}
		}
		return readyPods(k, "app=hello") == 5
	})
	now, err := podPlaces(k)
	if err != nil {
		t.Fatal(err)
	}
	samePlaces(t, "after the power cut", before, now)
	if out := k.ok(t, "get", "configmaps", "-o", "name"); strings.Count(out, "configmap/before-the-cut-") != 20 {
		t.Errorf("acknowledged ConfigMaps after the power cut:\n%s\nwant all 20", out)
	}
	for _, b := range boards {
		waitFor(t, 30*time.Second, "/hello through "+b, func() bool {
			out, err := exec.Command("curl", "-s", "-m", "5", "-o", "/dev/null", "-w", "%{http_code}", "http://"+isl.boardAddr(b)+"/hello").Output()
			return err == nil && string(out) == "200"
		})
	}
}

// testIngress checks host and path routing, TLS, WebSockets and 503s
// through the boards' ingress controllers.
func testIngress(t *testing.T, isl *testIsland) {
	k := isl.kubectl
	certPEM, keyPEM, pool := selfSigned(t, "secure.isle.test")
	isl.apply(t, fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: secure-tls}
type: kubernetes.io/tls
data: {tls.crt: %s, tls.key: %s}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: routes}
spec:
  tls:
  - hosts: [secure.isle.test]
    secretName: secure-tls
  rules:
  - host: a.isle.test
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: echo, port: {name: http}}}}
      - {path: /other, pathType: Prefix, backend: {service: {name: other, port: {number: 80}}}}
      - {path: /other/exact, pathType: Exact, backend: {service: {name: echo, port: {number: 80}}}}
  - host: "*.wild.isle.test"
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: other, port: {number: 80}}}}
  - host: secure.isle.test
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: echo, port: {number: 80}}}}
`, base64.StdEncoding.EncodeToString(certPEM), base64.StdEncoding.EncodeToString(keyPEM)))
	board := "http://" + isl.boardAddr("pi2")
	for _, b := range isl.state.Boards {
		waitFor(t, 30*time.Second, "the Ingress served on "+b.Name, func() bool {
			_, err := echoGet("", "http://"+b.Addr.String()+"/", "a.isle.test")
			return err == nil
		})
	}
	for _, c := range []struct{ host, path, backend string }{
		{"a.isle.test", "/", "echo"},
		{"a.isle.test", "/other/x", "other"},
		{"a.isle.test", "/other/exact", "echo"}, // Exact before Prefix
		{"a.isle.test", "/otherwise", "echo"},   // /other does not match /otherwise
		{"x.wild.isle.test", "/", "other"},
	} {
		a, err := echoGet("", board+c.path, c.host)
		if err != nil {
			t.Fatalf("GET %s%s: %v", c.host, c.path, err)
		}
		if !strings.HasPrefix(a.Host, c.backend+"-") || a.Path != c.path {
			t.Errorf("GET %s%s: answered by %s for %s, want %s", c.host, c.path, a.Host, a.Path, c.backend)
		}
		if c.path == "/" && c.host == "a.isle.test" {
			if xff := a.Header.Get("X-Forwarded-For"); xff != isl.state.Host.String() || a.Header.Get("X-Forwarded-Proto") != "http" ||
				a.Header.Get("X-Forwarded-Host") != "a.isle.test" {
				t.Errorf("forwarded headers: %v", a.Header)
			}
		}
	}
	if code, body := statusOf(t, board+"/", "nothing.isle.test"); code != http.StatusNotFound {
		t.Errorf("a host no rule names: %d %q, want 404", code, body)
	}

	t.Run("TLS by SNI from the Secret", func(t *testing.T) {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "secure.isle.test"}}
		defer tr.CloseIdleConnections()
		var resp *http.Response
		var err error
		// pi3 may have the Ingress and its Secret a moment after pi2.
		waitFor(t, 30*time.Second, "pi3 serving the Secret's certificate", func() bool {
			req, _ := http.NewRequest(http.MethodGet, "https://"+isl.boardAddr("pi3")+"/tls", nil)
			req.Host = "secure.isle.test"
			resp, err = (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
			if err != nil {
				t.Logf("HTTPS with SNI secure.isle.test: %v", err)
			}
			return err == nil
		})
		defer resp.Body.Close()
		var a echoAnswer
		if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || resp.StatusCode != 200 || !strings.HasPrefix(a.Host, "echo-") {
			t.Fatalf("HTTPS: %s %+v %v", resp.Status, a, err)
		}
		if a.Header.Get("X-Forwarded-Proto") != "https" {
			t.Errorf("X-Forwarded-Proto over TLS: %q", a.Header.Get("X-Forwarded-Proto"))
		}
	})
	t.Run("WebSocket", func(t *testing.T) {
		d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
		c, resp, err := d.Dial("ws://"+isl.boardAddr("pi4")+"/ws", http.Header{"Host": {"a.isle.test"}})
		if err != nil {
			t.Fatalf("WebSocket through the ingress: %v (%v)", err, resp)
		}
		defer c.Close()
		for _, msg := range []string{"hello", "again"} {
			if err := c.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
				t.Fatal(err)
			}
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, got, err := c.ReadMessage()
			if err != nil || !strings.HasPrefix(string(got), "echo-") || !strings.HasSuffix(string(got), ": "+msg) {
				t.Fatalf("echo of %q: %q, %v", msg, got, err)
			}
		}
	})
	t.Run("status shows the boards", func(t *testing.T) {
		var want []string
		for _, b := range isl.state.Boards {
			want = append(want, b.Addr.String())
		}
		waitFor(t, 20*time.Second, "the Ingress's addresses", func() bool {
			return k.ok(t, "get", "ingress", "routes", "-o", "jsonpath={.status.loadBalancer.ingress[*].ip}") == strings.Join(want, " ")
		})
	})
	t.Run("503 naming the Service when scaled to zero", func(t *testing.T) {
		k.ok(t, "scale", "deploy", "other", "--replicas=0")
		waitFor(t, 30*time.Second, "503 from the scaled-down backend", func() bool {
			code, body := statusOf(t, board+"/other/x", "a.isle.test")
			return code == http.StatusServiceUnavailable && strings.Contains(body, "default/other")
		})
	})
}

// testHandsOn runs the tutorial's "動手 5 分鐘" commands as they are written
// (../shared/seeds), with the hello app applied, and checks what the
// tutorial says they show.
func testHandsOn(t *testing.T, isl *testIsland) {
	k := isl.kubectl
	manifest, err := os.ReadFile("../deploy/examples/hello.yaml")
	if err != nil {
		t.Fatal(err)
	}
	isl.apply(t, string(manifest))
	waitFor(t, 120*time.Second, "three hello replicas Ready", func() bool { return readyPods(k, "app=hello") == 3 })
	waitFor(t, 60*time.Second, "the claim Bound", func() bool {
		return k.ok(t, "get", "pvc", "hello-data", "-o", "jsonpath={.status.phase}") == "Bound"
	})
	// What the tutorial shows follows the pods' Ready: the Service's
	// slice, the Ingress's addresses (its status controller) and the
	// boards' rules. Wait for them as a reader would, then run it verbatim.
	waitFor(t, 30*time.Second, "the slice's three backends, the Ingress's five addresses and pi1's entrance", func() bool {
		eps := k.ok(t, "get", "endpointslices", "-l", "kubernetes.io/service-name=hello", "-o", `jsonpath={range .items[*].endpoints[*]}{.conditions.ready}{"\n"}{end}`)
		ing := k.ok(t, "get", "ingress", "hello", "-o", "jsonpath={.status.loadBalancer.ingress[*].ip}")
		_, err := httpGet(boardNetns("pi1"), "http://127.0.0.1/hello")
		return strings.Count(eps, "true") == 3 && len(strings.Fields(ing)) == 5 && err == nil
	})
	script := `set -e
kubectl get all -A -o wide
kubectl get deploy,rs,pod,svc,ingress,pvc,hpa -A
kubectl get nodes
kubectl get pv
kubectl get --raw='/readyz' && echo
kubectl get nodes
curl -s -o /dev/null -w "外部入口 %{http_code}\n" http://localhost/hello
kubectl get endpointslices -l kubernetes.io/service-name=hello
kubectl get pvc -A
kubectl get pv
`
	// On a board, where the tutorial runs it: localhost is the board.
	cmd := exec.Command("ip", "netns", "exec", "isle-pi1", "bash", "-c", script)
	cmd.Env = append(os.Environ(), "HOME="+k.home, "KUBECONFIG="+k.kubeconfig)
	out, err := cmd.CombinedOutput()
	t.Logf("the hands-on check on pi1:\n%s", out)
	if err != nil {
		t.Fatalf("the hands-on check: %v", err)
	}
	mustMatch(t, "the hands-on check", string(out),
		`(?m)^ok$`,                 // API Server readiness
		`(?m)^pi5 +Ready +<none> `, // Nodes Ready
		`(?m)^外部入口 200$`,           // the entrance answers 200
		`(?m)^hello-\S+ +IPv4 +8080 +10\.42\.\d+\.\d+,10\.42\.\d+\.\d+,10\.42\.\d+\.\d+ `, // the slice has its backends
		`(?m)^default +hello-data +Bound +pvc-`,                                           // the claim is bound
		`service/hello +ClusterIP +10\.43\.`, `service/kubernetes +ClusterIP +10\.43\.0\.1 `, `service/kube-dns +ClusterIP +10\.43\.0\.10 `,
		`ingress.networking.k8s.io/hello +isle +\* +10\.77\.0\.11,10\.77\.0\.12,10\.77\.0\.13,10\.77\.0\.14,10\.77\.0\.15 +80 `)
	// And from this machine to a board's port 80, as from a laptop.
	curl, err := exec.Command("curl", "-s", "-o", "/dev/null", "-w", "外部入口 %{http_code}\n", "http://"+isl.boardAddr("pi5")+"/hello").Output()
	if err != nil || string(curl) != "外部入口 200\n" {
		t.Fatalf("curl http://%s/hello from the host: %q, %v", isl.boardAddr("pi5"), curl, err)
	}
}

// readyPods counts the Ready pods with the label selector.
func readyPods(k *kubectlRunner, selector string) int {
	out, _, err := k.run("", "get", "pods", "-l", selector, "-o", `jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
	if err != nil {
		return 0
	}
	return strings.Count(out, "True")
}

// podsByName maps the names of the pods with the selector to their nodes.
func podsByName(t *testing.T, k *kubectlRunner, selector string) map[string]string {
	t.Helper()
	out := k.ok(t, "get", "pods", "-l", selector, "-o", `jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName}{"\n"}{end}`)
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if name, node, ok := strings.Cut(l, " "); ok {
			m[name] = node
		}
	}
	return m
}

// echoGet fetches url from the namespace ns ("" this one), with the Host
// header host if not empty, on a new connection, and decodes the echo.
func echoGet(ns, url, host string) (echoAnswer, error) {
	var a echoAnswer
	tr := &http.Transport{DisableKeepAlives: true}
	if ns != "" {
		tr.DialContext = netns.Dialer(ns)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if host != "" {
		req.Host = host
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return a, fmt.Errorf("GET %s (Host %s): %s: %s", url, host, resp.Status, body)
	}
	return a, json.Unmarshal(body, &a)
}

// statusOf is the status code and body of GET url with Host host.
func statusOf(t *testing.T, url, host string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Host = host
	resp, err := (&http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatalf("GET %s (Host %s): %v", url, host, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// postFrom POSTs to url from the namespace ns.
func postFrom(ns, url string) error {
	tr := &http.Transport{DialContext: netns.Dialer(ns), DisableKeepAlives: true}
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Post(url, "text/plain", nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s", url, resp.Status)
	}
	return nil
}

// dnsQuery asks server (UDP) from the namespace ns.
func dnsQuery(ns, server, name string, typ uint16) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := netns.Dialer(ns)(ctx, "udp", server)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	m := new(dns.Msg)
	m.SetQuestion(name, typ)
	m.SetEdns0(4096, false)
	conn := &dns.Conn{Conn: c}
	if err := conn.WriteMsg(m); err != nil {
		return nil, err
	}
	return conn.ReadMsg()
}

// answers are a reply's answer records in short form, sorted: addresses,
// "PORT TARGET" of SRV, the target of PTR and CNAME.
func answers(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		switch r := rr.(type) {
		case *dns.A:
			out = append(out, r.A.String())
		case *dns.SRV:
			out = append(out, fmt.Sprintf("%d %s", r.Port, r.Target))
		case *dns.PTR:
			out = append(out, r.Ptr)
		case *dns.CNAME:
			out = append(out, r.Target)
		}
	}
	slices.Sort(out)
	return out
}

// stubDNS is a resolver of the test's own on the island's LAN: the
// boards' upstream (the island's resolv.conf names the host).
type stubDNS struct{ asked chan struct{} }

func (s *stubDNS) queries() int { return len(s.asked) }

// startStubDNS answers name with ip (A) on addr (UDP), NXDOMAIN otherwise.
func startStubDNS(t *testing.T, addr, name, ip string) *stubDNS {
	t.Helper()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatalf("stub resolver on %s: %v", addr, err)
	}
	s := &stubDNS{asked: make(chan struct{}, 1000)}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		select {
		case s.asked <- struct{}{}:
		default:
		}
		m := new(dns.Msg)
		m.SetReply(q)
		if len(q.Question) == 1 && strings.EqualFold(q.Question[0].Name, name) && q.Question[0].Qtype == dns.TypeA {
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.ParseIP(ip)}}
		} else {
			m.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return s
}

// selfSigned is a certificate for host, its key, and a pool that trusts it.
func selfSigned(t *testing.T, host string) (certPEM, keyPEM []byte, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	var c, k bytes.Buffer
	_ = pem.Encode(&c, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	_ = pem.Encode(&k, &pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	return c.Bytes(), k.Bytes(), pool
}

// statefulSetManifest: three echo servers with a volume each, each
// noting its boots in it, behind their headless Service, never two on a
// board.
const statefulSetManifest = `apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  clusterIP: None
  selector: {app: web}
  ports: [{name: http, port: 8080}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  serviceName: web
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: web}}}
      containers:
      - name: web
        image: ECHO
        command: [sh, -c, 'echo "$(hostname) $COLOR" >> /data/boots; exec /usr/bin/echoserver']
        readinessProbe: {httpGet: {path: /ready, port: 8080}, periodSeconds: 1}
        volumeMounts: [{name: data, mountPath: /data}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 16Mi}}}
`

func testStatefulSet(t *testing.T, isl *testIsland, echo, from string) {
	k := isl.kubectl
	isl.apply(t, strings.ReplaceAll(statefulSetManifest, "ECHO", echo))
	waitFor(t, 120*time.Second, "web-0, web-1 and web-2 Ready", func() bool { return readyPods(k, "app=web") == 3 })
	// READY is the StatefulSet's status, which its controller writes
	// after the pods' Ready.
	mustMatchSoon(t, 30*time.Second, "kubectl get sts", func() string { return k.ok(t, "get", "sts", "web") }, `(?m)^web +3/3 +\d+`)
	// Anti-affinity: three boards.
	boards := map[string]bool{}
	for _, node := range podsByName(t, k, "app=web") {
		boards[node] = true
	}
	if len(boards) != 3 {
		t.Fatalf("the three replicas are on boards %v, want three boards", slices.Collect(maps.Keys(boards)))
	}
	mustMatch(t, "the claims", k.ok(t, "get", "pvc", "-o", `jsonpath={range .items[*]}{.metadata.name} {.status.phase}{"\n"}{end}`),
		`(?m)^data-web-0 Bound$`, `(?m)^data-web-1 Bound$`, `(?m)^data-web-2 Bound$`)
	// Each replica's name in the cluster DNS, through the headless
	// Service: the board's DNS follows the EndpointSlices, which follow
	// the pods' Ready.
	for _, n := range []string{"web-0", "web-1", "web-2"} {
		ip := isl.pod(t, n).Status.PodIP
		deadline := time.Now().Add(20 * time.Second)
		for {
			m, err := dnsQuery(from, "10.43.0.10:53", n+".web.default.svc.cluster.local.", dns.TypeA)
			if err == nil && slices.Equal(answers(m), []string{ip}) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("A %s.web: %v %v after 20 s, want %s", n, m, err, ip)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// A replica deleted comes back under its name, with its volume.
	uid := isl.pod(t, "web-1").UID
	k.ok(t, "delete", "pod", "web-1")
	waitFor(t, 60*time.Second, "web-1 back and Ready", func() bool {
		p := isl.pod(t, "web-1")
		return p.UID != uid && readyPods(k, "app=web") == 3
	})
	if got := k.ok(t, "exec", "web-1", "--", "cat", "/data/boots"); got != "web-1 \nweb-1 \n" {
		t.Fatalf("web-1's volume after its pod was deleted: %q, want two boots of web-1", got)
	}
	// A replica's board killed and powered on again: the replica runs
	// there again with its volume (a local volume stays on its board). Not
	// pi4's, whose client pod the later subtests use.
	victim := "web-1"
	if isl.pod(t, victim).Spec.NodeName == "pi4" {
		victim = "web-0"
	}
	board := isl.pod(t, victim).Spec.NodeName
	before := k.ok(t, "exec", victim, "--", "cat", "/data/boots")
	isl.board(t, "kill", board)
	isl.board(t, "start", board)
	var after string
	waitFor(t, 120*time.Second, victim+" booted again on "+board+" with its volume", func() bool {
		out, _, err := k.run("", "exec", victim, "--", "cat", "/data/boots")
		after = out
		return err == nil && len(out) > len(before) && isl.pod(t, victim).Spec.NodeName == board
	})
	if !strings.HasPrefix(after, before) || after[len(before):] != victim+" \n" {
		t.Fatalf("%s's volume after its board %s was killed: %q, want %q and one more boot", victim, board, after, before)
	}
	waitFor(t, 60*time.Second, "web-0, web-1 and web-2 Ready again", func() bool { return readyPods(k, "app=web") == 3 })
	// A partition of 2: the new template reaches web-2 alone.
	k.ok(t, "patch", "sts", "web", "-p", `{"spec":{"updateStrategy":{"rollingUpdate":{"partition":2}}}}`)
	k.ok(t, "set", "env", "sts/web", "COLOR=blue")
	mustMatch(t, "rollout status with a partition", k.ok(t, "rollout", "status", "sts/web", "--timeout=90s"),
		`partitioned roll out complete: 1 new pods have been updated`)
	colors := func() string {
		return k.ok(t, "get", "pods", "-l", "app=web", "-o", `jsonpath={range .items[*]}{.metadata.name}={.spec.containers[0].env[0].value} {end}`)
	}
	if got := colors(); got != "web-0= web-1= web-2=blue " {
		t.Fatalf("after the partitioned rollout: %q", got)
	}
	k.ok(t, "patch", "sts", "web", "-p", `{"spec":{"updateStrategy":{"rollingUpdate":{"partition":0}}}}`)
	k.ok(t, "rollout", "status", "sts/web", "--timeout=90s")
	if got := colors(); got != "web-0=blue web-1=blue web-2=blue " {
		t.Fatalf("after the whole rollout: %q", got)
	}
	mustMatch(t, "rollout history", k.ok(t, "rollout", "history", "sts/web"), `(?m)^1 +`, `(?m)^2 +`)
	mustMatch(t, "rollout undo", k.ok(t, "rollout", "undo", "sts/web"), `statefulset.apps/web rolled back`)
	k.ok(t, "rollout", "status", "sts/web", "--timeout=90s")
	if got := colors(); got != "web-0= web-1= web-2= " {
		t.Fatalf("after the undo: %q", got)
	}
	if got := k.ok(t, "exec", "web-2", "--", "cat", "/data/boots"); got != "web-2 \nweb-2 blue\nweb-2 \n" {
		t.Fatalf("web-2's boots through the rollouts: %q", got)
	}
	mustMatch(t, "kubectl get controllerrevisions", k.ok(t, "get", "controllerrevisions"),
		`(?m)^NAME +CONTROLLER +REVISION +AGE$`, `(?m)^web-\w+ +statefulset\.apps/web +3 +`)
	k.ok(t, "delete", "sts", "web")
	k.ok(t, "delete", "svc", "web")
	k.ok(t, "delete", "pvc", "-l", "app=web", "--wait=false")
}

// cronJobManifest runs a job every minute, keeping the last two that
// succeeded.
const cronJobManifest = `apiVersion: batch/v1
kind: CronJob
metadata: {name: tick}
spec:
  schedule: "* * * * *"
  concurrencyPolicy: Forbid
  successfulJobsHistoryLimit: 2
  failedJobsHistoryLimit: 1
  jobTemplate:
    metadata: {labels: {app: tick}}
    spec:
      template:
        metadata: {labels: {app: tick}}
        spec:
          restartPolicy: Never
          terminationGracePeriodSeconds: 1
          containers:
          - {name: tick, image: HELLO, command: [sh, -c, date]}
`

// testCronJob checks the CronJob made at the test's start: it ran every
// minute since, keeping the two last jobs that succeeded; the schedule
// missed while every server was stopped ran once they were back (late,
// as kube-controller-manager catches up on the most recent missed time);
// and `kubectl create job --from=cronjob/tick` makes a job of it.
func testCronJob(t *testing.T, isl *testIsland, start, missed time.Time) {
	k := isl.kubectl
	if missed.IsZero() {
		t.Fatal("the outage subtest did not run")
	}
	type job struct {
		created   time.Time
		succeeded bool
	}
	jobs := func() map[string]job {
		out := k.ok(t, "get", "jobs", "-l", "app=tick", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.metadata.creationTimestamp} {.status.succeeded}{"\n"}{end}`)
		m := map[string]job{}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(l)
			if len(f) < 2 {
				continue
			}
			created, _ := time.Parse(time.RFC3339, f[1])
			m[f[0]] = job{created, len(f) > 2 && f[2] == "1"}
		}
		return m
	}
	name := fmt.Sprintf("tick-%d", missed.Unix()/60)
	var caught job
	waitFor(t, 90*time.Second, "job "+name+" of the missed schedule", func() bool {
		var ok bool
		caught, ok = jobs()[name]
		return ok && caught.succeeded
	})
	if late := caught.created.Sub(missed); late < 5*time.Second {
		t.Errorf("job %s made %v after its schedule, while every server was down: want it made late, once they were back", name, late)
	}
	// Three schedules at least, so that the history limit shows.
	if third := start.Truncate(time.Minute).Add(3 * time.Minute); time.Now().Before(third) {
		time.Sleep(time.Until(third))
	}
	first := fmt.Sprintf("tick-%d", start.Truncate(time.Minute).Add(time.Minute).Unix()/60)
	waitFor(t, 90*time.Second, "two succeeded jobs kept, no more, the first schedule's gone", func() bool {
		n := 0
		all := jobs()
		for _, j := range all {
			if j.succeeded {
				n++
			}
		}
		_, kept := all[first]
		return n == 2 && !kept
	})
	mustMatch(t, "kubectl get cronjob", k.ok(t, "get", "cronjob", "tick"), `(?m)^tick +\* \* \* \* \* +<none> +False +`)
	k.ok(t, "create", "job", "tick-now", "--from=cronjob/tick")
	waitFor(t, 60*time.Second, "job tick-now done", func() bool {
		out, _, err := k.run("", "get", "job", "tick-now", "-o", "jsonpath={.status.succeeded}")
		return err == nil && out == "1"
	})
	// The job made from it is the CronJob's, and goes with it.
	k.ok(t, "delete", "cronjob", "tick")
}

// testPreemption takes a board's host port with a pod of low priority,
// then asks for the same port there with a pod of high priority: the
// scheduler evicts the first pod, and the second runs there.
func testPreemption(t *testing.T, isl *testIsland) {
	k := isl.kubectl
	board := "pi5"
	manifest := func(name, class string) string {
		return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `, labels: {app: preempt}}
spec:
  priorityClassName: ` + class + `
  nodeSelector: {kubernetes.io/hostname: ` + board + `}
  terminationGracePeriodSeconds: 1
  containers:
  - {name: c, image: ` + isl.hello + `, ports: [{containerPort: 8080, hostPort: 31999}]}
`
	}
	isl.apply(t, `apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: e2e-low}
value: 10
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: e2e-high}
value: 1000
`)
	isl.apply(t, manifest("low", "e2e-low"))
	isl.waitRunning(t, 60*time.Second, "low")
	isl.apply(t, manifest("high", "e2e-high"))
	isl.waitRunning(t, 60*time.Second, "high")
	if node := isl.pod(t, "high").Spec.NodeName; node != board {
		t.Fatalf("high runs on %s, want %s", node, board)
	}
	waitFor(t, 30*time.Second, "the low pod gone", func() bool {
		_, _, err := k.run("", "get", "pod", "low")
		return err != nil
	})
	mustMatch(t, "the events", k.ok(t, "get", "events", "--field-selector", "reason=Preempted"),
		`Preempted by pod [0-9a-f-]+ on node `+board)
	k.ok(t, "delete", "pod", "-l", "app=preempt")
	k.ok(t, "delete", "priorityclass", "e2e-low", "e2e-high")
}

// testDrain drains a board of its echo replicas under a budget: refused
// while the budget allows no disruption, done once it allows one, the
// replacements Ready on the other boards.
func testDrain(t *testing.T, isl *testIsland) {
	k := isl.kubectl
	waitFor(t, 60*time.Second, "three echo replicas Ready", func() bool { return readyPods(k, "app=echo") == 3 })
	isl.apply(t, `apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: echo}
spec:
  minAvailable: 3
  selector: {matchLabels: {app: echo}}
`)
	waitFor(t, 30*time.Second, "kubectl get pdb: no disruption allowed", func() bool {
		return regexp.MustCompile(`(?m)^echo +3 +N/A +0 +`).MatchString(k.ok(t, "get", "pdb", "echo"))
	})
	var board string
	for _, node := range podsByName(t, k, "app=echo") {
		board = node
	}
	out, errOut, err := k.run("", "drain", board, "--pod-selector=app=echo", "--timeout=8s")
	if err == nil || !strings.Contains(out+errOut, "Cannot evict pod as it would violate the pod's disruption budget.") {
		t.Fatalf("kubectl drain %s under a budget that allows nothing: %v\n%s%s", board, err, out, errOut)
	}
	if readyPods(k, "app=echo") != 3 {
		t.Fatal("an echo replica went though the budget allowed nothing")
	}
	k.ok(t, "patch", "pdb", "echo", "--type=merge", "-p", `{"spec":{"minAvailable":2}}`)
	out, errOut, err = k.run("", "drain", board, "--pod-selector=app=echo", "--timeout=150s")
	if err != nil || !strings.Contains(out, "node/"+board+" drained") {
		t.Fatalf("kubectl drain %s under a budget of one: %v\n%s%s", board, err, out, errOut)
	}
	waitFor(t, 90*time.Second, "three echo replicas Ready, none on "+board, func() bool {
		for _, node := range podsByName(t, k, "app=echo") {
			if node == board {
				return false
			}
		}
		return readyPods(k, "app=echo") == 3
	})
	k.ok(t, "uncordon", board)
	k.ok(t, "delete", "pdb", "echo")
}
