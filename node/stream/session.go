package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/remotecommand"
)

// The channels of the channel protocols, as remotecommand numbers them.
const (
	stdinChannel  = remotecommand.StreamStdIn
	stdoutChannel = remotecommand.StreamStdOut
	stderrChannel = remotecommand.StreamStdErr
	statusChannel = remotecommand.StreamErr
	resizeChannel = remotecommand.StreamResize
)

// protocols are the subprotocols served, the preferred first: v5 and v4,
// and the first channel protocol (no version), whose status channel
// carries only the text of a failure, which clients of its day and the
// conformance suite's exec over WebSocket speak.
var protocols = []string{remotecommand.StreamProtocolV5Name, remotecommand.StreamProtocolV4Name, remotecommand.StreamProtocolV1Name}

// sessionOptions are the query parameters of exec and attach.
type sessionOptions struct {
	command                    []string
	stdin, stdout, stderr, tty bool
}

// sessionOptionsOf reads the query of an exec (with its command) or attach
// request; names are the API's (stdin) or the kubelet's own (input).
func sessionOptionsOf(q url.Values, exec bool) (sessionOptions, error) {
	var o sessionOptions
	var err error
	if o.stdin, err = boolParam(q, "stdin", "input"); err != nil {
		return o, err
	}
	if o.stdout, err = boolParam(q, "stdout", "output"); err != nil {
		return o, err
	}
	if o.stderr, err = boolParam(q, "stderr", "error"); err != nil {
		return o, err
	}
	if o.tty, err = boolParam(q, "tty"); err != nil {
		return o, err
	}
	if !o.stdin && !o.stdout && !o.stderr {
		return o, errors.New("query parameters: ask for at least one of stdin, stdout and stderr")
	}
	if exec {
		o.command = q["command"]
		if len(o.command) == 0 || o.command[0] == "" {
			return o, errors.New("query parameter command: missing or empty (one per argument)")
		}
	}
	return o, nil
}

// offersProtocol reports whether the WebSocket request offers one of the
// protocols served.
func offersProtocol(r *http.Request) bool {
	for _, p := range websocket.Subprotocols(r) {
		if slices.Contains(protocols, p) {
			return true
		}
	}
	return false
}

// exec serves GET /exec/{namespace}/{pod}/{container}.
func (h *handler) exec(w http.ResponseWriter, r *http.Request) { h.session(w, r, "exec") }

// attach serves GET /attach/{namespace}/{pod}/{container}.
func (h *handler) attach(w http.ResponseWriter, r *http.Request) { h.session(w, r, "attach") }

// session checks an exec or attach request, and answers it with 400 or
// serves the session.
func (h *handler) session(w http.ResponseWriter, r *http.Request, op string) {
	t := targetOf(r)
	opts, err := sessionOptionsOf(r.URL.Query(), op == "exec")
	if err != nil {
		http.Error(w, fmt.Sprintf("%s: %v", op, err), http.StatusBadRequest)
		return
	}
	ref, ok := h.lookup(w, t)
	if !ok {
		return
	}
	if !ref.running() {
		http.Error(w, fmt.Sprintf("%s: %s is not running", op, t), http.StatusBadRequest)
		return
	}
	if op == "attach" {
		if opts.stdin && !ref.Stdin {
			http.Error(w, fmt.Sprintf("attach: %s has no stdin (spec stdin: false)", t), http.StatusBadRequest)
			return
		}
		// The kubelet too gives a terminal only to a container with one.
		opts.tty = opts.tty && ref.TTY
	}
	if opts.tty {
		opts.stderr = false // a terminal's one output is stdout
	}
	switch {
	case websocket.IsWebSocketUpgrade(r) && offersProtocol(r):
		h.serveWebSocketSession(w, r, op, t, ref, opts)
	case isSPDYUpgrade(r):
		h.serveSPDYSession(w, r, op, t, ref, opts)
	default:
		http.Error(w, fmt.Sprintf("%s: want a WebSocket upgrade with subprotocol %s, or a SPDY/3.1 upgrade with %s %s",
			op, strings.Join(protocols, " or "), httpstream.HeaderProtocolVersion, strings.Join(spdyProtocols, " or ")), http.StatusBadRequest)
	}
}

