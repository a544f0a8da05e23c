package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/isle-cluster/isle/node/netns"
)

// The NetworkPolicy matrix: echo servers in namespace np-x on two boards,
// clients in np-x, np-y (team=blue) and np-z on others (and one beside a
// server), all reached pod to pod on port 8080; each step applies
// policies and waits until every connection is allowed or refused as
// upstream's semantics say.
const netpolManifest = `apiVersion: v1
kind: Namespace
metadata: {name: np-x, labels: {team: red}}
---
apiVersion: v1
kind: Namespace
metadata: {name: np-y, labels: {team: blue}}
---
apiVersion: v1
kind: Namespace
metadata: {name: np-z}
` + netpolServer + netpolClient

const netpolServer = `---
apiVersion: v1
kind: Pod
metadata: {name: NAME, namespace: np-x, labels: {app: web}}
spec:
  nodeName: BOARD
  terminationGracePeriodSeconds: 1
  containers:
  - {name: echo, image: ECHO, ports: [{name: http, containerPort: 8080}]}
`

const netpolClient = `---
apiVersion: v1
kind: Pod
metadata: {name: NAME, namespace: NS, labels: {role: client}}
spec:
  nodeName: BOARD
  terminationGracePeriodSeconds: 1
  containers:
  - {name: c, image: HELLO, command: [sleep, "3600"]}
`

// netpolPod is a pod of the matrix.
type netpolPod struct {
	ns, name, board string
	ip, netns       string
}

