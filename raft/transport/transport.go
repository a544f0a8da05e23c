package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	etcdraft "go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// logEvery is the minimum interval between repeated log lines of one kind.
const logEvery = 5 * time.Second

// Transport sends Raft messages to peers and delivers received ones to the
// Handler. Create it with New; all methods are safe for concurrent use.
type Transport struct {
	cfg     Config
	log     *slog.Logger
	ln      net.Listener
	metrics *metrics

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine started by the Transport

	closed    atomic.Bool
	startOnce sync.Once

	// peers is a copy-on-write map so Send reads it without locking.
	peers atomic.Pointer[map[uint64]*peer]

	mu      sync.Mutex // guards the fields below and copy-on-write of peers
	removed map[uint64]struct{}
	inbound map[net.Conn]struct{} // accepted connections, for Close
	streams map[uint64]net.Conn   // current inbound stream per sender

	// Reports for the Handler, queued by Send and delivered by runReporter.
	repMu      sync.Mutex
	pending    map[uint64]*pendingReport
	reportc    chan struct{}
	unknownLog logLimiter
}

type pendingReport struct {
	unreachable   bool
	snapshotFails int
}

// New validates cfg and creates a Transport. It starts one goroutine that
// delivers reports to the Handler; call Close to stop it.
func New(cfg Config) (*Transport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	ln := cfg.Listener
	ctx, cancel := context.WithCancel(context.Background())
	t := &Transport{
		cfg:     cfg,
		log:     cfg.Logger.With(slog.String("component", "raft-transport"), slog.String("member", peerLabel(cfg.ID))),
		ln:      ln,
		metrics: m,
		ctx:     ctx,
		cancel:  cancel,
		removed: make(map[uint64]struct{}),
		inbound: make(map[net.Conn]struct{}),
		streams: make(map[uint64]net.Conn),
		pending: make(map[uint64]*pendingReport),
		reportc: make(chan struct{}, 1),
	}
	empty := map[uint64]*peer{}
	t.peers.Store(&empty)
	t.wg.Add(1)
	go t.runReporter()
	return t, nil
}

// Start runs the accept loop. Calling it again, or after Close, does nothing.
func (t *Transport) Start() {
	t.startOnce.Do(func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.closed.Load() {
			return
		}
		t.wg.Add(1)
		go t.acceptLoop()
	})
}

