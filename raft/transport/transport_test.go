package transport

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/raft/v3/raftpb"
)

func TestDeliveryAndOrdering(t *testing.T) {
	tests := []struct {
		name    string
		n       int // messages per direction
		perSend int // messages per Send call
		payload int // entry bytes, 0 = no entry
		both    bool
	}{
		{name: "one message per Send", n: 1000, perSend: 1},
		{name: "Ready-sized Send calls", n: 3000, perSend: 64},
		{name: "1 KiB entries", n: 2000, perSend: 16, payload: 1024},
		{name: "both directions at once", n: 1000, perSend: 8, payload: 100, both: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newNode(t, 1, nil), newNode(t, 2, nil)
			link(t, a, b)
			send := func(from, to *node) {
				for i := 0; i < tc.n; i += tc.perSend {
					batch := make([]raftpb.Message, 0, tc.perSend)
					for j := i; j < min(i+tc.perSend, tc.n); j++ {
						batch = append(batch, appMsg(from.id, to.id, uint64(j+1), tc.payload))
					}
					from.Send(batch)
				}
			}
			var wg sync.WaitGroup
			wg.Go(func() { send(a, b) })
			if tc.both {
				wg.Go(func() { send(b, a) })
			}
			wg.Wait()
			check := func(from, to *node) {
				waitFor(t, "%d messages at %x", func() bool { return to.h.count() >= tc.n }, tc.n, to.id)
				got := to.h.messages()
				if len(got) != tc.n {
					t.Fatalf("member %x received %d messages, want %d", to.id, len(got), tc.n)
				}
				for i, m := range got {
					if m.Index != uint64(i+1) || m.From != from.id || m.To != to.id || m.Type != raftpb.MsgApp {
						t.Fatalf("message %d at %x: got %s index %d from %x to %x, want MsgApp index %d from %x",
							i, to.id, m.Type, m.Index, m.From, m.To, i+1, from.id)
					}
					if tc.payload > 0 && (len(m.Entries) != 1 || !bytes.Equal(m.Entries[0].Data, bytes.Repeat([]byte{byte(i + 1)}, tc.payload))) {
						t.Fatalf("message %d at %x: entry payload corrupted", i, to.id)
					}
				}
				if n := from.h.unreachableCount(to.id); n != 0 {
					t.Errorf("member %x reported %x unreachable %d times", from.id, to.id, n)
				}
				// The writer counts a batch after its Flush returns, which may
				// be after the receiver already processed it.
				p := from.peer(to.id)
				waitFor(t, "%d frames counted", func() bool { return p.frames.Load() == int64(tc.n) }, tc.n)
				if batches := p.batches.Load(); batches < 1 || batches > int64(tc.n) {
					t.Errorf("%x→%x: %d frames in %d batches", from.id, to.id, tc.n, batches)
				}
			}
			check(a, b)
			if tc.both {
				check(b, a)
			}
		})
	}
}

func TestBatchingCoalescesQueuedMessages(t *testing.T) {
	a, b := newNode(t, 1, nil), newNode(t, 2, nil)
	link(t, a, b)
	const n = 3000
	msgs := make([]raftpb.Message, n)
	for i := range msgs {
		msgs[i] = appMsg(1, 2, uint64(i+1), 0)
	}
	a.Send(msgs) // one Send: the writer finds many messages queued per wake-up
	waitFor(t, "all messages", func() bool { return b.h.count() == n })
	p := a.peer(2)
	waitFor(t, "all frames counted", func() bool { return p.frames.Load() == n })
	if frames, batches := p.frames.Load(), p.batches.Load(); batches*2 > frames {
		t.Fatalf("%d frames written in %d batches (flushes); want %d frames in at most %d batches", frames, batches, n, n/2)
	}
}

// countingWriter counts the writes the bufio.Writer makes to the connection.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

