package stream

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/isle-cluster/isle/node/logs"
)

// containerLogs serves GET /containerLogs/{namespace}/{pod}/{container}.
func (h *handler) containerLogs(w http.ResponseWriter, r *http.Request) {
	t := targetOf(r)
	opt, previous, err := logOptions(r.URL.Query(), h.now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ref, ok := h.lookup(w, t)
	if !ok {
		return
	}
	path := ref.LogPath
	opt.Running = ref.Running
	if previous {
		if ref.PreviousLogPath == "" {
			http.Error(w, fmt.Sprintf("previous terminated container %q in pod %q not found", t.container, t.pod),
				http.StatusBadRequest)
			return
		}
		path, opt.Running = ref.PreviousLogPath, nil
	}
	if path == "" {
		http.Error(w, fmt.Sprintf("%s has not started: no log yet", t), http.StatusBadRequest)
		return
	}
	if _, err := os.Stat(path); err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, fs.ErrNotExist) {
			status = http.StatusNotFound
		}
		http.Error(w, fmt.Sprintf("log of %s: %v", t, err), status)
		return
	}
	opt.Logger = h.log.With("target", t.String())
	if websocket.IsWebSocketUpgrade(r) {
		h.logsOverWebSocket(w, r, t, path, opt)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	out := &flushWriter{w: w, rc: http.NewResponseController(w), flush: opt.Follow}
	if opt.Follow {
		// The client learns at once that its request stands, before the
		// container says anything.
		w.WriteHeader(http.StatusOK)
		out.started = true
		if err := out.rc.Flush(); err != nil {
			return
		}
	}
	err = logs.Read(r.Context(), path, opt, out)
	switch {
	case err == nil || r.Context().Err() != nil:
	case out.started:
		h.log.Warn("stream: container logs", "target", t.String(), "err", err)
	default:
		http.Error(w, fmt.Sprintf("log of %s: %v", t, err), http.StatusInternalServerError)
	}
}

// logOptions reads the query of a containerLogs request (the kubelet's
// parameters, validated as the API server does).
func logOptions(q url.Values, now time.Time) (opt logs.ReadOptions, previous bool, err error) {
	opt.TailLines = -1
	if opt.Follow, err = boolParam(q, "follow"); err != nil {
		return opt, false, err
	}
	if previous, err = boolParam(q, "previous"); err != nil {
		return opt, false, err
	}
	if opt.Timestamps, err = boolParam(q, "timestamps"); err != nil {
		return opt, false, err
	}
	if n, ok, err := intParam(q, "tailLines", 0); err != nil {
		return opt, false, err
	} else if ok {
		opt.TailLines = n
	}
	if n, ok, err := intParam(q, "limitBytes", 1); err != nil {
		return opt, false, err
	} else if ok {
		opt.LimitBytes = n
	}
	secs, hasSecs, err := intParam(q, "sinceSeconds", 1)
	if err != nil {
		return opt, false, err
	}
	switch {
	case q.Has("sinceTime"):
		v := q.Get("sinceTime")
		if hasSecs {
			return opt, false, &queryError{"sinceTime", v, "give sinceSeconds or sinceTime, not both"}
		}
		if opt.Since, err = time.Parse(time.RFC3339, v); err != nil {
			return opt, false, &queryError{"sinceTime", v, "want an RFC 3339 time"}
		}
	case hasSecs:
		secs = min(secs, math.MaxInt64/int64(time.Second))
		opt.Since = now.Add(-time.Duration(secs) * time.Second)
	}
	switch v := q.Get("stream"); v {
	case "", "All":
	case "Stdout":
		opt.Stream = logs.Stdout
	case "Stderr":
		opt.Stream = logs.Stderr
	default:
		return opt, false, &queryError{"stream", v, "want All, Stdout or Stderr"}
	}
	return opt, previous, nil
}

// flushWriter writes a response, flushing each write when following (the
// logs package buffers, and writes when it has caught up with the file).
type flushWriter struct {
	w       io.Writer
	rc      *http.ResponseController
	flush   bool
	started bool // the response's header has gone
}

func (f *flushWriter) Write(p []byte) (int, error) {
	f.started = true
	n, err := f.w.Write(p)
	if err == nil && f.flush {
		err = f.rc.Flush()
	}
	return n, err
}

// The subprotocols of logs over a WebSocket, as the API server serves
// them: each piece of the log one message, binary or, with base64,
// base64-encoded text. A client that names none gets binary.
const (
	logsBinary = "binary.k8s.io"
	logsBase64 = "base64.binary.k8s.io"
)

var logsUpgrader = websocket.Upgrader{
	Subprotocols:    []string{logsBinary, logsBase64},
	WriteBufferPool: &sync.Pool{},
	CheckOrigin:     upgrader.CheckOrigin,
	Error:           upgrader.Error,
}

// logsOverWebSocket serves a log request that asks for a WebSocket: the log
// as messages, then a normal close. The client's going ends it.
func (h *handler) logsOverWebSocket(w http.ResponseWriter, r *http.Request, t target, path string, opt logs.ReadOptions) {
	ws, err := logsUpgrader.Upgrade(w, r, nil)
	if err != nil {
		h.log.Info("stream: logs: WebSocket upgrade", "target", t.String(), "err", err) // answered by the upgrader
		return
	}
	defer ws.Close()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	closed := make(chan struct{})
	go func() { // the client's messages are none of ours; its close ends the stream
		defer close(closed)
		defer cancel()
		for {
			if _, _, err := ws.NextReader(); err != nil {
				return
			}
		}
	}()
	out := &messageWriter{ws: ws, base64: ws.Subprotocol() == logsBase64}
	if err := logs.Read(ctx, path, opt, out); err != nil && ctx.Err() == nil {
		h.log.Warn("stream: container logs", "target", t.String(), "err", err)
	}
	deadline := time.Now().Add(closeTimeout)
	msg := websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")
	if err := ws.WriteControl(websocket.CloseMessage, msg, deadline); err == nil {
		select {
		case <-closed:
		case <-time.After(time.Until(deadline)):
		}
	}
}

// messageWriter sends each Write as one WebSocket message.
type messageWriter struct {
	ws     *websocket.Conn
	base64 bool
}

func (m *messageWriter) Write(p []byte) (int, error) {
	if err := m.ws.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil {
		return 0, err
	}
	if m.base64 {
		return len(p), m.ws.WriteMessage(websocket.TextMessage, []byte(base64.StdEncoding.EncodeToString(p)))
	}
	return len(p), m.ws.WriteMessage(websocket.BinaryMessage, p)
}
