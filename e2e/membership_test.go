package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"go.etcd.io/raft/v3/raftpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/hw/led"
	"github.com/isle-cluster/isle/node/bootstrap"
	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/storeapi"
)

// board is one isle process with its own loopback address (127.0.0.x) and
// the default ports, as a board on a LAN has.
type board struct {
	name, role, addr string
	bin, dir         string
	args             []string // the command line after the subcommand
	env              []string // added to the test's environment
	cmd              *exec.Cmd
	logPath          string
	exited           chan struct{}
}

// socket is the admin socket of a server board (in its run directory).
func (b *board) socket() string { return filepath.Join(b.dir, "run", "admin.sock") }

func (b *board) start(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(b.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	b.cmd = exec.Command(b.bin, append([]string{b.role}, b.args...)...)
	b.cmd.Env = append(os.Environ(), b.env...)
	b.cmd.Stdout, b.cmd.Stderr = f, f
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", b.name, err)
	}
	f.Close()
	b.exited = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(b.cmd, b.exited)
}

func (b *board) kill(t *testing.T) {
	t.Helper()
	if b.cmd == nil {
		return
	}
	_ = b.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-b.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not die after SIGKILL", b.name)
	}
	b.cmd = nil
}

func (b *board) logTail() string {
	data, _ := os.ReadFile(b.logPath)
	if len(data) > 3000 {
		data = data[len(data)-3000:]
	}
	return string(data)
}

type boards struct {
	t          *testing.T
	bin        string
	logs       string
	all        []*board
	token      string
	agentToken string
}

// newBoards is a set of boards of the isle under test, killed when the
// test ends (their logs' tails shown if it failed).
func newBoards(t *testing.T) *boards {
	bs := &boards{t: t, bin: isleBinary(t), logs: t.TempDir()}
	t.Cleanup(func() {
		for _, b := range bs.all {
			b.kill(t)
			if t.Failed() {
				t.Logf("--- %s log (tail) ---\n%s", b.name, b.logTail())
			}
		}
	})
	return bs
}

// waitToken waits for the tokens of the first server, which --init
// writes: the server token and the first agent token.
func (bs *boards) waitToken(first *board) {
	bs.t.Helper()
	waitFor(bs.t, 20*time.Second, "the tokens", func() bool {
		tok, err := os.ReadFile(filepath.Join(first.dir, "token"))
		bs.token = strings.TrimSpace(string(tok))
		atok, aerr := os.ReadFile(filepath.Join(first.dir, "agent-token"))
		bs.agentToken = strings.TrimSpace(string(atok))
		return err == nil && bs.token != "" && aerr == nil && bs.agentToken != ""
	})
}

func (bs *boards) add(name, role, addr string, args ...string) *board {
	return bs.addWithEnv(nil, name, role, addr, args...)
}

// addWithEnv is add, with env added to the board's environment.
func (bs *boards) addWithEnv(env []string, name, role, addr string, args ...string) *board {
	b := &board{name: name, role: role, addr: addr, bin: bs.bin, dir: bs.t.TempDir(), env: env, logPath: filepath.Join(bs.logs, name+".log")}
	b.args = append([]string{"--name", name, "--address", addr, "--data-dir", b.dir, "--containerd", "none",
		"--run-dir", filepath.Join(b.dir, "run"), "--config", ""}, args...)
	if role == "server" {
		b.args = append(b.args, "--metrics-addr", addr+":10249")
	}
	bs.all = append(bs.all, b)
	b.start(bs.t)
	return b
}

// run runs isle to completion (a join that must fail, say).
func (bs *boards) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bs.bin, args...).CombinedOutput()
	return string(out), err
}

