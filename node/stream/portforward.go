package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
)

// kubectl port-forward, as the kubelet serves it: protocol
// portforward.k8s.io over SPDY. The client opens two streams for each
// connection it accepts, with the same requestID header: an error stream
// and a data stream, both naming the pod's port. The agent connects to
// that port on the pod's localhost (inside its network namespace) and
// copies the data both ways; a failure to connect is written to the error
// stream. kubectl first tries the same protocol tunnelled in WebSocket and
// falls back to SPDY when that upgrade is refused, as here.

// portForwardProtocol is the one subprotocol spoken.
const portForwardProtocol = "portforward.k8s.io"

// Bounds of a port-forward session.
const (
	// pairTimeout is how long the first stream of a pair waits for the
	// other.
	pairTimeout = 30 * time.Second
	// portForwardIdle closes a session nothing went through for that long
	// (the kubelet's default streaming idle timeout).
	portForwardIdle = 4 * time.Hour
	// podDialTimeout bounds the connection to the pod's port.
	podDialTimeout = 10 * time.Second
)

// DialFunc makes connections, as net.Dialer's DialContext.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// fwdStream is a stream of a port-forward session with its checked
// headers.
type fwdStream struct {
	s         httpstream.Stream
	kind      string // corev1.StreamTypeData or StreamTypeError
	port      uint16
	requestID string
}

// checkForwardStream validates the headers of a new stream.
func checkForwardStream(h http.Header) (fwdStream, error) {
	f := fwdStream{kind: h.Get(corev1.StreamType), requestID: h.Get(corev1.PortForwardRequestIDHeader)}
	if f.kind != corev1.StreamTypeData && f.kind != corev1.StreamTypeError {
		return f, fmt.Errorf("stream type %q: want %q or %q", f.kind, corev1.StreamTypeData, corev1.StreamTypeError)
	}
	p, err := strconv.ParseUint(h.Get(corev1.PortHeader), 10, 16)
	if err != nil || p == 0 {
		return f, fmt.Errorf("port %q: want a number from 1 to 65535", h.Get(corev1.PortHeader))
	}
	f.port = uint16(p)
	if f.requestID == "" {
		return f, fmt.Errorf("no %s header (kubectl 1.11 and later send one)", corev1.PortForwardRequestIDHeader)
	}
	return f, nil
}

func (h *handler) portForward(w http.ResponseWriter, r *http.Request) {
	namespace, pod := r.PathValue("namespace"), r.PathValue("pod")
	if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		// kubectl falls back to SPDY on this answer.
		http.Error(w, "port forwarding is served over SPDY, not WebSocket", http.StatusBadRequest)
		return
	}
	dial, err := h.pods.Dialer(namespace, pod)
	switch {
	case errors.Is(err, ErrNotFound):
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	case err != nil:
		h.log.Error("stream: port-forward: look up pod", "pod", namespace+"/"+pod, "err", err)
		http.Error(w, fmt.Sprintf("looking up pod %s/%s: %v", namespace, pod, err), http.StatusInternalServerError)
		return
	}
	if _, err := httpstream.Handshake(r, w, []string{portForwardProtocol}); err != nil {
		return // answered
	}
	streams := make(chan fwdStream)
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(s httpstream.Stream, replySent <-chan struct{}) error {
		f, err := checkForwardStream(s.Headers())
		if err != nil {
			return fmt.Errorf("port-forward: %w", err)
		}
		f.s = s
		go func() {
			<-replySent
			select {
			case streams <- f:
			case <-r.Context().Done():
			}
		}()
		return nil
	})
	if conn == nil {
		return // the upgrade failed, and said so
	}
	defer conn.Close()
	conn.SetIdleTimeout(portForwardIdle)
	h.log.Debug("stream: port-forward", "pod", namespace+"/"+pod)
	h.forwardSession(r.Context(), conn, streams, dial, namespace+"/"+pod)
}

// forwardSession pairs the streams of conn by request and forwards each
// pair until the connection closes.
func (h *handler) forwardSession(ctx context.Context, conn httpstream.Connection, streams <-chan fwdStream, dial DialFunc, pod string) {
	type pair struct {
		data, err *fwdStream
		since     time.Time
	}
	pairs := map[string]*pair{}
	// The forwards end with the session: their connections to the pod
	// close then, even where the pod sends nothing.
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	tick := time.NewTicker(pairTimeout / 2)
	defer tick.Stop()
	for {
		select {
		case <-conn.CloseChan():
			return
		case <-ctx.Done():
			return
		case <-tick.C:
			for id, p := range pairs {
				if time.Since(p.since) > pairTimeout {
					for _, f := range []*fwdStream{p.data, p.err} {
						if f != nil {
							f.s.Reset()
						}
					}
					delete(pairs, id)
				}
			}
		case f := <-streams:
			p := pairs[f.requestID]
			if p == nil {
				p = &pair{since: time.Now()}
				pairs[f.requestID] = p
			}
			slot := &p.data
			if f.kind == corev1.StreamTypeError {
				slot = &p.err
			}
			if *slot != nil || (p.data != nil && p.data.port != f.port) || (p.err != nil && p.err.port != f.port) {
				f.s.Reset() // a second stream of that type, or another port
				continue
			}
			*slot = &f
			if p.data == nil || p.err == nil {
				continue
			}
			delete(pairs, f.requestID)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.RemoveStreams(p.data.s, p.err.s)
				if err := forward(ctx, dial, p.data.s, p.err.s, p.data.port); err != nil {
					h.log.Debug("stream: port-forward", "pod", pod, "port", p.data.port, "err", err)
				}
			}()
		}
	}
}

// forward connects to port on the pod's localhost and copies between the
// connection and the data stream until both directions end; a failure to
// connect goes to the error stream.
func forward(ctx context.Context, dial DialFunc, data, errStream io.ReadWriteCloser, port uint16) error {
	defer errStream.Close()
	dctx, cancel := context.WithTimeout(ctx, podDialTimeout)
	c, err := dial(dctx, "tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
	cancel()
	if err != nil {
		data.Close()
		err = fmt.Errorf("connecting to port %d of the pod: %w", port, err)
		io.WriteString(errStream, err.Error())
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(c, data) // the client's side, until it closes its end
		if tc, ok := c.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
	}()
	_, err = io.Copy(data, c)
	data.Close() // the pod's side ended: the client sees the end
	<-done
	return err
}
