package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	etcdraft "go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// runSnapshots sends the peer's MsgSnap messages, one at a time, each over
// its own connection, and reports the outcome to the Handler.
func (p *peer) runSnapshots() {
	defer p.t.wg.Done()
	for {
		select {
		case <-p.ctx.Done():
			return
		case m := <-p.snapc:
			p.sendSnapshot(&m)
		}
	}
}

func (p *peer) sendSnapshot(m *raftpb.Message) {
	start := time.Now()
	size, err := p.trySnapshot(m)
	if p.ctx.Err() != nil {
		return // removed or closing: nobody needs the report
	}
	h := p.t.cfg.Handler
	if err != nil {
		p.dropped.Inc()
		p.log.Warn("transport: sending snapshot failed", slog.Uint64("index", snapIndex(m)),
			slog.Int("bytes", size), slog.Any("err", err))
		h.ReportUnreachable(p.id)
		h.ReportSnapshot(p.id, etcdraft.SnapshotFailure)
		return
	}
	p.sent.Inc()
	p.log.Info("transport: snapshot sent", slog.Uint64("index", snapIndex(m)),
		slog.Int("bytes", size), slog.Duration("took", time.Since(start)))
	h.ReportSnapshot(p.id, etcdraft.SnapshotFinish)
}

// trySnapshot dials a snapshot connection, writes m and waits for the
// receiver's verdict. It returns the frame size.
func (p *peer) trySnapshot(m *raftpb.Message) (int, error) {
	if m.Snapshot == nil {
		return 0, errors.New("snapshot: MsgSnap carries no snapshot")
	}
	frame, err := appendFrame(nil, m, p.t.cfg.MaxFrameSize)
	if err != nil {
		return 0, fmt.Errorf("snapshot: %w", err)
	}
	addr := p.getAddr()
	conn, err := p.t.dial(p.ctx, addr, kindSnapshot, p.id)
	if err != nil {
		return len(frame), fmt.Errorf("snapshot: %w", err)
	}
	defer conn.Close()
	stop := onCancel(p.ctx, func() { conn.Close() })
	defer stop()

	timeout := p.t.cfg.IOTimeout
	if _, err := (deadlineWriter{c: conn, timeout: timeout}).Write(frame); err != nil {
		return len(frame), fmt.Errorf("snapshot: write to %s: %w", addr, err)
	}
	// The receiver answers after its Handler took the snapshot.
	if err := conn.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return len(frame), fmt.Errorf("snapshot: %w", err)
	}
	if err := readReply(conn); err != nil {
		return len(frame), fmt.Errorf("snapshot: %s: %w", addr, err)
	}
	return len(frame), nil
}

// serveSnapshot receives the single MsgSnap of a snapshot connection, hands
// it to the Handler and answers with the outcome.
func (t *Transport) serveSnapshot(conn net.Conn, from uint64) {
	log := t.log.With(slog.String("peer", peerLabel(from)), slog.String("remote", conn.RemoteAddr().String()))
	r := bufio.NewReader(deadlineReader{c: conn, timeout: t.cfg.IOTimeout})
	body, err := readFrame(r, t.cfg.MaxFrameSize, nil)
	if err != nil {
		if t.ctx.Err() == nil {
			log.Warn("transport: closing snapshot connection", slog.String("reason", "read: "+err.Error()))
		}
		return
	}
	var m raftpb.Message
	if err := m.Unmarshal(body); err != nil {
		log.Warn("transport: closing snapshot connection", slog.String("reason",
			fmt.Sprintf("%v: undecodable message: %v", ErrProtocol, err)))
		return
	}
	size := len(body)
	if err := t.checkInbound(&m, kindSnapshot, from); err != nil {
		log.Warn("transport: closing snapshot connection", slog.String("reason", err.Error()))
		return
	}
	t.metrics.received.WithLabelValues(peerLabel(from)).Inc()
	status := statusOK
	if err := t.cfg.Handler.Process(t.ctx, m); err != nil {
		status = statusHandlerFailed
		if !errors.Is(err, context.Canceled) {
			log.Warn("transport: handler refused snapshot", slog.Uint64("index", m.Snapshot.Metadata.Index), slog.Any("err", err))
		}
	} else {
		log.Info("transport: snapshot received", slog.Uint64("index", m.Snapshot.Metadata.Index), slog.Int("bytes", size))
	}
	if err := conn.SetWriteDeadline(time.Now().Add(t.cfg.IOTimeout)); err != nil {
		return
	}
	conn.Write([]byte{protocolVersion, status})
}

func snapIndex(m *raftpb.Message) uint64 {
	if m.Snapshot == nil {
		return 0
	}
	return m.Snapshot.Metadata.Index
}