func TestWriteBatchFlushesOncePerBatch(t *testing.T) {
	tests := []struct {
		name       string
		queued     int
		payload    int
		wantFrames []int // per batch
		wantWrites int   // writes to the connection for the first batch; 0 = don't check
	}{
		{name: "single message", queued: 1, wantFrames: []int{1}, wantWrites: 1},
		{name: "everything queued goes in one write", queued: 100, wantFrames: []int{100}, wantWrites: 1},
		{name: "message count limit", queued: maxBatchMsgs + 476, wantFrames: []int{maxBatchMsgs, 476}},
		{name: "byte limit", queued: 20, payload: 100 << 10, wantFrames: []int{11, 9}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, 1, func(c *Config) { c.QueueSize = 2048 })
			p := newPeer(n.Transport, 2, "127.0.0.1:1")
			t.Cleanup(p.stop)
			for i := range tc.queued {
				p.msgc <- appMsg(1, 2, uint64(i+1), tc.payload)
			}
			next := uint64(1)
			for bi, want := range tc.wantFrames {
				cw := &countingWriter{}
				bw := bufio.NewWriterSize(cw, writeBufSize)
				if _, err := p.writeBatch(bw, <-p.msgc, nil); err != nil {
					t.Fatalf("batch %d: %v", bi, err)
				}
				if bi == 0 && tc.wantWrites > 0 && cw.writes != tc.wantWrites {
					t.Errorf("batch %d: %d writes to the connection, want %d", bi, cw.writes, tc.wantWrites)
				}
				if bw.Buffered() != 0 {
					t.Errorf("batch %d: %d bytes left unflushed", bi, bw.Buffered())
				}
				r := bytes.NewReader(cw.Bytes())
				got := 0
				for r.Len() > 0 {
					body, err := readFrame(r, DefaultMaxFrameSize, nil)
					if err != nil {
						t.Fatalf("batch %d frame %d: %v", bi, got, err)
					}
					var m raftpb.Message
					if err := m.Unmarshal(body); err != nil {
						t.Fatalf("batch %d frame %d: %v", bi, got, err)
					}
					if m.Index != next {
						t.Fatalf("batch %d frame %d: index %d, want %d", bi, got, m.Index, next)
					}
					next++
					got++
				}
				if got != want {
					t.Errorf("batch %d: %d frames, want %d", bi, got, want)
				}
			}
			if len(p.msgc) != 0 {
				t.Errorf("%d messages left in the queue", len(p.msgc))
			}
			if got, want := p.batches.Load(), int64(len(tc.wantFrames)); got != want {
				t.Errorf("batches = %d, want %d", got, want)
			}
		})
	}
}

func TestSendNeverBlocksWhenQueueFull(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := newNode(t, 1, func(c *Config) {
		c.QueueSize = 16
		c.IOTimeout = time.Minute // keep the writer stuck on the full socket
		c.Registerer = reg
	})
	blocked := newRecorder()
	blocked.block = make(chan struct{})
	b := newNode(t, 2, func(c *Config) { c.Handler = blocked })
	link(t, a, b)

	// The receiver never returns from Process, so the socket buffers and
	// then the 16-slot queue fill up; Send must keep returning.
	const n = 20000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			a.Send([]raftpb.Message{appMsg(1, 2, uint64(i+1), 1024)})
		}
	}()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatalf("Send blocked: %d messages not sent within %v", n, waitTimeout)
	}
	dropped := counterValue(t, reg, "isle_raft_transport_messages_dropped_total", "2")
	if dropped == 0 || dropped >= n {
		t.Fatalf("dropped = %v, want between 1 and %d", dropped, n-1)
	}
	waitFor(t, "ReportUnreachable(2)", func() bool { return a.h.unreachableCount(2) > 0 })
}

