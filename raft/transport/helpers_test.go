package transport

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	etcdraft "go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

const (
	testCluster = 0xc1
	waitTimeout = 10 * time.Second
)

// recorder is a Handler that records everything it is given.
type recorder struct {
	mu          sync.Mutex
	msgs        []raftpb.Message
	unreachable map[uint64]int
	snaps       []snapReport

	inflight atomic.Int64 // Handler calls in progress

	// block, if set, makes Process wait until it is closed (or ctx ends).
	block chan struct{}
	// fail, if set, runs first in Process; its error is returned.
	fail func(ctx context.Context, m raftpb.Message) error
}

type snapReport struct {
	id     uint64
	status etcdraft.SnapshotStatus
}

func newRecorder() *recorder { return &recorder{unreachable: map[uint64]int{}} }

func (r *recorder) Process(ctx context.Context, m raftpb.Message) error {
	r.inflight.Add(1)
	defer r.inflight.Add(-1)
	if r.block != nil {
		select {
		case <-r.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if r.fail != nil {
		if err := r.fail(ctx, m); err != nil {
			return err
		}
	}
	r.mu.Lock()
	r.msgs = append(r.msgs, m)
	r.mu.Unlock()
	return nil
}

func (r *recorder) ReportUnreachable(id uint64) {
	r.inflight.Add(1)
	defer r.inflight.Add(-1)
	r.mu.Lock()
	r.unreachable[id]++
	r.mu.Unlock()
}

func (r *recorder) ReportSnapshot(id uint64, status etcdraft.SnapshotStatus) {
	r.inflight.Add(1)
	defer r.inflight.Add(-1)
	r.mu.Lock()
	r.snaps = append(r.snaps, snapReport{id, status})
	r.mu.Unlock()
}

func (r *recorder) messages() []raftpb.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]raftpb.Message(nil), r.msgs...)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs)
}

func (r *recorder) unreachableCount(id uint64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unreachable[id]
}

func (r *recorder) snapshotReports() []snapReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]snapReport(nil), r.snaps...)
}

// logBuffer collects log output for assertions; it is printed if the test fails.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) contains(s string) bool { return strings.Contains(b.String(), s) }

// node bundles a started Transport with its handler and log.
type node struct {
	*Transport
	id   uint64
	addr string
	h    *recorder
	logs *logBuffer
}

// newNode starts a Transport for id on a fresh loopback port. mutate may
// adjust the config. The Transport is closed at cleanup.
func newNode(t testing.TB, id uint64, mutate func(*Config)) *node {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	return newNodeOn(t, id, ln, mutate)
}

func newNodeOn(t testing.TB, id uint64, ln net.Listener, mutate func(*Config)) *node {
	t.Helper()
	h := newRecorder()
	logs := &logBuffer{}
	cfg := Config{
		ID:          id,
		ClusterID:   testCluster,
		Listener:    ln,
		Handler:     h,
		DialTimeout: time.Second,
		MinBackoff:  5 * time.Millisecond,
		MaxBackoff:  50 * time.Millisecond,
		Logger:      slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	if r, ok := cfg.Handler.(*recorder); ok {
		h = r
	}
	tr, err := New(cfg)
	if err != nil {
		ln.Close()
		t.Fatalf("new transport %x: %v", id, err)
	}
	tr.Start()
	n := &node{Transport: tr, id: id, addr: ln.Addr().String(), h: h, logs: logs}
	t.Cleanup(func() {
		if err := tr.Close(); err != nil {
			t.Errorf("close %x: %v", id, err)
		}
		if t.Failed() {
			t.Logf("log of member %x:\n%s", id, logs.String())
		}
	})
	return n
}

// link makes a and b peers of each other and waits until both streams are up.
func link(t testing.TB, a, b *node) {
	t.Helper()
	a.AddPeer(b.id, b.addr)
	b.AddPeer(a.id, a.addr)
	waitConnected(t, a, b.id)
	waitConnected(t, b, a.id)
}

func waitConnected(t testing.TB, n *node, peer uint64) {
	t.Helper()
	waitFor(t, "stream from %x to %x", func() bool {
		p := n.peer(peer)
		return p != nil && p.connected.Load()
	}, n.id, peer)
}

// waitFor polls cond until it holds or waitTimeout passes.
func waitFor(t testing.TB, what string, cond func() bool, args ...any) {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("timed out waiting for "+what, args...)
		case <-tick.C:
		}
	}
}

func appMsg(from, to, index uint64, payload int) raftpb.Message {
	m := raftpb.Message{Type: raftpb.MsgApp, From: from, To: to, Term: 1, Index: index, LogTerm: 1, Commit: index}
	if payload > 0 {
		m.Entries = []raftpb.Entry{{Term: 1, Index: index + 1, Data: bytes.Repeat([]byte{byte(index)}, payload)}}
	}
	return m
}

// rawDial opens a plain TCP connection to n and optionally sends a handshake.
func rawDial(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// expectClosed asserts that the remote end closes c (after any bytes).
func expectClosed(t testing.TB, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(waitTimeout))
	_, err := io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("connection still open after %v", waitTimeout)
	}
}