// TestTenBoards runs three servers and seven agents as processes on
// loopback, each with its own address: joining with the token through any
// board, refusals, liveness of killed boards in their Nodes, standby
// servers, removal, and encryption of the gossip.
func TestTenBoards(t *testing.T) {
	bs := newBoards(t)

	s1 := bs.add("s1", "server", "127.0.0.11", "--init")
	bs.waitToken(s1)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if out, err := bs.run("kubeconfig", "--data-dir", s1.dir, "-o", kc); err != nil {
		t.Fatalf("kubeconfig: %v\n%s", err, out)
	}
	cs := kubeClient(t, kc)

	// The servers join through s1; each agent through the board before it,
	// so most join through an agent.
	bs.add("s2", "server", "127.0.0.12", "--join", "127.0.0.11", "--token", bs.token)
	waitNodes(t, cs, "s1 and s2 Ready", func(n map[string]*corev1.Node) bool { return ready(n["s1"]) && ready(n["s2"]) })
	s3 := bs.add("s3", "server", "127.0.0.13", "--join", "127.0.0.12", "--token", bs.token)
	prev := "127.0.0.13"
	for i := 1; i <= 7; i++ {
		addr := fmt.Sprintf("127.0.0.%d", 20+i)
		bs.add(fmt.Sprintf("a%d", i), "agent", addr, "--join", prev, "--token", bs.agentToken)
		prev = addr
	}
	waitNodes(t, cs, "ten Ready nodes", func(n map[string]*corev1.Node) bool {
		count := 0
		for _, node := range n {
			if ready(node) && node.Spec.PodCIDR != "" {
				count++
			}
		}
		return count == 10
	})
	// The third server joins as a learner and is made a voter once it
	// has caught up, and s1's gossip may hear of the last agents after
	// their Nodes are Ready: the list settles within seconds.
	var members []memberInfo
	deadline := time.Now().Add(30 * time.Second)
	for {
		members = memberList(t, bs, s1)
		alive, voters := 0, 0
		for _, m := range members {
			if m.State == "alive" {
				alive++
			}
			if m.Raft == "leader" || m.Raft == "voter" {
				voters++
			}
		}
		if len(members) == 10 && alive == 10 && voters == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("member list after 30 s: %d boards, %d alive, %d voters, want 10, 10 and 3: %+v", len(members), alive, voters, members)
		}
		time.Sleep(200 * time.Millisecond)
	}
	nodes := nodeMap(t, cs)
	if n := nodes["a3"]; n.Labels["kubernetes.io/arch"] == "" || n.Labels["isle.dev/role"] != "agent" || n.Status.Addresses[0].Address != "127.0.0.23" {
		t.Fatalf("a3's Node: labels %v, addresses %v", n.Labels, n.Status.Addresses)
	}
	if _, ok := nodes["s3"].Labels["node-role.kubernetes.io/control-plane"]; !ok {
		t.Fatalf("s3 is not labelled control-plane: %v", nodes["s3"].Labels)
	}

	t.Run("refusals", func(t *testing.T) {
		parts := strings.Split(bs.token, "::")
		wrongSecret := parts[0] + "::" + parts[1] + "::" + strings.Repeat("x", len(parts[2]))
		wrongCA := parts[0] + "::" + strings.Repeat("0", len(parts[1])) + "::" + parts[2]
		cases := []struct {
			name, token, want string
		}{
			{"wrong token", wrongSecret, "is the token this cluster's"},
			{"wrong CA hash", wrongCA, "not a server of the cluster this token belongs to"},
			{"duplicate name", bs.token, `a board named "a3" is already in the cluster`},
		}
		for i, tc := range cases {
			name := "x" + fmt.Sprint(i)
			if tc.name == "duplicate name" {
				name = "a3"
			}
			out, err := bs.run("agent", "--name", name, "--address", "127.0.0.40", "--data-dir", t.TempDir(), "--join", "127.0.0.21", "--token", tc.token, "--containerd", "none", "--config", "", "--run-dir", t.TempDir())
			if err == nil || !strings.Contains(out, tc.want) {
				t.Errorf("%s: %v, output:\n%s\nwant an error with %q", tc.name, err, out, tc.want)
			}
		}
		// The version skew policy: an agent ahead of the servers, a server
		// two minor releases ahead.
		tok, err := wire.ParseToken(bs.token)
		if err != nil {
			t.Fatal(err)
		}
		maj, minor, err := wire.ParseRelease(wire.Release)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			req  wire.JoinRequest
			want string
		}{
			{wire.JoinRequest{Name: "newer-agent", Role: wire.RoleAgent, Release: fmt.Sprintf("%d.%d", maj, minor+1)}, "upgrade the servers first"},
			{wire.JoinRequest{Name: "newer-server", Role: wire.RoleServer, Release: fmt.Sprintf("%d.%d", maj, minor+2), RaftAddr: "127.0.0.42:6445", APIAddr: "127.0.0.42:6443"},
				"upgrade one minor release at a time"},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			_, err := bootstrap.NewClient(tok, time.Now).Join(ctx, []string{"127.0.0.11:6443"}, tc.req, "")
			cancel()
			var refused *bootstrap.Refused
			if !errors.As(err, &refused) || refused.Code != http.StatusConflict || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s of isle %s joining: %v, want a 409 refusal saying %q", tc.req.Role, tc.req.Release, err, tc.want)
			}
			if _, ok := nodeMap(t, cs)[tc.req.Name]; ok {
				t.Errorf("the refused %s got a Node", tc.req.Name)
			}
		}
		// The refused duplicate is reported on the server's side too.
		waitFor(t, 10*time.Second, "a server logs the refused name", func() bool {
			for _, b := range bs.all[:3] {
				if strings.Contains(b.logTail(), `join refused: the name belongs to another board" name=a3`) {
					return true
				}
			}
			return false
		})
		if n := nodeMap(t, cs); !ready(n["a3"]) {
			t.Fatal("a3 suffered from the refused duplicate")
		}
	})

	t.Run("agent tokens", func(t *testing.T) {
		sock := filepath.Join(s1.dir, "run", "admin.sock")
		// A server with an agent token: refused by the board itself, and by
		// the servers when asked directly.
		out, err := bs.run("server", "--name", "x-srv", "--address", "127.0.0.42", "--data-dir", t.TempDir(), "--join", "127.0.0.11", "--token", bs.agentToken,
			"--containerd", "none", "--config", "", "--run-dir", t.TempDir())
		if err == nil || !strings.Contains(out, "an agent token admits agents only") {
			t.Errorf("a server joining with the agent token: %v\n%s", err, out)
		}
		atok, err := wire.ParseToken(bs.agentToken)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err = bootstrap.NewClient(atok, time.Now).Join(ctx, []string{"127.0.0.12:6443"},
			wire.JoinRequest{Name: "x-srv", Role: wire.RoleServer, Release: wire.Release, RaftAddr: "127.0.0.42:6445", APIAddr: "127.0.0.42:6443"}, "")
		var refused *bootstrap.Refused
		if !errors.As(err, &refused) || refused.Code != http.StatusForbidden {
			t.Errorf("a server's join request with the agent token: %v, want 403", err)
		}
		// Member removal with the agent token: 403, a1 still there.
		out, err = bs.run("member", "remove", "a1", "--server", "127.0.0.11:6443", "--token", bs.agentToken)
		if err == nil || !strings.Contains(out, "needs the server token") {
			t.Errorf("member remove with the agent token: %v\n%s", err, out)
		}
		if _, ok := nodeMap(t, cs)["a1"]; !ok {
			t.Fatal("a1's Node is gone")
		}
		// A token for a lab, used, listed, revoked; the board that joined
		// with it stays.
		out, err = bs.run("token", "create", "--agent", "--ttl", "2h", "--description", "lab 3", "--socket", sock)
		if err != nil {
			t.Fatalf("token create: %v\n%s", err, out)
		}
		lab, err := wire.ParseToken(out)
		if err != nil || !lab.IsAgent() {
			t.Fatalf("token create printed %q: %v", out, err)
		}
		bs.add("x-lab", "agent", "127.0.0.43", "--join", "127.0.0.22", "--token", strings.TrimSpace(out))
		waitNodes(t, cs, "x-lab Ready", func(n map[string]*corev1.Node) bool { return ready(n["x-lab"]) })
		out, err = bs.run("token", "list", "--socket", sock)
		if err != nil || !strings.Contains(out, lab.ID) || !strings.Contains(out, "lab 3") || strings.Contains(out, lab.Secret) {
			t.Fatalf("token list: %v\n%s", err, out)
		}
		if out, err := bs.run("token", "revoke", lab.ID, "--socket", sock); err != nil {
			t.Fatalf("token revoke: %v\n%s", err, out)
		}
		out, err = bs.run("agent", "--name", "x-late", "--address", "127.0.0.44", "--data-dir", t.TempDir(), "--join", "127.0.0.21", "--token", lab.String(),
			"--containerd", "none", "--config", "", "--run-dir", t.TempDir())
		if err == nil || !strings.Contains(out, "revoked") {
			t.Errorf("an agent joining with the revoked token: %v\n%s", err, out)
		}
		if n := nodeMap(t, cs); !ready(n["x-lab"]) {
			t.Error("x-lab is not Ready after its token was revoked")
		}
		// The server token replaced: every server takes the new one and
		// refuses the old; the standby server below joins with it.
		out, err = bs.run("token", "rotate", "--server", "--socket", sock)
		if err != nil {
			t.Fatalf("token rotate --server: %v\n%s", err, out)
		}
		fresh := strings.TrimSpace(out)
		if tok, err := wire.ParseToken(fresh); err != nil || tok.IsAgent() || fresh == bs.token {
			t.Fatalf("token rotate --server printed %q: %v", fresh, err)
		}
		waitFor(t, 15*time.Second, "every server's token file the new token", func() bool {
			for _, b := range bs.all[:3] {
				if tok, err := os.ReadFile(filepath.Join(b.dir, "token")); err != nil || strings.TrimSpace(string(tok)) != fresh {
					return false
				}
			}
			return true
		})
		for _, addr := range []string{"127.0.0.11:6443", "127.0.0.12:6443", "127.0.0.13:6443"} {
			if out, err := bs.run("member", "list", "--server", addr, "--token", bs.token); err == nil || !strings.Contains(out, "not this cluster's") {
				t.Errorf("member list at %s with the old server token: %v\n%s", addr, err, out)
			}
		}
		bs.token = fresh
		if out, err := bs.run("member", "list", "--server", "127.0.0.13:6443", "--token", bs.token); err != nil {
			t.Errorf("member list with the new server token: %v\n%s", err, out)
		}
		// The ten boards again, for what follows.
		lab1 := bs.all[len(bs.all)-1]
		lab1.kill(t)
		bs.all = bs.all[:len(bs.all)-1]
		if out, err := bs.run("member", "remove", "x-lab", "--data-dir", s1.dir); err != nil {
			t.Fatalf("member remove x-lab: %v\n%s", err, out)
		}
	})

	t.Run("the store's links take its members alone", func(t *testing.T) {
		st := storeStatus(t, s1)
		var raftAddr string
		for _, m := range st.Members {
			if m.ID == st.ID {
				raftAddr = m.RaftAddr
			}
		}
		// What an attacker on the LAN sends: a handshake from an invented
		// member, then an append of a far higher term.
		forged := func() []byte {
			b := []byte("ISRT\x01\x01\x00\x00")
			b = binary.BigEndian.AppendUint64(b, st.ClusterID)
			b = binary.BigEndian.AppendUint64(b, 0xbad)
			b = binary.BigEndian.AppendUint64(b, st.ID)
			m := raftpb.Message{Type: raftpb.MsgApp, From: 0xbad, To: st.ID, Term: st.Term + 100, Index: st.Commit, LogTerm: st.Term,
				Entries: []raftpb.Entry{{Term: st.Term + 100, Index: st.Commit + 1, Data: []byte("planted")}}, Commit: st.Commit + 1}
			body, err := m.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
			return append(b, body...)
		}
		// Each connection is closed without a byte of answer.
		refused := func(c net.Conn, how string) {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			_, _ = c.Write(forged())
			var reply [16]byte
			if n, err := c.Read(reply[:]); n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("%s: read %d bytes (%q), %v; want the connection closed without an answer", how, n, reply[:n], err)
			}
		}
		plain, err := net.Dial("tcp", raftAddr)
		if err != nil {
			t.Fatal(err)
		}
		refused(plain, "plain TCP")
		// A certificate of the cluster's CA that is not a store member's:
		// the administrator's.
		rc, err := clientcmd.BuildConfigFromFlags("", kc)
		if err != nil {
			t.Fatal(err)
		}
		admin, err := tls.X509KeyPair(rc.CertData, rc.KeyData)
		if err != nil {
			t.Fatal(err)
		}
		tc, err := tls.Dial("tcp", raftAddr, &tls.Config{Certificates: []tls.Certificate{admin}, InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})
		if err == nil {
			refused(tc, "TLS with the administrator's certificate")
		}
		waitFor(t, 10*time.Second, "s1 to log both refusals", func() bool {
			l := s1.logTail()
			return strings.Contains(l, "a connection without TLS") && strings.Contains(l, "not a store member's certificate")
		})
		if after := storeStatus(t, s1); after.Term >= st.Term+100 {
			t.Fatalf("the store's term went from %d to %d", st.Term, after.Term)
		}
		if v := scrape(t, kc, "isle_raft_transport_plain_connections_total"); v != 0 {
			t.Fatalf("%v plain Raft connections in a cluster of this release", v)
		}
	})

	t.Run("Secrets encrypted at rest", func(t *testing.T) {
		sock := filepath.Join(s1.dir, "run", "admin.sock")
		waitFor(t, 30*time.Second, "the cluster's first key for the Secrets", func() bool {
			out, err := bs.run("secrets", "status", "--socket", sock)
			return err == nil && strings.Contains(out, "every Secret under it")
		})
		marker := fmt.Sprintf("isle-at-rest-%d", time.Now().UnixNano())
		ctx := context.Background()
		if _, err := cs.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "at-rest"},
			Data: map[string][]byte{"password": []byte(marker)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		check := func() {
			t.Helper()
			sec, err := cs.CoreV1().Secrets("default").Get(ctx, "at-rest", metav1.GetOptions{})
			if err != nil || string(sec.Data["password"]) != marker {
				t.Fatalf("the Secret through the API: %v", err)
			}
			// Every server's store files: the WAL and the snapshots.
			for _, b := range bs.all[:3] {
				err := filepath.WalkDir(filepath.Join(b.dir, "store"), func(path string, d os.DirEntry, err error) error {
					if err != nil || d.IsDir() {
						return err
					}
					data, err := os.ReadFile(path)
					if err != nil {
						return err
					}
					for _, clear := range []string{marker, base64.StdEncoding.EncodeToString([]byte(marker))} {
						if bytes.Contains(data, []byte(clear)) {
							t.Errorf("%s holds the Secret's value in clear", path)
						}
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		check()
		out, err := bs.run("secrets", "rotate-key", "--socket", sock)
		if err != nil || !strings.Contains(out, "every Secret under it") {
			t.Fatalf("secrets rotate-key: %v\n%s", err, out)
		}
		check()
	})

	t.Run("plaintext gossip sees no one", func(t *testing.T) {
		var logs bytes.Buffer
		mc := memberlist.DefaultLANConfig()
		mc.Name, mc.BindAddr, mc.BindPort, mc.AdvertiseAddr = "plain", "127.0.0.41", 7946, "127.0.0.41"
		mc.Logger = log.New(&logs, "", 0)
		plain, err := memberlist.Create(mc)
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Shutdown()
		if n, err := plain.Join([]string{"127.0.0.11:7946", "127.0.0.22:7946"}); err == nil || n != 0 {
			t.Fatalf("a plaintext member joined %d boards (%v)", n, err)
		}
		if n := len(plain.Members()); n != 1 {
			t.Fatalf("the plaintext member sees %d members", n)
		}
		if v := scrape(t, kc, "isle_gossip_undecryptable_total"); v < 1 {
			t.Fatalf("isle_gossip_undecryptable_total = %v after a plaintext join", v)
		}
	})

	t.Run("kill and restart an agent and a server", func(t *testing.T) {
		var a4 *board
		for _, b := range bs.all {
			if b.name == "a4" {
				a4 = b
			}
		}
		a4.kill(t)
		s3.kill(t)
		waitNodes(t, cs, "a4 and s3 NotReady and tainted unreachable", func(n map[string]*corev1.Node) bool {
			return unreachable(n["a4"]) && unreachable(n["s3"])
		})
		n := nodeMap(t, cs)
		if c := readyCondition(n["a4"]); c.Reason != "NodeStatusUnknown" || !strings.Contains(c.Message, "gossip") {
			t.Fatalf("a4's Ready condition: %+v", c)
		}
		// Node Leases are made up from gossip, never stored: a4's stopped
		// renewing when it died, a1's is renewed as it is read.
		lease := func(name string) time.Time {
			l, err := cs.CoordinationV1().Leases("kube-node-lease").Get(context.Background(), name, metav1.GetOptions{})
			if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != name || l.Spec.RenewTime == nil {
				t.Fatalf("Lease of %s: %+v, %v", name, l, err)
			}
			return l.Spec.RenewTime.Time
		}
		dead, alive := lease("a4"), lease("a1")
		time.Sleep(1500 * time.Millisecond)
		if d2, a2 := lease("a4"), lease("a1"); !d2.Equal(dead) || !a2.After(alive) {
			t.Fatalf("Leases: dead a4 renewed %v then %v, alive a1 %v then %v", dead, d2, alive, a2)
		}
		for _, name := range []string{"a1", "a5", "s1", "s2"} {
			if !ready(n[name]) {
				t.Fatalf("%s is not Ready while a4 and s3 are down", name)
			}
		}
		// Restarted with their data directories: same names, new
		// incarnations, accepted without the token.
		a4.args = slicesWithout(a4.args, "--join", "--token")
		a4.start(t)
		s3.start(t)
		waitNodes(t, cs, "a4 and s3 Ready again, untainted", func(n map[string]*corev1.Node) bool {
			return ready(n["a4"]) && len(n["a4"].Spec.Taints) == 0 && ready(n["s3"]) && len(n["s3"].Spec.Taints) == 0
		})
	})

	t.Run("every server restarted at once: the agents find them again", func(t *testing.T) {
		servers, agents := bs.all[:3], bs.all[3:]
		pattern := func(b *board) string {
			st, err := led.ReadStateFile(filepath.Join(b.dir, "run", led.StateFileName))
			if err != nil {
				return err.Error()
			}
			return st.Pattern()
		}
		for _, b := range servers {
			b.kill(t)
		}
		// Each agent's readiness LED tells it runs on its own.
		waitFor(t, 30*time.Second, "every agent's LED solid-dip (cut off)", func() bool {
			for _, b := range agents {
				if pattern(b) != "solid-dip" {
					return false
				}
			}
			return true
		})
		// Longer than memberlist goes on gossiping to members it declared
		// dead (GossipToTheDeadTime, 30 s on a LAN): after that only the
		// agents' own memory of the servers brings them back.
		time.Sleep(35 * time.Second)
		for _, b := range servers {
			b.start(t)
		}
		// The servers' seeds are each other; only the agents' memory of
		// the servers brings them back into one gossip.
		waitFor(t, 60*time.Second, "all ten boards alive in s1's gossip", func() bool {
			out, err := bs.run("member", "list", "-o", "json", "--data-dir", s1.dir)
			var members []memberInfo
			if err != nil || json.Unmarshal([]byte(out), &members) != nil {
				return false // s1 is still starting
			}
			alive := 0
			for _, m := range members {
				if m.State == "alive" {
					alive++
				}
			}
			return alive == 10
		})
		waitNodes(t, cs, "ten Ready nodes after the servers' restart", func(n map[string]*corev1.Node) bool {
			count := 0
			for _, node := range n {
				if ready(node) {
					count++
				}
			}
			return count == 10
		})
		waitFor(t, 30*time.Second, "every agent's LED solid again", func() bool {
			for _, b := range agents {
				if pattern(b) != "solid" {
					return false
				}
			}
			return true
		})
	})

	t.Run("standby server and removal", func(t *testing.T) {
		bs.add("s4", "server", "127.0.0.14", "--join", "127.0.0.25", "--token", bs.token)
		waitFor(t, 30*time.Second, "s4 a learner", func() bool { return raftOf(memberList(t, bs, s1), "s4") == "learner" })
		// With s3 down, removing s2 would leave one active voter of two.
		s3.kill(t)
		waitFor(t, 15*time.Second, "s3 dead in gossip", func() bool { return stateOf(memberList(t, bs, s1), "s3") == "dead" })
		// Asked of a server that does not lead: it hands the change to
		// the leader, and the leader's answer comes back.
		var follower *board
		waitFor(t, 15*time.Second, "a leader, and a live voter that does not lead", func() bool {
			follower = nil
			for _, m := range memberList(t, bs, s1) {
				for _, b := range bs.all {
					if b.name == m.Name && m.Raft == "voter" && m.State == "alive" && (b.name == "s1" || b.name == "s2") {
						follower = b
					}
				}
			}
			return follower != nil
		})
		if out, err := bs.run("member", "remove", "s2", "--data-dir", follower.dir); err == nil || !strings.Contains(out, "quorum") {
			t.Fatalf("removing s2 with s3 down, asked of %s: %v\n%s", follower.name, err, out)
		}
		if out, err := bs.run("member", "remove", "s3", "--data-dir", follower.dir); err != nil {
			t.Fatalf("remove s3, asked of %s: %v\n%s", follower.name, err, out)
		}
		waitFor(t, 30*time.Second, "s4 promoted to voter", func() bool {
			r := raftOf(memberList(t, bs, s1), "s4")
			return r == "voter" || r == "leader"
		})
		waitNodes(t, cs, "s3's Node gone", func(n map[string]*corev1.Node) bool { _, ok := n["s3"]; return !ok })
		// Its name is free again: a new board may take it.
		bs.add("s3", "agent", "127.0.0.33", "--join", "127.0.0.14", "--token", bs.token)
		waitNodes(t, cs, "the new s3 Ready", func(n map[string]*corev1.Node) bool {
			return ready(n["s3"]) && n["s3"].Labels["isle.dev/role"] == "agent"
		})
		if out, err := bs.run("member", "remove", "nobody", "--data-dir", s1.dir); err == nil || !strings.Contains(out, "no such board") {
			t.Fatalf("removing an unknown board: %v\n%s", err, out)
		}
	})
}

func slicesWithout(args []string, flags ...string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		skip := false
		for _, f := range flags {
			if args[i] == f {
				skip = true
			}
		}
		if skip {
			i++ // and its value
			continue
		}
		out = append(out, args[i])
	}
	return out
}

type memberInfo struct {
	Name    string `json:"name"`
	State   string `json:"state"`
	Raft    string `json:"raft"`
	RaftID  string `json:"raftID"`
	Version string `json:"version"`
}

func memberList(t *testing.T, bs *boards, server *board) []memberInfo {
	t.Helper()
	out, err := bs.run("member", "list", "-o", "json", "--data-dir", server.dir)
	if err != nil {
		t.Fatalf("member list: %v\n%s", err, out)
	}
	var ms []memberInfo
	if err := json.Unmarshal([]byte(out), &ms); err != nil {
		t.Fatalf("member list: %v\n%s", err, out)
	}
	return ms
}

func raftOf(ms []memberInfo, name string) string {
	for _, m := range ms {
		if m.Name == name {
			return m.Raft
		}
	}
	return ""
}

func stateOf(ms []memberInfo, name string) string {
	for _, m := range ms {
		if m.Name == name {
			return m.State
		}
	}
	return ""
}

func kubeClient(t *testing.T, kubeconfig string) *kubernetes.Clientset {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func nodeMap(t *testing.T, cs *kubernetes.Clientset) map[string]*corev1.Node {
	t.Helper()
	list, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return nil
	}
	out := map[string]*corev1.Node{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}

func waitNodes(t *testing.T, cs *kubernetes.Clientset, what string, cond func(map[string]*corev1.Node) bool) {
	t.Helper()
	waitFor(t, 60*time.Second, what, func() bool {
		n := nodeMap(t, cs)
		return n != nil && cond(n)
	})
}

func readyCondition(n *corev1.Node) corev1.NodeCondition {
	if n != nil {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c
			}
		}
	}
	return corev1.NodeCondition{}
}

func ready(n *corev1.Node) bool { return readyCondition(n).Status == corev1.ConditionTrue }

func unreachable(n *corev1.Node) bool {
	if readyCondition(n).Status != corev1.ConditionUnknown {
		return false
	}
	effects := map[corev1.TaintEffect]bool{}
	for _, tn := range n.Spec.Taints {
		if tn.Key == corev1.TaintNodeUnreachable {
			effects[tn.Effect] = true
		}
	}
	return effects[corev1.TaintEffectNoSchedule] && effects[corev1.TaintEffectNoExecute]
}

// scrape reads a counter summed over its series from a server's /metrics.
// storeStatus is b's view of the store, from its admin socket.
func storeStatus(t *testing.T, b *board) raft.Status {
	t.Helper()
	sock := filepath.Join(b.dir, "run", "admin.sock")
	resp, err := (&http.Client{Transport: storeapi.UnixTransport(sock), Timeout: 10 * time.Second}).Get("http://isle/store/v1/status")
	if err != nil {
		t.Fatalf("store status of %s: %v", b.name, err)
	}
	defer resp.Body.Close()
	var st raft.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || st.ID == 0 {
		t.Fatalf("store status of %s: %v (%+v)", b.name, err, st)
	}
	return st
}

func scrape(t *testing.T, kubeconfig, name string) float64 {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	body, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	var sum float64
	for line := range strings.Lines(string(body)) {
		if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
			var v float64
			if _, err := fmt.Sscanf(line[strings.LastIndex(line, " ")+1:], "%g", &v); err == nil {
				sum += v
			}
		}
	}
	return sum
}

// TestDeadVoterReplaced: with --remove-dead-after, a voter whose board
// stays dead is removed from the store by the leader and a standby server
// takes its place, with no administrator.
func TestDeadVoterReplaced(t *testing.T) {
	bs := newBoards(t)
	const after = "10s"
	s1 := bs.add("d1", "server", "127.0.0.51", "--init", "--remove-dead-after", after)
	bs.waitToken(s1)
	for i, addr := range []string{"127.0.0.52", "127.0.0.53", "127.0.0.54"} {
		bs.add(fmt.Sprintf("d%d", i+2), "server", addr, "--join", "127.0.0.51", "--token", bs.token, "--remove-dead-after", after)
	}
	// Joined together, whichever three catch up first vote; the fourth
	// stays a standby.
	var standby, victim string
	waitFor(t, 60*time.Second, "three voters and a standby", func() bool {
		ms := memberList(t, bs, s1)
		standby, victim = "", ""
		voters := 0
		for _, m := range ms {
			switch m.Raft {
			case "learner":
				standby = m.Name
			case "voter", "leader":
				voters++
				if m.Name != "d1" {
					victim = m.Name
				}
			}
		}
		return voters == 3 && standby != "" && victim != ""
	})
	for _, b := range bs.all {
		if b.name == victim {
			b.kill(t)
		}
	}
	t0 := time.Now()
	waitFor(t, 60*time.Second, victim+" removed and "+standby+" a voter", func() bool {
		ms := memberList(t, bs, s1)
		r := raftOf(ms, standby)
		return raftOf(ms, victim) == "" && (r == "voter" || r == "leader")
	})
	if d := time.Since(t0); d < 10*time.Second {
		t.Fatalf("%s was removed %v after it died, before --remove-dead-after %s", victim, d, after)
	}
	logged := false
	for _, b := range bs.all {
		data, _ := os.ReadFile(b.logPath)
		logged = logged || strings.Contains(string(data), "dead server removed from the store")
	}
	if !logged {
		t.Fatal("no server logged the removal")
	}
}
