package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/raft/v3/raftpb"
)

const (
	// A batch ends after this many messages or bytes, whichever comes first,
	// so counters advance and one batch cannot hold the stream for long.
	maxBatchMsgs  = 1024
	maxBatchBytes = 1 << 20
	// writeBufSize is the bufio.Writer size of a stream.
	writeBufSize = 64 << 10
	// snapQueueSize: Raft sends one snapshot at a time per follower.
	snapQueueSize = 4
	// keepScratch: a larger marshal buffer is released after use.
	keepScratch = 1 << 20
)

var errPeerClosed = errors.New("connection closed by peer")

// peer is the sending side for one remote member: a bounded queue, a stream
// writer goroutine and a snapshot sender goroutine.
type peer struct {
	t     *Transport
	id    uint64
	label string
	log   *slog.Logger

	ctx    context.Context // cancelled by stop
	cancel context.CancelFunc

	mu   sync.Mutex
	addr string
	conn net.Conn // current outbound stream, nil while disconnected

	redial    chan struct{} // cap 1: address changed, skip the backoff
	msgc      chan raftpb.Message
	snapc     chan raftpb.Message
	connected atomic.Bool

	sent, dropped prometheus.Counter
	dropLog       logLimiter

	batches, frames atomic.Int64 // statistics, for tests
}

func newPeer(t *Transport, id uint64, addr string) *peer {
	ctx, cancel := context.WithCancel(t.ctx)
	label := peerLabel(id)
	return &peer{
		t:       t,
		id:      id,
		label:   label,
		log:     t.log.With(slog.String("peer", label)),
		ctx:     ctx,
		cancel:  cancel,
		addr:    addr,
		redial:  make(chan struct{}, 1),
		msgc:    make(chan raftpb.Message, t.cfg.QueueSize),
		snapc:   make(chan raftpb.Message, snapQueueSize),
		sent:    t.metrics.sent.WithLabelValues(label),
		dropped: t.metrics.dropped.WithLabelValues(label),
	}
}

// setAddr changes the address and, if it changed, drops the current
// connection so the writer reconnects at once. It reports whether it changed.
func (p *peer) setAddr(addr string) bool {
	p.mu.Lock()
	if p.addr == addr {
		p.mu.Unlock()
		return false
	}
	p.addr = addr
	c := p.conn
	p.mu.Unlock()
	if c != nil {
		c.Close()
	}
	select {
	case p.redial <- struct{}{}:
	default:
	}
	return true
}

func (p *peer) getAddr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

// setConn installs the stream connection; false if the peer is stopping.
func (p *peer) setConn(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx.Err() != nil {
		return false
	}
	p.conn = c
	return true
}