func testNetworkPolicy(t *testing.T, isl *testIsland, echo string) {
	k := isl.kubectl
	servers := []*netpolPod{{ns: "np-x", name: "web-1", board: "pi4"}, {ns: "np-x", name: "web-2", board: "pi2"}}
	clients := []*netpolPod{{ns: "np-x", name: "cx", board: "pi5"}, {ns: "np-y", name: "cy", board: "pi1"}, {ns: "np-z", name: "cz", board: "pi4"}}
	var m strings.Builder
	m.WriteString(strings.NewReplacer("ECHO", echo, "HELLO", isl.hello).Replace(netpolManifest[:strings.Index(netpolManifest, netpolServer)]))
	for _, s := range servers {
		m.WriteString(strings.NewReplacer("NAME", s.name, "BOARD", s.board, "ECHO", echo).Replace(netpolServer))
	}
	for _, c := range clients {
		m.WriteString(strings.NewReplacer("NAME", c.name, "NS", c.ns, "BOARD", c.board, "HELLO", isl.hello).Replace(netpolClient))
	}
	isl.apply(t, m.String())
	defer k.run("", "delete", "namespace", "np-x", "np-y", "np-z", "--wait=false")
	for _, p := range append(slices.Clone(servers), clients...) {
		waitFor(t, 90*time.Second, "pod "+p.ns+"/"+p.name+" running with an IP", func() bool {
			out, _, err := k.run("", "get", "pod", "-n", p.ns, p.name, "-o", "json")
			var pod corev1.Pod
			if err != nil || json.Unmarshal([]byte(out), &pod) != nil || pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
				return false
			}
			p.ip, p.netns = pod.Status.PodIP, isl.podNetns(&pod)
			return true
		})
	}
	// connects reports whether a TCP connection from c to s is made
	// within a second (a refused one is dropped: it times out).
	connects := func(c, s *netpolPod) bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn, err := netns.Dialer(c.netns)(ctx, "tcp", net.JoinHostPort(s.ip, "8080"))
		if err == nil {
			conn.Close()
		}
		return err == nil
	}
	// matrix is who reaches whom: "cx>web-1 cy>web-2 ..." with a "!" before
	// the pairs that do not connect.
	matrix := func() string {
		out := make([]string, len(clients)*len(servers))
		var wg sync.WaitGroup
		for i, c := range clients {
			for j, s := range servers {
				wg.Go(func() {
					pair := c.name + ">" + s.name
					if !connects(c, s) {
						pair = "!" + pair
					}
					out[i*len(servers)+j] = pair
				})
			}
		}
		wg.Wait()
		return strings.Join(out, " ")
	}
	// step applies a manifest and waits until the matrix is want.
	step := func(what, manifest, want string) {
		t.Helper()
		start := time.Now()
		if manifest != "" {
			isl.apply(t, manifest)
		}
		var got string
		for {
			if got = matrix(); got == want {
				break
			}
			if time.Since(start) > 20*time.Second {
				t.Fatalf("%s: the connections are %q after %v, want %q", what, got, time.Since(start).Round(time.Millisecond), want)
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("%s: %s (%v)", what, got, time.Since(start).Round(time.Millisecond))
	}

	step("no policy: all connect", "", "cx>web-1 cx>web-2 cy>web-1 cy>web-2 cz>web-1 cz>web-2")

	// A connection made before the default deny, kept open across it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kept, err := netns.Dialer(clients[2].netns)(ctx, "tcp", net.JoinHostPort(servers[0].ip, "8080"))
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	fmt.Fprintf(kept, "GET /a HTTP/1.1\r\nHost: web\r\n\r\n")
	if err := readHTTPStatus(kept); err != nil {
		t.Fatalf("the connection to keep: %v", err)
	}

	step("default deny of ingress in np-x", `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny, namespace: np-x}
spec:
  podSelector: {}
`, "!cx>web-1 !cx>web-2 !cy>web-1 !cy>web-2 !cz>web-1 !cz>web-2")
	fmt.Fprintf(kept, "GET /b HTTP/1.1\r\nHost: web\r\n\r\n")
	if err := readHTTPStatus(kept); err != nil {
		t.Errorf("the connection established before the default deny broke: %v", err)
	}
	mustMatch(t, "kubectl get netpol", k.ok(t, "get", "netpol", "-n", "np-x"), `NAME\s+POD-SELECTOR\s+AGE`, `deny\s+<none>\s+\d+s`)

	step("ingress from clients of namespaces labelled team=blue, to the http port", `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: from-team-y, namespace: np-x}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress:
  - from:
    - namespaceSelector: {matchLabels: {team: blue}}
      podSelector: {matchLabels: {role: client}}
    ports: [{port: http}]
`, "!cx>web-1 !cx>web-2 cy>web-1 cy>web-2 !cz>web-1 !cz>web-2")

	step("and from the policy's own namespace", `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: from-own, namespace: np-x}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress:
  - from: [{podSelector: {}}]
`, "cx>web-1 cx>web-2 cy>web-1 cy>web-2 !cz>web-1 !cz>web-2")

	step("and from an ipBlock of the cluster's pods except y's address, to ports 8080-8090", `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: from-block, namespace: np-x}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress:
  - from: [{ipBlock: {cidr: 10.42.0.0/16, except: [`+clients[1].ip+`/32]}}]
    ports: [{port: 8080, endPort: 8090}]
`, "cx>web-1 cx>web-2 cy>web-1 cy>web-2 cz>web-1 cz>web-2")
	k.ok(t, "delete", "netpol", "-n", "np-x", "deny", "from-team-y", "from-own")
	step("the ipBlock's except, alone in np-x", "", "cx>web-1 cx>web-2 !cy>web-1 !cy>web-2 cz>web-1 cz>web-2")

	step("egress of np-z denied but to web-2", `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: out, namespace: np-z}
spec:
  podSelector: {}
  policyTypes: [Egress]
  egress:
  - to: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: np-x}}, podSelector: {matchLabels: {app: web}}}]
    ports: [{protocol: TCP, port: http}]
  - to: [{ipBlock: {cidr: `+servers[1].ip+`/32}}]
`, "cx>web-1 cx>web-2 !cy>web-1 !cy>web-2 cz>web-1 cz>web-2")
	// The cluster DNS is the board's own: names still resolve under an
	// egress policy that names no DNS server.
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return netns.Dialer(clients[2].netns)(ctx, network, "10.43.0.10:53")
	}}
	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer rcancel()
	if addrs, err := r.LookupHost(rctx, "kubernetes.default.svc.cluster.local"); err != nil || len(addrs) == 0 {
		t.Errorf("the cluster DNS from np-z under its egress policy: %v, %v", addrs, err)
	}
	k.ok(t, "label", "pod", "-n", "np-x", "web-1", "app=other", "--overwrite")
	step("web-1 relabelled out of np-z's egress rule and np-x's policy", "", "cx>web-1 cx>web-2 cy>web-1 !cy>web-2 !cz>web-1 cz>web-2")

	k.ok(t, "delete", "netpol", "--all", "-n", "np-x")
	k.ok(t, "delete", "netpol", "--all", "-n", "np-z")
	step("every policy gone", "", "cx>web-1 cx>web-2 cy>web-1 cy>web-2 cz>web-1 cz>web-2")
}

// readHTTPStatus reads one HTTP response's status line from c, within 3
// seconds, and wants a 2xx or 404 (the echo server's answer to any path).
func readHTTPStatus(c net.Conn) error {
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(string(buf[:n]), "HTTP/1.1 ") {
		return fmt.Errorf("answered %q", buf[:n])
	}
	return nil
}