// AddPeer starts sending to member id at addr (host:port). It is idempotent;
// a different addr replaces the old one and re-establishes the connection.
// Adding a peer also lifts an earlier RemovePeer for that ID.
func (t *Transport) AddPeer(id uint64, addr string) {
	if id == 0 || id == t.cfg.ID {
		t.log.Warn("transport: add peer: ignored, ID is zero or this member", slog.String("peer", peerLabel(id)), slog.String("addr", addr))
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed.Load() {
		return
	}
	delete(t.removed, id)
	cur := *t.peers.Load()
	if p, ok := cur[id]; ok {
		if p.setAddr(addr) {
			t.log.Info("transport: peer address changed", slog.String("peer", peerLabel(id)), slog.String("addr", addr))
		}
		return
	}
	p := newPeer(t, id, addr)
	next := make(map[uint64]*peer, len(cur)+1)
	for k, v := range cur {
		next[k] = v
	}
	next[id] = p
	t.peers.Store(&next)
	t.wg.Add(2)
	go p.runStream()
	go p.runSnapshots()
	t.log.Info("transport: peer added", slog.String("peer", peerLabel(id)), slog.String("addr", addr))
}

// RemovePeer stops sending to id, drops what is queued for it and refuses
// and closes its inbound connections until AddPeer(id) is called again. It
// does not wait for the peer's goroutines; Close does.
func (t *Transport) RemovePeer(id uint64) {
	t.mu.Lock()
	if t.closed.Load() {
		t.mu.Unlock()
		return
	}
	t.removed[id] = struct{}{}
	cur := *t.peers.Load()
	p := cur[id]
	if p != nil {
		next := make(map[uint64]*peer, len(cur))
		for k, v := range cur {
			if k != id {
				next[k] = v
			}
		}
		t.peers.Store(&next)
	}
	in := t.streams[id]
	t.mu.Unlock()
	if p != nil {
		p.stop()
		t.log.Info("transport: peer removed", slog.String("peer", peerLabel(id)))
	}
	if in != nil {
		in.Close()
	}
}

// Send queues msgs for their peers and returns without waiting for the
// network; it never blocks. A message for an unknown peer, for a peer whose
// stream is not connected, or for a peer whose queue is full is dropped, and
// ReportUnreachable follows. MsgSnap is queued for the peer's snapshot sender
// (connected or not); if that queue is full it is dropped and
// SnapshotFailure is reported too.
func (t *Transport) Send(msgs []raftpb.Message) {
	if t.closed.Load() {
		return
	}
	peers := *t.peers.Load()
	for i := range msgs {
		m := &msgs[i]
		if p := peers[m.To]; p != nil {
			p.send(m)
			continue
		}
		t.dropUnknown(m)
	}
}

func (t *Transport) dropUnknown(m *raftpb.Message) {
	t.metrics.dropped.WithLabelValues(peerLabel(m.To)).Inc()
	if m.To == 0 || m.To == t.cfg.ID {
		return // not a peer; nothing to report
	}
	t.queueReport(m.To, m.Type == raftpb.MsgSnap)
	if ok, n := t.unknownLog.allow(logEvery); ok {
		t.log.Warn("transport: dropped message for unknown peer; was AddPeer called?",
			slog.String("peer", peerLabel(m.To)), slog.String("type", m.Type.String()), slog.Int64("suppressed", n))
	}
}

// queueReport records that id is unreachable (and that a snapshot to it
// failed) for runReporter. It only takes a short lock, never waits on the
// Handler.
func (t *Transport) queueReport(id uint64, snapshotFailed bool) {
	t.repMu.Lock()
	r := t.pending[id]
	if r == nil {
		r = &pendingReport{}
		t.pending[id] = r
	}
	r.unreachable = true
	if snapshotFailed {
		r.snapshotFails++
	}
	t.repMu.Unlock()
	select {
	case t.reportc <- struct{}{}:
	default:
	}
}

// runReporter calls the Handler for reports queued by queueReport, so that
// Send never calls into the Handler.
func (t *Transport) runReporter() {
	defer t.wg.Done()
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-t.reportc:
		}
		t.repMu.Lock()
		batch := t.pending
		t.pending = make(map[uint64]*pendingReport, len(batch))
		t.repMu.Unlock()
		for id, r := range batch {
			if t.ctx.Err() != nil {
				return
			}
			if r.unreachable {
				t.cfg.Handler.ReportUnreachable(id)
			}
			for range r.snapshotFails {
				t.cfg.Handler.ReportSnapshot(id, etcdraft.SnapshotFailure)
			}
		}
	}
}

// Close stops accepting, closes the listener and every connection, and waits
// for all goroutines of the Transport to exit. Messages still queued are
// dropped. Calling Close again returns nil.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed.Swap(true) {
		t.mu.Unlock()
		return nil
	}
	peers := *t.peers.Load()
	empty := map[uint64]*peer{}
	t.peers.Store(&empty)
	conns := make([]net.Conn, 0, len(t.inbound))
	for c := range t.inbound {
		conns = append(conns, c)
	}
	t.mu.Unlock()

	t.cancel()
	err := t.ln.Close()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	for _, p := range peers {
		p.stop()
	}
	for _, c := range conns {
		c.Close()
	}
	t.wg.Wait()
	t.metrics.unregister(t.cfg.Registerer)
	if err != nil {
		return fmt.Errorf("transport: close listener: %w", err)
	}
	return nil
}

// peer returns the peer for id, or nil.
func (t *Transport) peer(id uint64) *peer { return (*t.peers.Load())[id] }
