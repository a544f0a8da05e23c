package transport

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// Wire constants; see the package documentation for the format.
const (
	protocolVersion = 1

	kindStream   byte = 1
	kindSnapshot byte = 2

	handshakeSize = 32
	replySize     = 2
	frameHeader   = 4
)

var handshakeMagic = [4]byte{'I', 'S', 'R', 'T'}

// Reply statuses.
const (
	statusOK            byte = 0
	statusBadVersion    byte = 1
	statusWrongCluster  byte = 2
	statusWrongMember   byte = 3
	statusSenderRefused byte = 4
	statusMalformed     byte = 5
	statusHandlerFailed byte = 6
)

func statusText(s byte) string {
	switch s {
	case statusOK:
		return "accepted"
	case statusBadVersion:
		return "unsupported protocol version"
	case statusWrongCluster:
		return "cluster ID mismatch"
	case statusWrongMember:
		return "member ID mismatch (dialed the wrong member)"
	case statusSenderRefused:
		return "sender ID refused (zero, the receiver itself, or removed from the cluster)"
	case statusMalformed:
		return "malformed handshake"
	case statusHandlerFailed:
		return "receiver failed to process the message"
	default:
		return fmt.Sprintf("unknown status %d", s)
	}
}

// handshake is the first thing a dialer sends.
type handshake struct {
	version   uint8
	kind      byte
	clusterID uint64
	from, to  uint64
}

func (h handshake) marshal() [handshakeSize]byte {
	var b [handshakeSize]byte
	copy(b[0:4], handshakeMagic[:])
	b[4] = h.version
	b[5] = h.kind
	// b[6:8] reserved, zero.
	binary.BigEndian.PutUint64(b[8:16], h.clusterID)
	binary.BigEndian.PutUint64(b[16:24], h.from)
	binary.BigEndian.PutUint64(b[24:32], h.to)
	return b
}

// parseHandshake decodes b. It checks the magic and reserved bytes only; the
// acceptor checks the values (version first, so a newer peer gets a precise
// answer).
func parseHandshake(b []byte) (handshake, error) {
	if len(b) != handshakeSize {
		return handshake{}, fmt.Errorf("%w: handshake is %d bytes, want %d", ErrProtocol, len(b), handshakeSize)
	}
	if [4]byte(b[0:4]) != handshakeMagic {
		return handshake{}, fmt.Errorf("%w: bad handshake magic %q (not an isle raft peer?)", ErrProtocol, b[0:4])
	}
	if b[6] != 0 || b[7] != 0 {
		return handshake{}, fmt.Errorf("%w: reserved handshake bytes are not zero", ErrProtocol)
	}
	return handshake{
		version:   b[4],
		kind:      b[5],
		clusterID: binary.BigEndian.Uint64(b[8:16]),
		from:      binary.BigEndian.Uint64(b[16:24]),
		to:        binary.BigEndian.Uint64(b[24:32]),
	}, nil
}

// readReply reads a 2-byte reply and turns a non-OK status into an error
// wrapping ErrRejected.
func readReply(r io.Reader) error {
	var b [replySize]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return fmt.Errorf("read reply: %w", err)
	}
	if b[1] != statusOK {
		return fmt.Errorf("%w: %s (peer protocol version %d)", ErrRejected, statusText(b[1]), b[0])
	}
	return nil
}

// appendFrame appends the frame for m to buf. It refuses messages whose
// encoding exceeds limit, since the receiver would refuse them too.
func appendFrame(buf []byte, m *raftpb.Message, limit int) ([]byte, error) {
	size := m.Size()
	if size > limit {
		return buf, fmt.Errorf("%w: %s of %d bytes exceeds the %d-byte limit", ErrFrameTooLarge, m.Type, size, limit)
	}
	start := len(buf)
	need := start + frameHeader + size
	if cap(buf) < need {
		grown := make([]byte, start, need+need/4)
		copy(grown, buf)
		buf = grown
	}
	buf = buf[:need]
	binary.BigEndian.PutUint32(buf[start:], uint32(size))
	if _, err := m.MarshalToSizedBuffer(buf[start+frameHeader:]); err != nil {
		return buf[:start], fmt.Errorf("marshal %s: %w", m.Type, err)
	}
	return buf, nil
}

// growStep bounds how much readFrame allocates ahead of the bytes that have
// actually arrived, so a peer announcing a huge frame cannot make us allocate
// it without sending it.
const growStep = 1 << 20

// readFrame reads one frame body from r into buf (reused when large enough)
// and returns it. The length is validated against limit before anything is
// allocated.
func readFrame(r io.Reader, limit int, buf []byte) ([]byte, error) {
	var hdr [frameHeader]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n64 := uint64(binary.BigEndian.Uint32(hdr[:]))
	switch {
	case n64 == 0:
		return nil, fmt.Errorf("%w: empty frame", ErrProtocol)
	case n64 > uint64(limit):
		return nil, fmt.Errorf("%w: peer announced %d bytes, limit is %d", ErrFrameTooLarge, n64, limit)
	}
	n := int(n64) // fits: n64 <= limit, an int
	if cap(buf) >= n {
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, unexpectedEOF(err)
		}
		return buf, nil
	}
	buf = make([]byte, 0, min(n, growStep))
	for len(buf) < n {
		next := min(n, len(buf)+max(growStep, len(buf)))
		if cap(buf) < next {
			grown := make([]byte, len(buf), next)
			copy(grown, buf)
			buf = grown
		}
		if _, err := io.ReadFull(r, buf[len(buf):next]); err != nil {
			return nil, unexpectedEOF(err)
		}
		buf = buf[:next]
	}
	return buf, nil
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// ioChunk is the most written per deadline extension, so a large snapshot
// needs steady progress rather than finishing within one IOTimeout.
const ioChunk = 256 << 10

// deadlineWriter writes to c, extending the write deadline before each chunk.
type deadlineWriter struct {
	c       net.Conn
	timeout time.Duration
}

func (w deadlineWriter) Write(p []byte) (int, error) {
	written := 0
	for written < len(p) {
		end := min(len(p), written+ioChunk)
		if err := w.c.SetWriteDeadline(time.Now().Add(w.timeout)); err != nil {
			return written, err
		}
		n, err := w.c.Write(p[written:end])
		written += n
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

// deadlineReader reads from c, extending the read deadline before each read.
type deadlineReader struct {
	c       net.Conn
	timeout time.Duration
}

func (r deadlineReader) Read(p []byte) (int, error) {
	if err := r.c.SetReadDeadline(time.Now().Add(r.timeout)); err != nil {
		return 0, err
	}
	return r.c.Read(p)
}

// newConnReader is the buffered reader used on inbound connections.
func newConnReader(r io.Reader) *bufio.Reader { return bufio.NewReaderSize(r, 64<<10) }