func TestSendWithoutConnectionDrops(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := newNode(t, 1, func(c *Config) { c.Registerer = reg })
	a.AddPeer(2, closedAddr(t))
	a.AddPeer(3, closedAddr(t))

	msgs := []raftpb.Message{appMsg(1, 2, 1, 0), appMsg(1, 2, 2, 0), appMsg(1, 3, 1, 0), appMsg(1, 9, 1, 0)}
	a.Send(msgs)
	for _, tc := range []struct {
		peer string
		id   uint64
		want float64
	}{{"2", 2, 2}, {"3", 3, 1}, {"9", 9, 1}} {
		if got := counterValue(t, reg, "isle_raft_transport_messages_dropped_total", tc.peer); got != tc.want {
			t.Errorf("dropped{peer=%s} = %v, want %v", tc.peer, got, tc.want)
		}
		waitFor(t, "ReportUnreachable(%x)", func() bool { return a.h.unreachableCount(tc.id) > 0 }, tc.id)
	}
}

// closedAddr returns a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestReconnectAfterPeerRestart(t *testing.T) {
	a, b := newNode(t, 1, nil), newNode(t, 2, nil)
	link(t, a, b)
	a.Send([]raftpb.Message{appMsg(1, 2, 1, 0)})
	waitFor(t, "first message", func() bool { return b.h.count() == 1 })

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a to notice b is down", func() bool { return !a.peer(2).connected.Load() })
	waitFor(t, "ReportUnreachable(2)", func() bool {
		a.Send([]raftpb.Message{appMsg(1, 2, 2, 0)}) // dropped while b is down
		return a.h.unreachableCount(2) > 0
	})

	ln, err := net.Listen("tcp", b.addr) // b comes back on the same address
	if err != nil {
		t.Fatalf("re-listen on %s: %v", b.addr, err)
	}
	b2 := newNodeOn(t, 2, ln, nil)
	waitConnected(t, a, 2)
	a.Send([]raftpb.Message{appMsg(1, 2, 3, 0)})
	waitFor(t, "message after reconnect", func() bool { return b2.h.count() == 1 })
	if m := b2.h.messages()[0]; m.Index != 3 {
		t.Fatalf("got index %d after reconnect, want 3", m.Index)
	}
}

func TestAddPeer(t *testing.T) {
	t.Run("same address keeps the connection", func(t *testing.T) {
		a, b := newNode(t, 1, nil), newNode(t, 2, nil)
		link(t, a, b)
		p := a.peer(2)
		p.mu.Lock()
		before := p.conn
		p.mu.Unlock()
		a.AddPeer(2, b.addr)
		p.mu.Lock()
		after := p.conn
		p.mu.Unlock()
		if a.peer(2) != p || before != after || before == nil {
			t.Fatal("AddPeer with the same address replaced the peer or its connection")
		}
	})
	t.Run("new address replaces the old", func(t *testing.T) {
		a, b := newNode(t, 1, nil), newNode(t, 2, nil)
		link(t, a, b)
		moved := newNode(t, 2, nil) // member 2 moved to a new address
		a.AddPeer(2, moved.addr)
		waitFor(t, "delivery at the new address", func() bool {
			a.Send([]raftpb.Message{appMsg(1, 2, 1, 0)})
			return moved.h.count() > 0
		})
		if !a.logs.contains("peer address changed") {
			t.Error("address change not logged")
		}
	})
	t.Run("self and zero are ignored", func(t *testing.T) {
		a := newNode(t, 1, nil)
		a.AddPeer(1, "127.0.0.1:1")
		a.AddPeer(0, "127.0.0.1:1")
		if a.peer(1) != nil || a.peer(0) != nil {
			t.Fatal("peer created for self or ID 0")
		}
	})
}

