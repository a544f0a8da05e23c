package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"syscall"
	"time"
)

// tcpKeepAlive detects dead peers on otherwise idle streams.
const tcpKeepAlive = 15 * time.Second

// dial connects to the member `to` at addr, sends the handshake for kind and
// waits for the acceptor's reply, all within DialTimeout. Cancelling ctx
// aborts it.
func (t *Transport) dial(ctx context.Context, addr string, kind byte, to uint64) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.DialTimeout)
	defer cancel()
	nd := &net.Dialer{KeepAlive: tcpKeepAlive}
	var (
		conn net.Conn
		err  error
	)
	if t.cfg.TLS != nil {
		conn, err = t.dialTLS(ctx, nd, addr, to)
	} else {
		conn, err = nd.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	// The handshake must finish within the dial deadline, and ends early if
	// ctx is cancelled (Close, RemovePeer).
	if dl, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(dl); err != nil {
			conn.Close()
			return nil, fmt.Errorf("handshake with %s: %w", addr, err)
		}
	}
	stop := onCancel(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	err = t.clientHandshake(conn, kind, to)
	if !stop() && err == nil {
		err = ctx.Err()
	}
	if err == nil {
		err = conn.SetDeadline(time.Time{})
	}
	if err != nil {
		conn.Close()
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ErrRejected) {
			err = fmt.Errorf("%w (%w)", ctxErr, err)
		}
		return nil, fmt.Errorf("handshake with %s: %w", addr, err)
	}
	return conn, nil
}

// dialTLS dials member to at addr in TLS and checks that the peer's
// certificate is to's (Config.PeerID). A peer that answers the TLS
// handshake with something else or nothing is dialed again in plain TCP,
// while Config.AllowPlain allows it.
func (t *Transport) dialTLS(ctx context.Context, nd *net.Dialer, addr string, to uint64) (net.Conn, error) {
	conn, err := (&tls.Dialer{NetDialer: nd, Config: t.cfg.TLS}).DialContext(ctx, "tcp", addr)
	if err != nil {
		if notTLS(err) && t.cfg.AllowPlain != nil && t.cfg.AllowPlain() {
			plain, perr := nd.DialContext(ctx, "tcp", addr)
			if perr == nil {
				t.metrics.plain.Inc()
				t.log.Debug("transport: the peer does not answer TLS; plain TCP", slog.String("peer", peerLabel(to)), slog.Any("err", err))
				return plain, nil
			}
		}
		return nil, err
	}
	if t.cfg.PeerID != nil {
		id, err := t.cfg.PeerID(conn.(*tls.Conn).ConnectionState())
		if err == nil && id != to {
			err = fmt.Errorf("%w: the certificate is member %x's, not %x's", ErrProtocol, id, to)
		}
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("TLS: the peer's certificate: %w", err)
		}
	}
	return conn, nil
}

// notTLS reports whether a TLS handshake failed because the peer does
// not speak TLS: a release without it answers a ClientHello with its own
// refusal and closes.
func notTLS(err error) bool {
	var rh tls.RecordHeaderError
	return errors.As(err, &rh) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

func (t *Transport) clientHandshake(conn net.Conn, kind byte, to uint64) error {
	h := handshake{version: protocolVersion, kind: kind, clusterID: t.cfg.ClusterID, from: t.cfg.ID, to: to}
	b := h.marshal()
	if _, err := conn.Write(b[:]); err != nil {
		return fmt.Errorf("write handshake: %w", err)
	}
	return readReply(conn)
}

// onCancel runs f (in another goroutine) if ctx ends before stop is called.
// stop reports whether f was prevented from running; if f did start, stop
// waits for it, so no goroutine outlives the caller. Call stop exactly once.
func onCancel(ctx context.Context, f func()) (stop func() bool) {
	done := make(chan struct{})
	unregister := context.AfterFunc(ctx, func() {
		defer close(done)
		f()
	})
	return func() bool {
		if unregister() {
			return true
		}
		<-done
		return false
	}
}
