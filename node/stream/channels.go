package stream

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/remotecommand"
)

const (
	// closeSignal, in v5, starts a message {255, channel} that closes the
	// client's side of a channel.
	closeSignal = 255
	// writeTimeout bounds each write to the client, as client-go's does.
	writeTimeout = 60 * time.Second
	// closeTimeout bounds the wait for the client's answer to our close.
	closeTimeout = 5 * time.Second
	// copyBufSize is the buffer that moves stdin and sizes into their pipes.
	copyBufSize = 4 * 1024
	// clientSetupGrace is how long a session's first message waits for
	// the client to send one of its own (see channelConn.ready).
	clientSetupGrace = 20 * time.Millisecond
)

// channelIDs are the channel bytes that start messages, as slices of it.
var channelIDs = [...]byte{stdinChannel, stdoutChannel, stderrChannel, statusChannel, resizeChannel}

var upgrader = websocket.Upgrader{
	Subprotocols: protocols,
	// Write buffers are taken only while a message is written: memory
	// grows with the writes in flight, not with the sessions.
	WriteBufferPool: &sync.Pool{},
	// The callers are API servers authenticated by client certificate,
	// never browsers: there is no cross-site request to refuse.
	CheckOrigin: func(*http.Request) bool { return true },
	Error: func(w http.ResponseWriter, _ *http.Request, status int, reason error) {
		http.Error(w, "WebSocket upgrade: "+reason.Error(), status)
	},
}

// channelConn is one WebSocket connection speaking the channel protocol:
// each binary message starts with the number of its channel. Messages on
// stdin and resize are moved into pipes, read by the session; the others
// from the client are dropped.
type channelConn struct {
	ws *websocket.Conn
	v5 bool
	// jsonStatus: the status channel carries a metav1.Status (v4, v5),
	// not the text of a failure alone.
	jsonStatus bool
	log        *slog.Logger

	// Incoming channels; nil writers for the ones not asked for.
	stdinR, resizeR *io.PipeReader
	stdinW, resizeW *io.PipeWriter

	// stdout, stderr: the output channels asked for.
	stdout, stderr bool

	wmu  sync.Mutex    // one message written at a time
	done chan struct{} // closed when the read loop ends: the client closed or went

	// ready is closed when the client is surely reading its channels: it
	// sent a message, or clientSetupGrace passed since the upgrade. No
	// message is written before. client-go's WebSocket executor up to
	// 0.33 (kubectl 1.30 to 1.33) starts reading the connection before it
	// has made its streams, and drops a message that comes in between
	// with an error line on kubectl's stderr, "Unknown stream id 1,
	// discarding message" (fixed in client-go 0.34, kubernetes#131203).
	// The client sends nothing that says its streams are made unless it
	// has stdin or a terminal; its setup takes microseconds after the
	// 101, which the grace covers many times over.
	ready      chan struct{}
	readyOnce  sync.Once
	readyTimer *time.Timer
}

// newChannelConn starts reading the upgraded connection ws.
// Its messages wait grace for the client's first (see ready).
func newChannelConn(ws *websocket.Conn, opts sessionOptions, grace time.Duration, log *slog.Logger) *channelConn {
	c := &channelConn{
		ws:         ws,
		v5:         ws.Subprotocol() == remotecommand.StreamProtocolV5Name,
		jsonStatus: ws.Subprotocol() != remotecommand.StreamProtocolV1Name,
		log:        log,
		done:       make(chan struct{}),
		ready:      make(chan struct{}),
	}
	c.readyTimer = time.AfterFunc(grace, c.setReady)
	if opts.stdin {
		c.stdinR, c.stdinW = io.Pipe()
	}
	if opts.tty {
		c.resizeR, c.resizeW = io.Pipe()
	}
	c.stdout, c.stderr = opts.stdout, opts.stderr
	go c.readLoop()
	return c
}

