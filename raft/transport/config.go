package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"time"

	etcdraft "go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultQueueSize    = 4096
	DefaultDialTimeout  = time.Second
	DefaultIOTimeout    = 10 * time.Second
	DefaultMaxFrameSize = 512 << 20
	DefaultMinBackoff   = 100 * time.Millisecond
	DefaultMaxBackoff   = 5 * time.Second

	// minFrameLimit is the smallest MaxFrameSize accepted: a heartbeat must fit.
	minFrameLimit = 1 << 10
)

// Sentinel errors. Errors returned or logged by the package wrap one of these.
var (
	// ErrInvalidConfig: New was given an unusable Config.
	ErrInvalidConfig = errors.New("invalid transport config")
	// ErrFrameTooLarge: a frame exceeds Config.MaxFrameSize (ours or the peer's).
	ErrFrameTooLarge = errors.New("frame too large")
	// ErrProtocol: a peer sent bytes that violate the wire protocol.
	ErrProtocol = errors.New("protocol violation")
	// ErrRejected: the remote member refused our handshake or our snapshot.
	ErrRejected = errors.New("rejected by peer")
)

// Handler receives what the Transport gets from the network and its reports
// about peers. Its methods are called from transport goroutines, never from
// Send.
type Handler interface {
	// Process delivers a message addressed to this member, e.g. to
	// (etcd raft) Node.Step. It may block briefly; the context is cancelled
	// by Close.
	Process(ctx context.Context, m raftpb.Message) error
	// ReportUnreachable tells Raft that messages to id were dropped.
	ReportUnreachable(id uint64)
	// ReportSnapshot tells Raft the outcome of sending a MsgSnap to id.
	ReportSnapshot(id uint64, status etcdraft.SnapshotStatus)
}

// Config configures a Transport. Zero values select the documented defaults.
type Config struct {
	ID        uint64 // this member's Raft ID; required, non-zero
	ClusterID uint64 // peers must present the same cluster ID

	// Listener is already bound (the caller chooses the address); required.
	// The Transport owns it from New on and closes it in Close.
	Listener net.Listener
	// TLS nil means plain TCP. Otherwise each accepted connection is a TLS
	// server connection and peers are dialed with tls.Dialer, both using
	// this config (it needs Certificates or GetCertificate).
	TLS *tls.Config
	// PeerID, with TLS, returns the member ID a peer's certificate names
	// (or why it names none acceptable). An accepted connection whose
	// handshake claims another ID, or a dialed one whose peer is not the
	// member dialed, is closed before a message is read or sent.
	PeerID func(tls.ConnectionState) (uint64, error)
	// AllowPlain, with TLS, is asked for each connection: while it
	// reports true, a connection that does not start a TLS handshake is
	// served in plain TCP, and a peer that does not answer TLS is dialed
	// again in plain TCP (members of a release without TLS, during a
	// rolling upgrade). Nil: TLS only.
	AllowPlain func() bool

	Handler Handler // required

	QueueSize    int           // per-peer outbound queue in messages; default 4096
	DialTimeout  time.Duration // connect + TLS + handshake; default 1 s (acceptors allow twice that)
	IOTimeout    time.Duration // a write, or a snapshot read, making no progress this long fails; default 10 s
	MaxFrameSize int           // largest frame sent or accepted, bytes; default 512 MiB
	MinBackoff   time.Duration // first reconnect delay; default 100 ms
	MaxBackoff   time.Duration // reconnect delay cap; default 5 s

	// Registerer receives the transport's Prometheus counters; nil = don't register.
	Registerer prometheus.Registerer
	Logger     *slog.Logger // nil = slog.Default()
}

// withDefaults validates cfg and fills in defaults.
func (cfg Config) withDefaults() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("transport: new: %w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case cfg.ID == 0:
		return bad("ID is 0; set it to this member's Raft ID")
	case cfg.Listener == nil:
		return bad("Listener is nil; bind one with net.Listen and pass it")
	case cfg.Handler == nil:
		return bad("Handler is nil; pass the node that processes messages")
	case cfg.QueueSize < 0:
		return bad("QueueSize %d is negative", cfg.QueueSize)
	case cfg.DialTimeout < 0, cfg.IOTimeout < 0, cfg.MinBackoff < 0, cfg.MaxBackoff < 0:
		return bad("timeouts and backoffs must not be negative")
	case cfg.MaxFrameSize != 0 && cfg.MaxFrameSize < minFrameLimit:
		return bad("MaxFrameSize %d is below the minimum %d", cfg.MaxFrameSize, minFrameLimit)
	case uint64(cfg.MaxFrameSize) > math.MaxUint32:
		return bad("MaxFrameSize %d does not fit the 32-bit frame length", cfg.MaxFrameSize)
	case cfg.TLS != nil && len(cfg.TLS.Certificates) == 0 && cfg.TLS.GetCertificate == nil && cfg.TLS.GetConfigForClient == nil:
		return bad("TLS config has no certificate; set Certificates or GetCertificate")
	case cfg.TLS == nil && (cfg.PeerID != nil || cfg.AllowPlain != nil):
		return bad("PeerID and AllowPlain need TLS")
	}
	if cfg.QueueSize == 0 {
		cfg.QueueSize = DefaultQueueSize
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.IOTimeout == 0 {
		cfg.IOTimeout = DefaultIOTimeout
	}
	if cfg.MaxFrameSize == 0 {
		cfg.MaxFrameSize = DefaultMaxFrameSize
	}
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.MinBackoff > cfg.MaxBackoff {
		return bad("MinBackoff %v exceeds MaxBackoff %v", cfg.MinBackoff, cfg.MaxBackoff)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg, nil
}
