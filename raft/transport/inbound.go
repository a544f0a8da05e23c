package transport

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	etcdraft "go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// keepReadBuf: a stream's read buffer larger than this is not kept.
const keepReadBuf = 1 << 20

// acceptLoop accepts connections until Close.
func (t *Transport) acceptLoop() {
	defer t.wg.Done()
	delay := 5 * time.Millisecond
	for {
		conn, err := t.ln.Accept()
		if err != nil {
			if t.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				if t.ctx.Err() == nil {
					t.log.Error("transport: listener closed; no longer accepting peers", slog.Any("err", err))
				}
				return
			}
			// Transient (e.g. EMFILE): back off briefly and retry.
			t.log.Warn("transport: accept failed; retrying", slog.Any("err", err), slog.Duration("delay", delay))
			tm := time.NewTimer(delay)
			select {
			case <-t.ctx.Done():
				tm.Stop()
				return
			case <-tm.C:
			}
			delay = min(2*delay, time.Second)
			continue
		}
		delay = 5 * time.Millisecond
		if !t.trackInbound(conn) {
			conn.Close()
			return
		}
		go t.serveConn(conn)
	}
}

// trackInbound registers conn for Close and counts its goroutine; false if
// the Transport is closed.
func (t *Transport) trackInbound(conn net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed.Load() {
		return false
	}
	t.inbound[conn] = struct{}{}
	t.wg.Add(1)
	return true
}

func (t *Transport) untrackInbound(conn net.Conn, from uint64) {
	t.mu.Lock()
	delete(t.inbound, conn)
	if from != 0 && t.streams[from] == conn {
		delete(t.streams, from)
	}
	t.mu.Unlock()
}

// serveConn runs the acceptor side of a connection: handshake, then stream
// or snapshot.
func (t *Transport) serveConn(conn net.Conn) {
	var from uint64
	defer t.wg.Done()
	defer func() {
		conn.Close()
		t.untrackInbound(conn, from)
	}()
	remote := conn.RemoteAddr().String()
	conn, certID, err := t.secure(conn)
	if err != nil {
		if t.ctx.Err() == nil {
			t.log.Warn("transport: refused connection", slog.String("remote", remote), slog.String("reason", err.Error()))
		}
		return
	}
	h, status, err := t.serverHandshake(conn, certID)
	if err != nil {
		if t.ctx.Err() == nil {
			t.log.Warn("transport: refused connection", slog.String("remote", remote), slog.String("reason", err.Error()))
		}
		return
	}
	if status != statusOK {
		return
	}
	from = h.from
	switch h.kind {
	case kindStream:
		if !t.registerStream(conn, from) {
			return
		}
		t.serveStream(conn, from)
	case kindSnapshot:
		t.serveSnapshot(conn, from)
	}
}

// tlsRecordHandshake is the first byte of a TLS connection (a handshake
// record); a plain one starts with the handshake's magic.
const tlsRecordHandshake = 0x16

// secure makes an accepted connection what Config says: with TLS, the
// server side of a TLS connection whose peer's certificate names member
// certID (when Config.PeerID is set), or a plain one while AllowPlain
// allows it. Nothing of Raft is read before.
func (t *Transport) secure(conn net.Conn) (net.Conn, uint64, error) {
	if t.cfg.TLS == nil {
		return conn, 0, nil
	}
	if err := conn.SetDeadline(time.Now().Add(2 * t.cfg.DialTimeout)); err != nil {
		return conn, 0, err
	}
	var first [1]byte
	if _, err := io.ReadFull(conn, first[:]); err != nil {
		return conn, 0, fmt.Errorf("read the first byte: %w", err)
	}
	pc := &prefixConn{Conn: conn, prefix: first[:]}
	if first[0] != tlsRecordHandshake {
		if t.cfg.AllowPlain != nil && t.cfg.AllowPlain() {
			t.metrics.plain.Inc()
			return pc, 0, nil
		}
		return conn, 0, fmt.Errorf("%w: a connection without TLS (first byte %#02x); this member takes TLS alone", ErrProtocol, first[0])
	}
	tc := tls.Server(pc, t.cfg.TLS)
	if err := tc.HandshakeContext(t.ctx); err != nil {
		return tc, 0, fmt.Errorf("TLS: %w", err)
	}
	if t.cfg.PeerID == nil {
		return tc, 0, nil
	}
	id, err := t.cfg.PeerID(tc.ConnectionState())
	if err != nil {
		return tc, 0, fmt.Errorf("TLS: the peer's certificate: %w", err)
	}
	return tc, id, nil
}

// prefixConn is a connection whose first bytes were read already.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(b []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(b, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