func TestRemovePeer(t *testing.T) {
	a, b := newNode(t, 1, nil), newNode(t, 2, nil)
	link(t, a, b)

	b.RemovePeer(1)
	if b.peer(1) != nil {
		t.Fatal("peer 1 still present after RemovePeer")
	}
	// b closes a's stream and refuses a's reconnects.
	waitFor(t, "a's reconnect refused", func() bool { return a.logs.contains("sender ID refused") })
	if a.peer(2).connected.Load() {
		t.Fatal("a's stream to b is up although b removed a")
	}
	b.Send([]raftpb.Message{appMsg(2, 1, 1, 0)}) // unknown now: dropped
	waitFor(t, "ReportUnreachable(1) at b", func() bool { return b.h.unreachableCount(1) > 0 })

	b.AddPeer(1, a.addr) // re-adding lifts the refusal
	waitConnected(t, a, 2)
	waitConnected(t, b, 1)
	a.Send([]raftpb.Message{appMsg(1, 2, 7, 0)})
	waitFor(t, "delivery after re-adding", func() bool { return b.h.count() == 1 })
}

func TestMetrics(t *testing.T) {
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	a := newNode(t, 1, func(c *Config) { c.Registerer = regA })
	b := newNode(t, 2, func(c *Config) { c.Registerer = regB })
	link(t, a, b)
	for i := range 10 {
		a.Send([]raftpb.Message{appMsg(1, 2, uint64(i+1), 10)})
	}
	waitFor(t, "10 messages", func() bool { return b.h.count() == 10 })
	waitFor(t, "sent counter", func() bool {
		return counterValue(t, regA, "isle_raft_transport_messages_sent_total", "2") == 10
	})
	if got := counterValue(t, regB, "isle_raft_transport_messages_received_total", "1"); got != 10 {
		t.Errorf("received{peer=1} = %v, want 10", got)
	}
	if got := counterValue(t, regA, "isle_raft_transport_messages_dropped_total", "2"); got != 0 {
		t.Errorf("dropped{peer=2} = %v, want 0", got)
	}

	// A second transport cannot register the same metrics; after Close it can.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := New(Config{ID: 5, Listener: ln, Handler: newRecorder(), Registerer: regA}); err == nil {
		t.Fatal("New registered duplicate metrics without error")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	tr, err := New(Config{ID: 5, Listener: ln, Handler: newRecorder(), Registerer: regA})
	if err != nil {
		t.Fatalf("New after Close of the previous transport: %v", err)
	}
	tr.Close()
}

// counterValue reads a counter with label peer from g (0 if absent).
func counterValue(t testing.TB, g prometheus.Gatherer, name, peer string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "peer" && l.GetValue() == peer {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func TestNewValidatesConfig(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	valid := func() Config { return Config{ID: 1, Listener: ln, Handler: newRecorder()} }
	tests := []struct {
		name   string
		mutate func(*Config)
	}{
		{"zero ID", func(c *Config) { c.ID = 0 }},
		{"no listener", func(c *Config) { c.Listener = nil }},
		{"no handler", func(c *Config) { c.Handler = nil }},
		{"negative queue", func(c *Config) { c.QueueSize = -1 }},
		{"negative timeout", func(c *Config) { c.DialTimeout = -time.Second }},
		{"frame limit too small", func(c *Config) { c.MaxFrameSize = 100 }},
		{"backoff inverted", func(c *Config) { c.MinBackoff, c.MaxBackoff = time.Second, time.Millisecond }},
		{"TLS without certificate", func(c *Config) { c.TLS = &tls.Config{} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := valid()
			tc.mutate(&cfg)
			tr, err := New(cfg)
			if !errors.Is(err, ErrInvalidConfig) {
				if tr != nil {
					tr.Close()
				}
				t.Fatalf("New: err = %v, want ErrInvalidConfig", err)
			}
		})
	}
	t.Run("defaults", func(t *testing.T) {
		cfg, err := valid().withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.QueueSize != DefaultQueueSize || cfg.DialTimeout != DefaultDialTimeout ||
			cfg.MaxFrameSize != DefaultMaxFrameSize || cfg.Logger == nil {
			t.Fatalf("defaults not applied: %+v", cfg)
		}
	})
}
