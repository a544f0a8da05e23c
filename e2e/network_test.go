package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/isle-cluster/isle/node/netns"
)

// TestPodNetwork runs an island of one server and two agents and checks
// the Pod network as the boards make it: pods reach each other across
// boards (TCP and UDP) with their own addresses, their own node and other
// nodes, nodes reach pods, hostPorts, unique addresses over 200 pods,
// routes after an agent restart and after a board is killed and started,
// and that isle down leaves nothing behind.
func TestPodNetwork(t *testing.T) {
	before := hostNetworkSnapshot(t)
	isl := startIsland(t, 1, 2)
	pin := func(name, node, extra string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  nodeName: %s
  terminationGracePeriodSeconds: 1
  containers:
  - name: hello
    image: %s
    env: [{name: PORT, value: "8080"}]
    readinessProbe:
      httpGet: {path: /healthz, port: 8080}
      periodSeconds: 1
%s---
`, name, node, isl.hello, extra)
	}
	isl.apply(t, pin("a", "pi2", "")+pin("a2", "pi2", "")+pin("b", "pi3", "")+
		pin("hp", "pi3", "    ports: [{containerPort: 8080, hostPort: 8081}]\n"))
	pods := isl.waitRunning(t, 90*time.Second, "a", "a2", "b", "hp")
	a, a2, b := pods["a"], pods["a2"], pods["b"]
	nodeCIDR := map[string]netip.Prefix{}
	for _, n := range []string{"pi1", "pi2", "pi3"} {
		out := isl.kubectl.ok(t, "get", "node", n, "-o", "jsonpath={.spec.podCIDR}")
		p, err := netip.ParsePrefix(out)
		if err != nil || p.Bits() != 24 || !netip.MustParsePrefix("10.42.0.0/16").Contains(p.Addr()) {
			t.Fatalf("Node %s has pod CIDR %q, want a /24 of 10.42.0.0/16", n, out)
		}
		nodeCIDR[n] = p
	}
	for _, p := range []*corev1.Pod{a, a2, b} {
		if ip := netip.MustParseAddr(p.Status.PodIP); !nodeCIDR[p.Spec.NodeName].Contains(ip) {
			t.Fatalf("pod %s on %s has IP %v outside its node's %v", p.Name, p.Spec.NodeName, ip, nodeCIDR[p.Spec.NodeName])
		}
	}
	hello := func(from, ip string) error {
		body, err := httpGet(from, "http://"+ip+":8080/hello")
		if err != nil {
			return err
		}
		if !strings.HasPrefix(body, "hello from ") {
			return fmt.Errorf("GET /hello from %s to %s: %q", from, ip, body)
		}
		return nil
	}

	t.Run("a second isle up says so and changes nothing", func(t *testing.T) {
		other := filepath.Join(t.TempDir(), "second")
		out, err := exec.Command(isl.bin, "up", "--dir", other).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "an island already runs on this machine (its directory: "+isl.dir+")") {
			t.Fatalf("second isle up: %v\n%s", err, out)
		}
		if _, err := os.Stat(other); err == nil {
			t.Errorf("the second isle up made %s", other)
		}
		mustMatch(t, "board list after the second up", isl.boardList(t), `(?m)^pi1 +server +10\.77\.0\.11 +up +pid \d+`, `(?m)^pi3 +agent +10\.77\.0\.13 +up +pid \d+`)
	})
	t.Run("pod to pod across boards, TCP", func(t *testing.T) {
		if err := hello(isl.podNetns(a), b.Status.PodIP); err != nil {
			t.Fatal(err)
		}
		if err := hello(isl.podNetns(b), a.Status.PodIP); err != nil {
			t.Fatal(err)
		}
		// From a container, with its own tools: busybox's wget in the
		// hello image.
		out := isl.kubectl.ok(t, "exec", "a", "--", "wget", "-qO-", "http://"+b.Status.PodIP+":8080/hello")
		mustMatch(t, "wget from pod a to pod b", out, `^hello from b\n$`)
	})
	t.Run("pod to pod on one board", func(t *testing.T) {
		if err := hello(isl.podNetns(a), a2.Status.PodIP); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("pod to pod across boards, UDP, with pod addresses", func(t *testing.T) {
		from := udpEcho(t, isl.podNetns(b), b.Status.PodIP, isl.podNetns(a), "ping")
		if from != a.Status.PodIP {
			t.Fatalf("pod b saw the datagram from %s, want pod a's own address %s (no masquerading inside the pod network)", from, a.Status.PodIP)
		}
	})
	t.Run("pod to its own node and to another node", func(t *testing.T) {
		own := isl.state.Boards[1].Addr.String() // pi2, a's board
		if from := tcpSource(t, boardNetns("pi2"), own, isl.podNetns(a)); from != a.Status.PodIP {
			t.Fatalf("pi2 saw its own pod from %s, want %s", from, a.Status.PodIP)
		}
		other := isl.state.Boards[2].Addr.String() // pi3
		if from := tcpSource(t, boardNetns("pi3"), other, isl.podNetns(a)); from != own {
			t.Fatalf("pi3 saw pod a from %s, want pi2's address %s (traffic leaving the pod network is masqueraded)", from, own)
		}
	})
	t.Run("node to pod", func(t *testing.T) {
		for _, n := range []string{"pi1", "pi2", "pi3"} {
			if err := hello(boardNetns(n), b.Status.PodIP); err != nil {
				t.Fatalf("from board %s: %v", n, err)
			}
		}
	})
	t.Run("hostPort", func(t *testing.T) {
		// The pod's probe asks its own address, not the host port: the
		// rule may come a moment after Ready.
		var body string
		var err error
		deadline := time.Now().Add(10 * time.Second)
		for {
			body, err = httpGet(boardNetns("pi1"), "http://"+isl.state.Boards[2].Addr.String()+":8081/hello")
			if err == nil && body == "hello from hp\n" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET pi3:8081 from pi1 for 10 s: %q, %v", body, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		isl.kubectl.ok(t, "delete", "pod", "hp")
		waitFor(t, 30*time.Second, "hostPort 8081 gone with its pod", func() bool {
			_, err := httpGet(boardNetns("pi1"), "http://"+isl.state.Boards[2].Addr.String()+":8081/hello")
			return err != nil
		})
	})
	t.Run("routes between boards", func(t *testing.T) {
		for _, n := range []string{"pi1", "pi2", "pi3"} {
			routes := ipOut(t, "-n", "isle-"+n, "route")
			for m, cidr := range nodeCIDR {
				if m == n {
					continue
				}
				want := fmt.Sprintf("%v via %v", cidr, isl.boardAddr(m))
				if !strings.Contains(routes, want) {
					t.Errorf("board %s has no route %q:\n%s", n, want, routes)
				}
			}
		}
	})
	t.Run("200 pods get unique addresses", func(t *testing.T) {
		seen := map[string]string{} // IP -> pod
		for round := 0; round < 5; round++ {
			var m strings.Builder
			var names []string
			for j := 0; j < 40; j++ {
				name := fmt.Sprintf("many-%d-%d", round, j)
				names = append(names, name)
				fmt.Fprintf(&m, `apiVersion: v1
kind: Pod
metadata: {name: %s, labels: {round: "%d"}}
spec:
  nodeName: %s
  terminationGracePeriodSeconds: 0
  containers:
  - {name: c, image: %s, command: [sleep, "3600"]}
---
`, name, round, []string{"pi2", "pi3"}[j%2], isl.busybox)
			}
			isl.apply(t, m.String())
			var list corev1.PodList
			waitFor(t, 120*time.Second, fmt.Sprintf("round %d: 40 pods Running with IPs", round), func() bool {
				out, _, err := isl.kubectl.run("", "get", "pods", "-l", fmt.Sprintf("round=%d", round), "-o", "json")
				if err != nil || jsonUnmarshal(out, &list) != nil {
					return false
				}
				n := 0
				for _, p := range list.Items {
					if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
						n++
					}
				}
				return n == 40
			})
			live := map[string]string{a.Status.PodIP: "a", a2.Status.PodIP: "a2", b.Status.PodIP: "b"}
			for _, p := range list.Items {
				ip := p.Status.PodIP
				if other, ok := live[ip]; ok {
					t.Fatalf("pods %s and %s share the address %s", p.Name, other, ip)
				}
				live[ip] = p.Name
				if other, ok := seen[ip]; ok {
					t.Fatalf("address %s of %s was given to %s, deleted a moment ago", ip, p.Name, other)
				}
				seen[ip] = p.Name
				if !nodeCIDR[p.Spec.NodeName].Contains(netip.MustParseAddr(ip)) {
					t.Fatalf("pod %s on %s has %s outside %v", p.Name, p.Spec.NodeName, ip, nodeCIDR[p.Spec.NodeName])
				}
			}
			isl.kubectl.ok(t, "delete", "pods", "-l", fmt.Sprintf("round=%d", round), "--wait=true", "--timeout=120s")
		}
		if len(seen) != 200 {
			t.Fatalf("%d addresses over 200 pods", len(seen))
		}
		// Every veth of the deleted pods is gone: the boards have one per
		// remaining pod.
		for _, n := range []string{"pi2", "pi3"} {
			want := map[string]int{"pi2": 2, "pi3": 1}[n]
			waitFor(t, 30*time.Second, n+"'s veths of deleted pods gone", func() bool {
				return strings.Count(ipOut(t, "-n", "isle-"+n, "-o", "link", "show", "type", "veth"), "master isle0") == want
			})
		}
	})
	t.Run("agent restart keeps pod networking", func(t *testing.T) {
		// A graceful restart first (SIGTERM, as a package upgrade or
		// systemctl restart does): pi3 says goodbye as its isle stops, and
		// the other boards keep the route to its pods, which go on
		// running, all along (a connection in flight to one of them
		// stalled while the route was gone).
		route := fmt.Sprintf("%v via %v", nodeCIDR["pi3"], isl.boardAddr("pi3"))
		done := make(chan struct{})
		stop := sync.OnceFunc(func() { close(done) })
		defer stop()
		gaps := make(chan string, 1)
		go func() {
			defer close(gaps)
			for {
				select {
				case <-done:
					return
				case <-time.After(20 * time.Millisecond):
				}
				out, err := exec.Command("ip", "-n", "isle-pi2", "route").CombinedOutput()
				if err == nil && !strings.Contains(string(out), route) {
					gaps <- time.Now().Format("15:04:05.000") + "\n" + string(out)
					return
				}
			}
		}()
		isl.board(t, "upgrade", "pi3")
		if err := hello(isl.podNetns(a), b.Status.PodIP); err != nil {
			t.Fatalf("after a graceful restart: %v", err)
		}
		waitFor(t, 30*time.Second, "pi3 Ready again", func() bool { return nodeReady(isl.kubectl, "pi3") })
		stop()
		if gap, ok := <-gaps; ok {
			t.Fatalf("pi2's route %q to pi3's pods went during pi3's graceful restart, at %s", route, gap)
		}
		// Then a crash (kill -9 of isle alone).
		isl.board(t, "restart", "pi3")
		// The pod answers while isle is down and after it is back.
		if err := hello(isl.podNetns(a), b.Status.PodIP); err != nil {
			t.Fatalf("during the restart: %v", err)
		}
		waitFor(t, 30*time.Second, "pi3 Ready again", func() bool { return nodeReady(isl.kubectl, "pi3") })
		isl.apply(t, pin("c", "pi3", ""))
		c := isl.waitRunning(t, 60*time.Second, "c")["c"]
		after := isl.pod(t, "b")
		if after.Status.PodIP != b.Status.PodIP {
			t.Fatalf("pod b's address changed across the agent's restart: %s, then %s", b.Status.PodIP, after.Status.PodIP)
		}
		if c.Status.PodIP == b.Status.PodIP {
			t.Fatalf("the new pod got b's address %s", c.Status.PodIP)
		}
		for _, ip := range []string{b.Status.PodIP, c.Status.PodIP} {
			if err := hello(isl.podNetns(a), ip); err != nil {
				t.Fatalf("after the restart: %v", err)
			}
		}
	})
	t.Run("a killed board comes back with its routes", func(t *testing.T) {
		isl.board(t, "kill", "pi3")
		waitFor(t, 30*time.Second, "pi3 NotReady", func() bool { return !nodeReady(isl.kubectl, "pi3") })
		isl.board(t, "start", "pi3")
		waitFor(t, 60*time.Second, "pi3 Ready again", func() bool { return nodeReady(isl.kubectl, "pi3") })
		waitFor(t, 30*time.Second, "routes between pi3 and the others again", func() bool {
			return strings.Contains(ipOut(t, "-n", "isle-pi3", "route"), fmt.Sprintf("%v via %v", nodeCIDR["pi2"], isl.boardAddr("pi2"))) &&
				strings.Contains(ipOut(t, "-n", "isle-pi2", "route"), fmt.Sprintf("%v via %v", nodeCIDR["pi3"], isl.boardAddr("pi3")))
		})
		// Its pods run again (a power cut ends their containers), reachable.
		b2 := isl.waitRunning(t, 90*time.Second, "b")["b"]
		waitFor(t, 30*time.Second, "pod b answering pod a after pi3's restart", func() bool {
			return hello(isl.podNetns(a), b2.Status.PodIP) == nil
		})
	})
	t.Run("isle uninstall removes a board's Pod network", func(t *testing.T) {
		isl.killIsle(t, "pi3")
		dir := filepath.Join(isl.dir, "pi3")
		out, err := exec.Command("nsenter", "--net="+boardNetns("pi3"), isl.bin, "uninstall",
			"--data-dir", filepath.Join(dir, "data"), "--run-dir", filepath.Join(dir, "run")).CombinedOutput()
		if err != nil {
			t.Fatalf("isle uninstall: %v\n%s", err, out)
		}
		mustMatch(t, "isle uninstall", string(out), `the Pod network is removed`, `the Service rules are removed`, `\d+ pods' network namespaces removed`)
		if links := ipOut(t, "-n", "isle-pi3", "-o", "link"); strings.Contains(links, "isle0") || strings.Contains(links, "veth") {
			t.Errorf("links left on pi3:\n%s", links)
		}
		if routes := ipOut(t, "-n", "isle-pi3", "route", "show", "proto", "73"); strings.TrimSpace(routes) != "" {
			t.Errorf("isle's routes left on pi3:\n%s", routes)
		}
		if tables, err := exec.Command("nsenter", "--net="+boardNetns("pi3"), "nft", "list", "tables").CombinedOutput(); err != nil || strings.Contains(string(tables), "isle-podnet") || strings.Contains(string(tables), "isle-proxy") {
			t.Errorf("nftables tables on pi3: %v\n%s", err, tables)
		}
		if ns, _ := filepath.Glob(filepath.Join(dir, "run", "netns", "*")); len(ns) > 0 {
			for _, p := range ns {
				if ok, _ := netns.Exists(p); ok {
					t.Errorf("pod namespace left: %s", p)
				}
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "data", "podnet")); err == nil {
			t.Error("the Pod network's state is left")
		}
	})
	if t.Failed() {
		isl.logTails(t)
	}
	t.Run("isle down leaves nothing", func(t *testing.T) {
		isl.down(t)
		isl.state = nil
		checkNothingLeft(t, isl.dir, before)
	})
}