// stop ends the peer's goroutines: cancel, then unblock any I/O.
func (p *peer) stop() {
	p.cancel()
	p.mu.Lock()
	c := p.conn
	p.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// send queues m without blocking. Called from Transport.Send.
func (p *peer) send(m *raftpb.Message) {
	if m.Type == raftpb.MsgSnap {
		select {
		case p.snapc <- *m:
		default:
			p.drop(m, "snapshot queue full")
		}
		return
	}
	if !p.connected.Load() {
		p.drop(m, "no connection")
		return
	}
	select {
	case p.msgc <- *m:
	default:
		p.drop(m, "queue full")
	}
}

func (p *peer) drop(m *raftpb.Message, reason string) {
	p.dropped.Inc()
	p.t.queueReport(p.id, m.Type == raftpb.MsgSnap)
	if ok, n := p.dropLog.allow(logEvery); ok {
		p.log.Warn("transport: dropped message", slog.String("type", m.Type.String()),
			slog.String("reason", reason), slog.Int64("suppressed", n))
	}
}

// discardQueued drops everything queued: it was meant for a connection that
// is gone, and Raft will resend what still matters.
func (p *peer) discardQueued() {
	for {
		select {
		case <-p.msgc:
			p.dropped.Inc()
		default:
			return
		}
	}
}

// wait sleeps for about d (with jitter), returning early on an address
// change; false if the peer is stopping.
func (p *peer) wait(d time.Duration) bool {
	if d > 1 {
		d = d/2 + rand.N(d/2)
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-p.ctx.Done():
		return false
	case <-p.redial:
		return true
	case <-tm.C:
		return true
	}
}

// runStream keeps a stream to the peer open and writes queued messages to it.
func (p *peer) runStream() {
	defer p.t.wg.Done()
	cfg := &p.t.cfg
	backoff := cfg.MinBackoff
	failures := 0
	for p.ctx.Err() == nil {
		addr := p.getAddr()
		conn, err := p.t.dial(p.ctx, addr, kindStream, p.id)
		if err != nil {
			if p.ctx.Err() != nil {
				return
			}
			failures++
			lvl := slog.LevelDebug
			if failures == 1 || errors.Is(err, ErrRejected) {
				lvl = slog.LevelWarn
			}
			p.log.Log(p.ctx, lvl, "transport: cannot connect to peer; retrying", slog.String("addr", addr),
				slog.Int("attempt", failures), slog.Duration("backoff", backoff), slog.Any("err", err))
			p.t.queueReport(p.id, false)
			p.discardQueued()
			if !p.wait(backoff) {
				return
			}
			backoff = min(2*backoff, cfg.MaxBackoff)
			continue
		}
		if !p.setConn(conn) {
			conn.Close()
			return
		}
		p.log.Info("transport: connected to peer", slog.String("addr", addr))
		failures, backoff = 0, cfg.MinBackoff
		p.connected.Store(true)
		err = p.writeLoop(conn)
		p.connected.Store(false)
		p.mu.Lock()
		p.conn = nil
		p.mu.Unlock()
		if p.ctx.Err() != nil {
			return
		}
		p.log.Warn("transport: lost connection to peer; reconnecting", slog.String("addr", addr), slog.Any("err", err))
		p.t.queueReport(p.id, false)
		p.discardQueued()
		if !p.wait(cfg.MinBackoff) {
			return
		}
	}
}

// writeLoop writes batches to conn until an error, the peer closing the
// connection, or stop. It closes conn before returning.
func (p *peer) writeLoop(conn net.Conn) error {
	// The acceptor never sends on a stream: a read returning means the
	// connection is gone (closed, reset or a protocol error).
	brokenc := make(chan struct{})
	go func() {
		defer close(brokenc)
		var b [1]byte
		conn.Read(b[:])
	}()
	defer func() {
		conn.Close()
		<-brokenc
	}()

	bw := bufio.NewWriterSize(deadlineWriter{c: conn, timeout: p.t.cfg.IOTimeout}, writeBufSize)
	var scratch []byte
	for {
		select {
		case <-p.ctx.Done():
			return p.ctx.Err()
		case <-brokenc:
			return errPeerClosed
		case m := <-p.msgc:
			var err error
			if scratch, err = p.writeBatch(bw, m, scratch); err != nil {
				return err
			}
		}
	}
}

// writeBatch writes m and whatever else is queued (up to the batch limits)
// to bw, then flushes once. It returns the scratch buffer for reuse.
func (p *peer) writeBatch(bw *bufio.Writer, m raftpb.Message, scratch []byte) ([]byte, error) {
	n, size := 0, 0
	for more := true; more; {
		var err error
		scratch, err = appendFrame(scratch[:0], &m, p.t.cfg.MaxFrameSize)
		if err != nil {
			p.dropped.Inc()
			p.t.queueReport(p.id, false)
			p.log.Error("transport: dropped message that cannot be sent", slog.Any("err", err))
		} else {
			if _, err := bw.Write(scratch); err != nil {
				p.dropped.Add(float64(n + 1))
				return nil, fmt.Errorf("write: %w", err)
			}
			n++
			size += len(scratch)
		}
		if cap(scratch) > keepScratch {
			scratch = nil
		}
		if n >= maxBatchMsgs || size >= maxBatchBytes {
			break
		}
		select {
		case m = <-p.msgc:
		default:
			more = false
		}
	}
	if n == 0 {
		return scratch, nil
	}
	if err := bw.Flush(); err != nil {
		p.dropped.Add(float64(n))
		return nil, fmt.Errorf("flush: %w", err)
	}
	p.sent.Add(float64(n))
	p.batches.Add(1)
	p.frames.Add(int64(n))
	return scratch, nil
}
