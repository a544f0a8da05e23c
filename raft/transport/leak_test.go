package transport

import (
	"context"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// TestCloseLeaksNothing runs a busy three-member mesh with every kind of
// goroutine in flight (streams, a blocked handler, a snapshot waiting on the
// receiver, a peer that is down, a half-open inbound connection) and checks
// that Close leaves no goroutine behind.
func TestCloseLeaksNothing(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		slow := newRecorder()
		slow.fail = func(ctx context.Context, m raftpb.Message) error {
			if m.Type == raftpb.MsgSnap {
				<-ctx.Done() // never takes the snapshot
				return ctx.Err()
			}
			return nil
		}
		stuck := newRecorder()
		stuck.fail = func(ctx context.Context, m raftpb.Message) error {
			<-ctx.Done()
			<-time.After(50 * time.Millisecond) // a handler slow to give up: Close must wait for it
			return ctx.Err()
		}
		a := newNode(t, 1, nil)
		b := newNode(t, 2, func(c *Config) { c.Handler = slow })
		c := newNode(t, 3, func(c *Config) { c.Handler = stuck })
		nodes := []*node{a, b, c}
		for _, x := range nodes {
			for _, y := range nodes {
				if x != y {
					x.AddPeer(y.id, y.addr)
				}
			}
			x.AddPeer(9, closedAddr(t)) // a member that is down: dial/backoff loop
		}
		for _, x := range nodes {
			for _, y := range nodes {
				if x != y {
					waitConnected(t, x, y.id)
				}
			}
		}
		for i := range 200 {
			for _, x := range nodes {
				var msgs []raftpb.Message
				for _, y := range nodes {
					if x != y {
						msgs = append(msgs, appMsg(x.id, y.id, uint64(i+1), 128))
					}
				}
				x.Send(msgs)
			}
		}
		a.Send([]raftpb.Message{snapMsg(1, 2, 7, 64<<10)})
		waitFor(t, "b to hold the snapshot connection", func() bool { return extraInbound(b) > 0 })
		waitFor(t, "a and b to deliver to each other", func() bool { return a.h.count() == 400 && b.h.count() == 400 })
		half, err := net.Dial("tcp", a.addr) // never sends a handshake
		if err != nil {
			t.Fatal(err)
		}
		defer half.Close()
		waitFor(t, "a to accept the half-open connection", func() bool { return extraInbound(a) > 0 })

		for _, x := range nodes {
			if err := x.Close(); err != nil {
				t.Fatalf("close %x: %v", x.id, err)
			}
		}
		// Close waits: once it returned, no Handler call may be running
		// (c's handler takes 50 ms to give up after cancellation).
		for _, x := range nodes {
			if n := x.h.inflight.Load(); n != 0 {
				t.Fatalf("%d Handler calls of member %x still running after Close", n, x.id)
			}
		}
		if n := c.h.count(); n != 0 {
			t.Fatalf("stuck handler processed %d messages", n)
		}
	}()
	// Goroutines may take a moment to return after their last statement.
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		left := transportGoroutines()
		now := runtime.NumGoroutine()
		if len(left) == 0 && now <= before {
			return
		}
		select {
		case <-deadline.C:
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines before, %d after Close (%d of the transport):\n%s", before, now, len(left), buf)
		case <-tick.C:
		}
	}
}

// extraInbound counts n's accepted connections that are not streams
// (snapshot or still in the handshake).
func extraInbound(n *node) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.inbound) - len(n.streams)
}

// transportGoroutines returns the stacks of goroutines running code of a
// Transport or peer.
func transportGoroutines() []string {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "transport.(*Transport)") || strings.Contains(g, "transport.(*peer)") {
			out = append(out, g)
		}
	}
	return out
}
