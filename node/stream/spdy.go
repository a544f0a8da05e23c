package stream

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/apimachinery/pkg/util/remotecommand"
)

// Exec and attach over SPDY/3.1, as kubectl up to 1.29 speaks them (and
// later ones when the WebSocket upgrade is refused), with the protocol
// v4.channel.k8s.io: after the upgrade the client opens one stream for
// each of error, stdin, stdout, stderr and resize that the session has,
// each named by its streamType header. The session starts once all of them
// are open, and ends with a metav1.Status on the error stream.

// spdyProtocols are the remote command protocols served over SPDY.
var spdyProtocols = []string{remotecommand.StreamProtocolV4Name}

// streamCreationTimeout bounds the wait for the client's streams.
const streamCreationTimeout = 30 * time.Second

// isSPDYUpgrade reports whether r asks for an upgrade to SPDY/3.1.
func isSPDYUpgrade(r *http.Request) bool {
	return httpstream.IsUpgradeRequest(r) && strings.EqualFold(r.Header.Get(httpstream.HeaderUpgrade), spdy.HeaderSpdy31)
}

// spdyConn is a session's SPDY connection and the client's streams.
type spdyConn struct {
	conn                           httpstream.Connection
	done                           chan struct{} // closed when conn is
	errStream                      httpstream.Stream
	stdin, stdout, stderr, resizeS httpstream.Stream
}

var _ sessionConn = (*spdyConn)(nil)

// serveSPDYSession upgrades the connection to SPDY, waits for the client's
// streams and serves the session over them.
func (h *handler) serveSPDYSession(w http.ResponseWriter, r *http.Request, op string, t target, ref ContainerRef, opts sessionOptions) {
	log := h.log.With("op", op, "target", t.String())
	protocol, err := httpstream.Handshake(r, w, spdyProtocols)
	if err != nil {
		return // answered
	}
	type newStream struct {
		s         httpstream.Stream
		replySent <-chan struct{}
	}
	streams := make(chan newStream)
	waiting := make(chan struct{})
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(s httpstream.Stream, replySent <-chan struct{}) error {
		select {
		case streams <- newStream{s, replySent}:
			return nil
		case <-waiting:
			return fmt.Errorf("%s: stream %q: the session has its streams", op, s.Headers().Get(corev1.StreamType))
		}
	})
	if conn == nil {
		close(waiting)
		return // the upgrade failed, and said so
	}
	c := &spdyConn{conn: conn, done: make(chan struct{})}
	go func() {
		<-conn.CloseChan()
		close(c.done)
	}()
	defer c.close()
	err = c.waitForStreams(opts, func() (httpstream.Stream, <-chan struct{}, bool) {
		select {
		case n := <-streams:
			return n.s, n.replySent, true
		case <-conn.CloseChan():
		case <-time.After(streamCreationTimeout):
		}
		return nil, nil, false
	})
	close(waiting)
	if err != nil {
		log.Info("stream: SPDY session", "err", err)
		return
	}
	log.Debug("stream: session started", "protocol", "SPDY/3.1+"+protocol, "command", opts.command, "tty", opts.tty)
	h.runSession(r.Context(), c, op, ref, opts, log)
}

// waitForStreams takes the client's streams from next until the session
// has all it needs (error, and the ones opts ask for) and each has its
// reply; next returns false when the client closed or took too long.
func (c *spdyConn) waitForStreams(opts sessionOptions, next func() (httpstream.Stream, <-chan struct{}, bool)) error {
	want := map[string]*httpstream.Stream{corev1.StreamTypeError: &c.errStream}
	if opts.stdin {
		want[corev1.StreamTypeStdin] = &c.stdin
	}
	if opts.stdout {
		want[corev1.StreamTypeStdout] = &c.stdout
	}
	if opts.stderr {
		want[corev1.StreamTypeStderr] = &c.stderr
	}
	if opts.tty {
		want[corev1.StreamTypeResize] = &c.resizeS
	}
	for len(want) > 0 {
		s, replySent, ok := next()
		if !ok {
			return fmt.Errorf("the client did not open its streams (%s missing)", strings.Join(slices.Sorted(maps.Keys(want)), ", "))
		}
		typ := s.Headers().Get(corev1.StreamType)
		slot, ok := want[typ]
		if !ok {
			s.Reset()
			return fmt.Errorf("stream type %q: not one of the session's, or a second one", typ)
		}
		<-replySent
		*slot = s
		delete(want, typ)
	}
	return nil
}

func (c *spdyConn) streams() (stdin io.Reader, stdout, stderr io.Writer, resize io.Reader) {
	if c.stdin != nil {
		stdin = c.stdin
	}
	if c.stdout != nil {
		stdout = c.stdout
	}
	if c.stderr != nil {
		stderr = c.stderr
	}
	if c.resizeS != nil {
		resize = c.resizeS
	}
	return stdin, stdout, stderr, resize
}

// writeStatus writes st as JSON on the error stream and closes it.
func (c *spdyConn) writeStatus(st metav1.Status) error {
	b, err := json.Marshal(st)
	if err != nil {
		panic(err) // a metav1.Status always marshals
	}
	if _, err := c.errStream.Write(b); err != nil {
		return err
	}
	return c.errStream.Close()
}

func (c *spdyConn) gone() <-chan struct{} { return c.done }

func (c *spdyConn) close() { c.conn.Close() }
