package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// lan is a LAN made of network namespaces the test creates: one per board,
// each with an eth0 (10.77.0.N/24) on a bridge in a switch namespace. It
// needs root; nothing of it touches the host's own network.
type lan struct {
	t      *testing.T
	prefix string
	boards []string // namespace of board N at index N-1
}

func requireRoot(t *testing.T) {
	t.Helper()
	_, ipErr := exec.LookPath("ip")
	if os.Geteuid() == 0 && ipErr == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("this test needs root and iproute2 (ip) to make network namespaces (euid %d, ip: %v)", os.Geteuid(), ipErr)
	}
	t.Skip("needs root and iproute2 to make network namespaces")
}

func newLAN(t *testing.T, n int) *lan {
	t.Helper()
	requireRoot(t)
	l := &lan{t: t, prefix: fmt.Sprintf("isle%04x", rand.IntN(1<<16))}
	sw := l.prefix + "-sw"
	t.Cleanup(func() {
		for _, ns := range append([]string{sw}, l.boards...) {
			_ = exec.Command("ip", "netns", "del", ns).Run()
		}
	})
	l.ip("netns", "add", sw)
	l.ip("-n", sw, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
	l.ip("-n", sw, "link", "set", "br0", "up")
	for i := 1; i <= n; i++ {
		ns := fmt.Sprintf("%s-b%d", l.prefix, i)
		l.boards = append(l.boards, ns)
		l.ip("netns", "add", ns)
		l.ip("-n", ns, "link", "set", "lo", "up")
		l.ip("-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", fmt.Sprintf("p%d", i), "netns", sw)
		l.ip("-n", sw, "link", "set", fmt.Sprintf("p%d", i), "master", "br0", "up")
		l.ip("-n", ns, "addr", "add", l.addr(i)+"/24", "dev", "eth0")
		l.ip("-n", ns, "link", "set", "eth0", "up")
	}
	return l
}

func (l *lan) addr(i int) string { return fmt.Sprintf("10.77.0.%d", i) }

func (l *lan) ip(args ...string) string {
	l.t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		l.t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// start runs isle in board i's namespace.
func (l *lan) start(i int, logPath string, args ...string) *board {
	l.t.Helper()
	b := &board{name: fmt.Sprintf("b%d", i), logPath: logPath}
	b.bin = "ip"
	b.role = "netns"
	b.args = append([]string{"exec", l.boards[i-1]}, args...)
	b.start(l.t)
	return b
}

// holders are the boards whose eth0 has addr.
func (l *lan) holders(addr string) []int {
	var out []int
	for i := range l.boards {
		if strings.Contains(l.ip("-n", l.boards[i], "-4", "addr", "show", "dev", "eth0"), " "+addr+"/32") {
			out = append(out, i+1)
		}
	}
	return out
}

// TestLANDiscoveryAndVIP: boards on a LAN of namespaces find the cluster by
// mDNS with only the token, and the store leader holds a floating API
// address that survives the leader's loss.
func TestLANDiscoveryAndVIP(t *testing.T) {
	bin := isleBinary(t)
	kubectl := kubectlBin(t)
	l := newLAN(t, 4)
	logs, dirs := t.TempDir(), t.TempDir()
	const vip = "10.77.0.100"
	dir := func(i int) string { return filepath.Join(dirs, fmt.Sprint(i)) }
	server := func(i int, extra ...string) []string {
		return append([]string{bin, "server", "--name", fmt.Sprintf("s%d", i), "--address", l.addr(i), "--data-dir", dir(i), "--vip", vip, "--containerd", "none",
			"--run-dir", filepath.Join(dir(i), "run"), "--config", ""}, extra...)
	}
	var bs []*board
	t.Cleanup(func() {
		for _, b := range bs {
			b.kill(t)
			if t.Failed() {
				t.Logf("--- %s log (tail) ---\n%s", b.name, b.logTail())
			}
		}
	})
	bs = append(bs, l.start(1, filepath.Join(logs, "s1.log"), server(1, "--init")...))
	var token string
	waitFor(t, 20*time.Second, "the token", func() bool {
		b, err := os.ReadFile(filepath.Join(dir(1), "token"))
		token = strings.TrimSpace(string(b))
		return err == nil && token != ""
	})
	// No --join anywhere: the LAN answers by mDNS.
	bs = append(bs, l.start(2, filepath.Join(logs, "s2.log"), server(2, "--token", token)...))
	bs = append(bs, l.start(3, filepath.Join(logs, "s3.log"), server(3, "--token", token)...))
	bs = append(bs, l.start(4, filepath.Join(logs, "a4.log"), bin, "agent", "--name", "a4", "--address", l.addr(4), "--data-dir", dir(4), "--token", token, "--containerd", "none",
		"--run-dir", filepath.Join(dir(4), "run"), "--config", ""))

	// The recorded API address is the VIP; kubectl runs on the agent's board.
	kc := filepath.Join(dirs, "kubeconfig")
	if out, err := exec.Command(bin, "kubeconfig", "--data-dir", dir(1), "-o", kc).CombinedOutput(); err != nil {
		t.Fatalf("kubeconfig: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(kc); !strings.Contains(string(b), "https://"+vip+":6443") {
		t.Fatalf("the kubeconfig does not name the VIP:\n%s", b)
	}
	getNodes := func() (string, error) {
		out, err := exec.Command("ip", "netns", "exec", l.boards[3], kubectl, "--kubeconfig", kc, "--request-timeout", "3s", "get", "nodes").CombinedOutput()
		return string(out), err
	}
	readyNodes := regexp.MustCompile(`(?m)^(s1|s2|s3|a4) +Ready `)
	var out string
	waitFor(t, 90*time.Second, "four Ready nodes through the VIP", func() bool {
		var err error
		out, err = getNodes()
		return err == nil && len(readyNodes.FindAllString(out, -1)) == 4
	})
	waitFor(t, 30*time.Second, "three voters", func() bool {
		out, err := exec.Command("ip", "netns", "exec", l.boards[0], bin, "member", "list", "--data-dir", dir(1)).CombinedOutput()
		return err == nil && len(regexp.MustCompile(`(?m) (leader|voter) `).FindAllString(string(out), -1)) == 3
	})
	var holder []int
	waitFor(t, 10*time.Second, "one board holding the VIP", func() bool { holder = l.holders(vip); return len(holder) == 1 })

	// The leader's board is lost: process killed and cable pulled.
	lead := holder[0]
	bs[lead-1].kill(t)
	l.ip("-n", l.boards[lead-1], "link", "set", "eth0", "down")
	t0 := time.Now()
	waitFor(t, 60*time.Second, "the VIP on another board, answering", func() bool {
		h := l.holders(vip)
		if len(h) != 2 { // the unplugged board keeps its copy on its dead link
			return false
		}
		o, err := getNodes()
		return err == nil && strings.Contains(o, "s1")
	})
	t.Logf("API on the VIP again %.1f s after the leader's loss", time.Since(t0).Seconds())

	// Plugged back and restarted, the old leader drops its stale copy.
	l.ip("-n", l.boards[lead-1], "link", "set", "eth0", "up")
	bs[lead-1].start(t)
	waitFor(t, 30*time.Second, "one holder again", func() bool {
		h := l.holders(vip)
		return len(h) == 1 && h[0] != lead
	})
	waitFor(t, 60*time.Second, "four Ready nodes again", func() bool {
		o, err := getNodes()
		return err == nil && len(readyNodes.FindAllString(o, -1)) == 4
	})
}