// readLoop dispatches the client's messages until the connection ends, then
// ends the incoming channels (io.EOF) and closes c.done.
func (c *channelConn) readLoop() {
	defer close(c.done)
	defer c.setReady() // writes fail from now on, without waiting
	defer func() {
		for _, w := range []*io.PipeWriter{c.stdinW, c.resizeW} {
			if w != nil {
				w.Close()
			}
		}
	}()
	var buf []byte
	if c.stdinW != nil || c.resizeW != nil {
		buf = make([]byte, copyBufSize)
	}
	var id [1]byte
	for {
		typ, r, err := c.ws.NextReader()
		if err != nil {
			if !websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway) && !errors.Is(err, net.ErrClosed) {
				c.log.Debug("stream: connection ended", "err", err)
			}
			return
		}
		c.setReady()
		if typ != websocket.BinaryMessage {
			continue
		}
		if _, err := io.ReadFull(r, id[:]); err != nil {
			continue // an empty message
		}
		switch id[0] {
		case stdinChannel:
			c.copyTo(c.stdinW, r, buf)
		case resizeChannel:
			c.copyTo(c.resizeW, r, buf)
		case closeSignal:
			if _, err := io.ReadFull(r, id[:]); err == nil && c.v5 && id[0] == stdinChannel && c.stdinW != nil {
				c.stdinW.Close()
			}
		}
	}
}

// setReady lets the session's messages go (see ready).
func (c *channelConn) setReady() {
	c.readyOnce.Do(func() { close(c.ready) })
}

// copyTo moves a message into a channel's pipe, waiting for it to be read;
// it drops the message if the channel was not asked for or is closed.
func (c *channelConn) copyTo(w *io.PipeWriter, r io.Reader, buf []byte) {
	if w == nil {
		return
	}
	if _, err := io.CopyBuffer(w, r, buf); err != nil && !errors.Is(err, io.ErrClosedPipe) {
		c.log.Debug("stream: read message", "err", err)
	}
}

var _ sessionConn = (*channelConn)(nil)

func (c *channelConn) streams() (stdin io.Reader, stdout, stderr io.Writer, resize io.Reader) {
	if c.stdinR != nil {
		stdin = c.stdinR
	}
	if c.stdout {
		stdout = c.writer(stdoutChannel)
	}
	if c.stderr {
		stderr = c.writer(stderrChannel)
	}
	if c.resizeR != nil {
		resize = c.resizeR
	}
	return stdin, stdout, stderr, resize
}

// writeStatus writes st on the status channel: as JSON (v4, v5), or the
// text of a failure alone (the first protocol), nothing on success.
func (c *channelConn) writeStatus(st metav1.Status) error {
	status, err := json.Marshal(st)
	if err != nil {
		panic(err) // a metav1.Status always marshals
	}
	if !c.jsonStatus {
		if st.Status == metav1.StatusSuccess {
			return nil
		}
		status = []byte(st.Message)
	}
	_, err = c.writer(statusChannel).Write(status)
	return err
}

func (c *channelConn) gone() <-chan struct{} { return c.done }

// writer returns the writer of an outgoing channel: each Write is one
// message.
func (c *channelConn) writer(ch byte) io.Writer {
	return channelWriter{c, ch}
}

type channelWriter struct {
	c  *channelConn
	ch byte
}

func (w channelWriter) Write(p []byte) (int, error) {
	c := w.c
	<-c.ready
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.ws.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil {
		return 0, err
	}
	mw, err := c.ws.NextWriter(websocket.BinaryMessage)
	if err != nil {
		return 0, err
	}
	if _, err := mw.Write(channelIDs[w.ch : w.ch+1]); err != nil {
		mw.Close()
		return 0, err
	}
	n, err := mw.Write(p)
	if cerr := mw.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// close ends the session's connection: it stops waiting for the session to
// read stdin, sends a normal close, waits (a while) for the client's answer
// and closes the connection.
func (c *channelConn) close() {
	c.readyTimer.Stop()
	for _, r := range []*io.PipeReader{c.stdinR, c.resizeR} {
		if r != nil {
			r.Close()
		}
	}
	deadline := time.Now().Add(closeTimeout)
	msg := websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")
	if err := c.ws.WriteControl(websocket.CloseMessage, msg, deadline); err == nil {
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-c.done:
		case <-t.C:
			c.log.Debug("stream: client did not answer the close")
		}
		t.Stop()
	}
	c.ws.Close()
	<-c.done
}