// serverHandshake reads and checks the dialer's handshake and answers it;
// certID, if not 0, is the member the dialer's certificate names. A
// non-nil error explains a refusal (already answered when possible).
func (t *Transport) serverHandshake(conn net.Conn, certID uint64) (handshake, byte, error) {
	if err := conn.SetDeadline(time.Now().Add(2 * t.cfg.DialTimeout)); err != nil {
		return handshake{}, 0, err
	}
	var b [handshakeSize]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		return handshake{}, 0, fmt.Errorf("read handshake: %w", err)
	}
	h, err := parseHandshake(b[:])
	status := statusOK
	switch {
	case err != nil:
		status = statusMalformed
	case h.version != protocolVersion:
		status = statusBadVersion
		err = fmt.Errorf("%w: %s: peer speaks version %d, this member %d", ErrProtocol, statusText(status), h.version, protocolVersion)
	case h.clusterID != t.cfg.ClusterID:
		status = statusWrongCluster
		err = fmt.Errorf("%w: %s: peer %x claims cluster %x, this member is in cluster %x; is it configured for another cluster?",
			ErrProtocol, statusText(status), h.from, h.clusterID, t.cfg.ClusterID)
	case h.to != t.cfg.ID:
		status = statusWrongMember
		err = fmt.Errorf("%w: %s: peer %x wants member %x, this is member %x; check the peer's address list",
			ErrProtocol, statusText(status), h.from, h.to, t.cfg.ID)
	case h.from == 0 || h.from == t.cfg.ID || t.isRemoved(h.from):
		status = statusSenderRefused
		err = fmt.Errorf("%w: %s: peer claims ID %x", ErrProtocol, statusText(status), h.from)
	case certID != 0 && h.from != certID:
		status = statusSenderRefused
		err = fmt.Errorf("%w: %s: peer claims ID %x, its certificate is member %x's", ErrProtocol, statusText(status), h.from, certID)
	case h.kind != kindStream && h.kind != kindSnapshot:
		status = statusMalformed
		err = fmt.Errorf("%w: unknown connection kind %d", ErrProtocol, h.kind)
	}
	if _, werr := conn.Write([]byte{protocolVersion, status}); werr != nil && err == nil {
		err = fmt.Errorf("write handshake reply: %w", werr)
	}
	if err == nil {
		err = conn.SetDeadline(time.Time{})
	}
	return h, status, err
}

func (t *Transport) isRemoved(id uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.removed[id]
	return ok
}

// registerStream makes conn the stream from `from`, closing an older one (a
// peer reconnects when it thinks the old stream is dead). False if the peer
// was removed meanwhile or the Transport is closing.
func (t *Transport) registerStream(conn net.Conn, from uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, removed := t.removed[from]; removed || t.closed.Load() {
		return false
	}
	if old := t.streams[from]; old != nil {
		old.Close()
	}
	t.streams[from] = conn
	return true
}

// serveStream reads frames from a stream and passes them to the Handler
// until the connection ends or a frame is invalid.
func (t *Transport) serveStream(conn net.Conn, from uint64) {
	log := t.log.With(slog.String("peer", peerLabel(from)), slog.String("remote", conn.RemoteAddr().String()))
	log.Debug("transport: accepted stream")
	received := t.metrics.received.WithLabelValues(peerLabel(from))
	r := newConnReader(conn)
	var (
		buf      []byte
		errorLog logLimiter
	)
	for {
		body, err := readFrame(r, t.cfg.MaxFrameSize, buf)
		if err != nil {
			switch {
			case t.ctx.Err() != nil:
			case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
				log.Debug("transport: stream closed", slog.Any("err", err))
			default:
				log.Warn("transport: closing stream", slog.String("reason", err.Error()))
			}
			return
		}
		if cap(body) <= keepReadBuf {
			buf = body[:0]
		}
		var m raftpb.Message
		if err := m.Unmarshal(body); err != nil {
			log.Warn("transport: closing stream", slog.String("reason",
				fmt.Sprintf("%v: undecodable message: %v", ErrProtocol, err)))
			return
		}
		if err := t.checkInbound(&m, kindStream, from); err != nil {
			log.Warn("transport: closing stream", slog.String("reason", err.Error()))
			return
		}
		received.Inc()
		if err := t.cfg.Handler.Process(t.ctx, m); err != nil {
			if t.ctx.Err() != nil {
				return
			}
			if ok, n := errorLog.allow(logEvery); ok {
				log.Warn("transport: handler failed to process message", slog.String("type", m.Type.String()),
					slog.Any("err", err), slog.Int64("suppressed", n))
			}
		}
	}
}

// checkInbound validates a decoded message from the network before it
// reaches the Handler (and etcd raft, which trusts its input).
func (t *Transport) checkInbound(m *raftpb.Message, kind byte, from uint64) error {
	if _, known := raftpb.MessageType_name[int32(m.Type)]; !known {
		return fmt.Errorf("%w: unknown message type %d", ErrProtocol, m.Type)
	}
	switch {
	case m.To != t.cfg.ID:
		return fmt.Errorf("%w: %s addressed to %x, this is member %x", ErrProtocol, m.Type, m.To, t.cfg.ID)
	case m.From != from:
		return fmt.Errorf("%w: %s from %x on the connection of member %x", ErrProtocol, m.Type, m.From, from)
	case etcdraft.IsLocalMsg(m.Type):
		return fmt.Errorf("%w: local-only message type %s received from the network", ErrProtocol, m.Type)
	case len(m.Responses) > 0:
		return fmt.Errorf("%w: %s carries local storage responses", ErrProtocol, m.Type)
	case m.Type == raftpb.MsgSnap && m.Snapshot == nil:
		return fmt.Errorf("%w: MsgSnap without a snapshot", ErrProtocol)
	case kind == kindSnapshot && m.Type != raftpb.MsgSnap:
		return fmt.Errorf("%w: %s on a snapshot connection", ErrProtocol, m.Type)
	}
	return nil
}
