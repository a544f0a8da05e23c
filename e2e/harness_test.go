package e2e

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/isle-cluster/isle/raft/storeapi"
)

// isleBinary returns ISLE_BIN or builds isle into a temporary directory.
func isleBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("ISLE_BIN"); b != "" {
		if _, err := os.Stat(b); err != nil {
			t.Fatalf("ISLE_BIN=%s: %v", b, err)
		}
		return b
	}
	out := filepath.Join(t.TempDir(), "isle")
	cmd := exec.Command("go", "build", "-o", out, "../cmd/isle")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build isle: %v\n%s", err, b)
	}
	return out
}

// freePort returns a loopback port that was free a moment ago, for TCP
// and UDP (gossip uses both).
func freePort(t *testing.T) int {
	t.Helper()
	// Below the kernel's ephemeral range (32768 and up), which the
	// clients of the servers under test draw their own ports from: a
	// port the kernel handed out here, closed and then bound by a board
	// a moment later, was taken by such a client in the meantime (bind:
	// address already in use). Each test process has a slice of its own.
	base := lowPortBase + (os.Getpid()%lowPortSlices)*lowPortSlice
	for range lowPortSlice {
		port := base + int(nextLowPort.Add(1))%lowPortSlice
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		u, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		l.Close()
		if err == nil {
			u.Close()
			return port
		}
	}
	t.Fatal("no loopback port free for both TCP and UDP")
	return 0
}

// Ports freePort hands out: lowPortSlices slices of lowPortSlice from
// lowPortBase, all below the ephemeral range.
const (
	lowPortBase   = 20000
	lowPortSlices = 40
	lowPortSlice  = 250
)

var nextLowPort atomic.Int32

type storeCluster struct {
	members []*member
}

type member struct {
	name, bin, dir    string
	adminSocket       string // the store's status and keys (--debug)
	metricsAddr       string
	apiPort, raftPort int
	gossipPort        int
	join, token       string
	extra             []string // more flags for isle server
	cmd               *exec.Cmd
	log               *os.File
	exited            chan struct{}
}

// apiAddr is the member's Kubernetes API address.
func (m *member) apiAddr() string { return "127.0.0.1:" + strconv.Itoa(m.apiPort) }

// gossipAddr is where other boards join the cluster through this one.
func (m *member) gossipAddr() string { return "127.0.0.1:" + strconv.Itoa(m.gossipPort) }

func (m *member) client() *storeapi.Client { return storeapi.NewClient(m.adminSocket, nil) }

// start runs the member's process (the same command line every time: a
// restarted member ignores --init/--join).
func (m *member) start(t *testing.T) {
	t.Helper()
	args := []string{"server", "--name", m.name, "--data-dir", m.dir, "--address", "127.0.0.1",
		"--admin-socket", m.adminSocket, "--debug", "--metrics-addr", m.metricsAddr, "--api-port", strconv.Itoa(m.apiPort), "--raft-port", strconv.Itoa(m.raftPort),
		"--gossip-port", strconv.Itoa(m.gossipPort), "--config", ""}
	if !slices.Contains(m.extra, "--containerd") {
		// A control-plane test: no pods run; the LEDs' state file goes
		// under the member's directory.
		args = append(args, "--containerd", "none", "--run-dir", filepath.Join(m.dir, "run"))
	}
	args = append(args, m.extra...)
	if m.join == "" {
		args = append(args, "--init")
	} else {
		args = append(args, "--join", m.join, "--token", m.token)
	}
	m.cmd = exec.Command(m.bin, args...)
	m.cmd.Stdout, m.cmd.Stderr = m.log, m.log
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", m.name, err)
	}
	m.exited = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(m.cmd, m.exited)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := m.client().Status(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(m.log.Name())
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Fatalf("%s does not answer on %s after 20 s (%v); its log ends with:\n%s", m.name, m.adminSocket, err, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (m *member) kill(t *testing.T) {
	t.Helper()
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-m.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not die after SIGKILL", m.name)
	}
	m.cmd = nil
}

// startStore starts n members on loopback: the first with --init, the
// others joining it, and waits until all are voters.
func startStore(t *testing.T, bin string, n int, extra ...string) *storeCluster {
	t.Helper()
	c := &storeCluster{}
	logDir := t.TempDir()
	// Registered first: a member that fails to start leaves none of the
	// others running.
	t.Cleanup(func() {
		for _, m := range c.members {
			m.kill(t)
			m.log.Close()
			if t.Failed() {
				b, _ := os.ReadFile(m.log.Name())
				if len(b) > 4000 {
					b = b[len(b)-4000:]
				}
				t.Logf("--- %s log (tail) ---\n%s", m.name, b)
			}
		}
	})
	for i := 0; i < n; i++ {
		m := &member{
			name: "pi" + strconv.Itoa(i+1), bin: bin, dir: t.TempDir(),
			metricsAddr: "127.0.0.1:" + strconv.Itoa(freePort(t)),
			apiPort:     freePort(t), raftPort: freePort(t), gossipPort: freePort(t), extra: extra,
		}
		m.adminSocket = filepath.Join(m.dir, "admin.sock")
		if i > 0 {
			m.join = c.members[0].gossipAddr()
			tok, err := os.ReadFile(filepath.Join(c.members[0].dir, "token"))
			if err != nil {
				t.Fatalf("read the first server's token: %v", err)
			}
			m.token = strings.TrimSpace(string(tok))
		}
		f, err := os.Create(filepath.Join(logDir, m.name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		m.log = f
		c.members = append(c.members, m)
		m.start(t)
	}
	waitFor(t, 30*time.Second, "all members are voters", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, err := c.members[0].client().Status(ctx)
		if err != nil || len(st.Members) != n {
			return false
		}
		for _, m := range st.Members {
			if m.Learner {
				return false
			}
		}
		return true
	})
	return c
}

// leader waits for a leader and returns its member.
func (c *storeCluster) leader(t *testing.T) *member {
	t.Helper()
	var lead *member
	waitFor(t, 20*time.Second, "a leader", func() bool {
		for _, m := range c.members {
			if m.cmd == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := m.client().Status(ctx)
			cancel()
			if err == nil && st.Role == "leader" {
				lead = m
				return true
			}
		}
		return false
	})
	return lead
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