// boardAddr is a board's LAN address.
func (i *testIsland) boardAddr(name string) string {
	b, err := i.state.Board(name)
	if err != nil {
		panic(err)
	}
	return b.Addr.String()
}

func nodeReady(k *kubectlRunner, name string) bool {
	out, _, err := k.run("", "get", "node", name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
	return err == nil && out == "True"
}

func ipOut(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// udpEcho listens on addr:9999 (UDP) inside the namespace srvNS, sends msg
// from the namespace cliNS, waits for the echo, and returns the source
// address the server saw.
func udpEcho(t *testing.T, srvNS, addr, cliNS, msg string) string {
	t.Helper()
	var pc net.PacketConn
	if err := netns.Do(srvNS, func() (err error) { pc, err = net.ListenPacket("udp", net.JoinHostPort(addr, "9999")); return err }); err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	seen := make(chan string, 1)
	go func() {
		buf := make([]byte, 64)
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		_, _ = pc.WriteTo(buf[:n], from)
		seen <- from.(*net.UDPAddr).IP.String()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := netns.Dialer(cliNS)(ctx, "udp", net.JoinHostPort(addr, "9999"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != msg {
		t.Fatalf("UDP echo: %q, %v", buf[:n], err)
	}
	return <-seen
}

// tcpSource listens on addr:7777 inside srvNS, connects from cliNS, and
// returns the source address the listener saw.
func tcpSource(t *testing.T, srvNS, addr, cliNS string) string {
	t.Helper()
	var l net.Listener
	if err := netns.Do(srvNS, func() (err error) { l, err = net.Listen("tcp", net.JoinHostPort(addr, "7777")); return err }); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	seen := make(chan string, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		seen <- c.RemoteAddr().(*net.TCPAddr).IP.String()
		c.Close()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := netns.Dialer(cliNS)(ctx, "tcp", net.JoinHostPort(addr, "7777"))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	select {
	case from := <-seen:
		return from
	case <-ctx.Done():
		t.Fatal("the listener saw no connection")
		return ""
	}
}

// hostSnapshot is what the host's network looks like apart from an island.
type hostSnapshot struct {
	links, routes, tables string
}

func hostNetworkSnapshot(t *testing.T) hostSnapshot {
	t.Helper()
	requireRoot(t)
	return hostSnapshot{
		links:  linkNames(ipOut(t, "-o", "link")),
		routes: ipOut(t, "route", "show", "table", "all"),
		tables: nftTables(t),
	}
}

func linkNames(out string) string {
	var names []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			names = append(names, strings.TrimSuffix(f[1], ":"))
		}
	}
	return strings.Join(names, " ")
}

func nftTables(t *testing.T) string {
	out, err := exec.Command("nft", "list", "tables").CombinedOutput()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("nft list tables: %v\n%s", err, out)
		}
		return "(nft: " + err.Error() + ")"
	}
	return string(out)
}

// checkNothingLeft: no link, namespace, route, nftables table, mount,
// process or cgroup of the island in dir is left on the host.
func checkNothingLeft(t *testing.T, dir string, before hostSnapshot) {
	t.Helper()
	after := hostNetworkSnapshot(t)
	if after.links != before.links {
		t.Errorf("links before the island: %s\nafter isle down: %s", before.links, after.links)
	}
	if after.routes != before.routes {
		t.Errorf("routes before the island:\n%s\nafter isle down:\n%s", before.routes, after.routes)
	}
	if after.tables != before.tables {
		t.Errorf("nftables tables before the island:\n%s\nafter isle down:\n%s", before.tables, after.tables)
	}
	if ns, _ := filepath.Glob("/run/netns/isle-*"); len(ns) > 0 {
		t.Errorf("network namespaces left: %v", ns)
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, l := range strings.Split(string(mounts), "\n") {
		if strings.Contains(l, dir) || strings.Contains(l, "/run/netns/isle-") {
			t.Errorf("mount left: %s", l)
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), dir) {
			if st, err := os.ReadFile(filepath.Join(filepath.Dir(p), "stat")); err == nil && !strings.Contains(string(st), ") Z ") {
				t.Errorf("process left: %s: %s", p, strings.ReplaceAll(string(b), "\x00", " "))
			}
		}
	}
	if cg, _ := filepath.Glob("/sys/fs/cgroup/*/isle-island"); len(cg) > 0 || fileExists("/sys/fs/cgroup/isle-island") {
		t.Errorf("cgroups left: %v", cg)
	}
	if _, err := os.Stat(filepath.Join(dir, "island.json")); err == nil {
		t.Error("the island's state is left")
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestIslandPrerequisites: isle up names each missing prerequisite on a
// line of its own, with its fix, and makes nothing.
func TestIslandPrerequisites(t *testing.T) {
	requireRoot(t)
	bin := isleBinary(t)
	dir := filepath.Join(t.TempDir(), "island")
	cmd := exec.Command(bin, "up", "--dir", dir)
	cmd.Env = append(os.Environ(), "PATH=/nonexistent")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("isle up without containerd, runc and docker-registry in PATH succeeded:\n%s", out)
	}
	mustMatch(t, "isle up without the programs", string(out), `(?m)^  no containerd in PATH: apt-get install containerd$`,
		`(?m)^  no runc in PATH: apt-get install runc$`, `(?m)^  no docker-registry in PATH: apt-get install docker-registry$`)
	cmd = exec.Command(bin, "up", "--dir", dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err = cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("isle up as nobody succeeded:\n%s", out)
	}
	mustMatch(t, "isle up as nobody", string(out), `(?m)^  not root: .*run it as root \(sudo isle up\)$`)
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("isle up without its prerequisites made %s", dir)
	}
}