// sessionConn is the client's side of an exec or attach session: the
// channels of a WebSocket (channels.go) or the streams of a SPDY
// connection (spdy.go).
type sessionConn interface {
	// streams are the client's streams the session asked for; nil ones
	// were not asked for. resize carries the terminal's sizes as JSON.
	streams() (stdin io.Reader, stdout, stderr io.Writer, resize io.Reader)
	// writeStatus ends the session with its status.
	writeStatus(metav1.Status) error
	// gone is closed when the client has closed the connection or gone.
	gone() <-chan struct{}
	// close closes the connection.
	close()
}

// serveWebSocketSession upgrades the connection to a WebSocket and serves
// the session over its channels.
func (h *handler) serveWebSocketSession(w http.ResponseWriter, r *http.Request, op string, t target, ref ContainerRef, opts sessionOptions) {
	log := h.log.With("op", op, "target", t.String())
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		log.Info("stream: WebSocket upgrade", "err", err) // answered by the upgrader
		return
	}
	c := newChannelConn(ws, opts, h.setupGrace, log)
	defer c.close()
	log.Debug("stream: session started", "protocol", ws.Subprotocol(), "command", opts.command, "tty", opts.tty)
	// An empty message on the first output channel tells a client of the
	// older protocols that the session stands, as the kubelet does. v5's
	// clients (kubectl 1.30 on) need none: it would only be one more
	// message for kubectl up to 1.33 to read before it has made its
	// streams, were the client slower than the grace (channelConn.ready).
	if !c.v5 {
		first := byte(statusChannel)
		switch {
		case opts.stdout:
			first = stdoutChannel
		case opts.stderr:
			first = stderrChannel
		}
		if _, err := c.writer(first).Write(nil); err != nil {
			log.Debug("stream: session ended before it began", "err", err)
			return
		}
	}
	h.runSession(r.Context(), c, op, ref, opts, log)
}

// runSession runs the session in the runtime and ends it with its status.
func (h *handler) runSession(ctx context.Context, c sessionConn, op string, ref ContainerRef, opts sessionOptions, log *slog.Logger) {
	// The runtime's context ends when the client goes.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-c.gone():
			cancel()
		case <-ctx.Done():
		}
	}()
	stdin, stdout, stderr, resize := c.streams()
	s := Streams{TTY: opts.tty, Stdin: stdin, Stdout: stdout, Stderr: stderr}
	if resize != nil {
		sizes := make(chan TerminalSize, 1)
		s.Resize = sizes
		go readSizes(resize, sizes, log)
	}
	var code int
	var err error
	if op == "exec" {
		code, err = h.rt.Exec(ctx, ref.ID, opts.command, s)
	} else {
		err = h.rt.Attach(ctx, ref.ID, s)
	}
	switch {
	case err == nil:
	case ctx.Err() != nil:
		log.Debug("stream: session ended with the client's connection", "err", err)
	default:
		log.Warn("stream: session failed", "err", err)
	}
	if err := c.writeStatus(sessionStatus(op, code, err)); err != nil {
		log.Debug("stream: write status", "err", err)
	}
	log.Debug("stream: session ended", "exitCode", code)
}

// readSizes passes the terminal sizes sent on the resize channel to sizes,
// replacing one not read yet, so that the connection never waits on the
// runtime. It closes sizes when the channel ends.
func readSizes(r io.Reader, sizes chan TerminalSize, log *slog.Logger) {
	defer close(sizes)
	dec := json.NewDecoder(r)
	for {
		var size TerminalSize
		if err := dec.Decode(&size); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
				log.Warn("stream: bad terminal size; ignoring the client's next ones", "err", err)
				io.Copy(io.Discard, r)
			}
			return
		}
		select {
		case <-sizes:
		default:
		}
		sizes <- size
	}
}

// sessionStatus is the status that ends a session: Success; Failure with
// reason NonZeroExitCode and an ExitCode cause, which kubectl turns into its
// exit code; or Failure with reason InternalError.
func sessionStatus(op string, exitCode int, err error) metav1.Status {
	st := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess,
	}
	switch {
	case err != nil:
		st.Status, st.Reason, st.Code = metav1.StatusFailure, metav1.StatusReasonInternalError, http.StatusInternalServerError
		st.Message = fmt.Sprintf("%s in container: %v", op, err)
	case exitCode != 0:
		st.Status, st.Reason = metav1.StatusFailure, remotecommand.NonZeroExitCodeReason
		st.Message = fmt.Sprintf("command terminated with non-zero exit code: %d", exitCode)
		st.Details = &metav1.StatusDetails{Causes: []metav1.StatusCause{{
			Type:    remotecommand.ExitCodeCauseType,
			Message: strconv.Itoa(exitCode),
		}}}
	}
	return st
}
