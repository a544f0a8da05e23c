package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Errors that Pods.Container returns, wrapped, for the handler to answer
// with the kubelet's status codes.
var (
	// ErrNotFound: no such pod or container on this node (404).
	ErrNotFound = errors.New("not found")
	// ErrNoPrevious: the container has no previous terminated instance
	// whose log could be shown (400).
	ErrNoPrevious = errors.New("no previous terminated container")
)

// ContainerRef is what the handler needs to know of one container.
type ContainerRef struct {
	// ID is the runtime's container ID, for Exec and Attach.
	ID string
	// TTY, Stdin and StdinOnce are the container's spec fields. Attach
	// uses a terminal only if the container has one, and stdin only if it
	// was created with stdin; StdinOnce is for the runtime to honour.
	TTY, Stdin, StdinOnce bool
	// LogPath is the log file of the current instance ("" before its first
	// start); PreviousLogPath that of the instance before ("" if none).
	LogPath, PreviousLogPath string
	// Running reports whether the current instance runs. For following
	// logs it must turn false only once the instance's log writer is
	// closed. nil: not running.
	Running func() bool
}

func (c ContainerRef) running() bool { return c.Running != nil && c.Running() }

// Pods finds the containers of the pods on this node (the pod manager).
type Pods interface {
	// Container returns the container of the pod; an error wrapping
	// ErrNotFound if there is none (or ErrNoPrevious, see there).
	Container(namespace, pod, container string) (ContainerRef, error)
	// Dialer returns a dial function whose connections start inside the
	// pod's network namespace (the board's own for a pod on the host's
	// network), for port forwarding; an error wrapping ErrNotFound if the
	// pod is not on this node.
	Dialer(namespace, pod string) (DialFunc, error)
}

// TerminalSize is the size of the client's terminal, in characters.
type TerminalSize struct{ Width, Height uint16 }

// Streams are the client's streams of one exec or attach session. A nil
// reader or writer is a stream the client did not ask for.
type Streams struct {
	// Stdin ends (io.EOF) when the client closes its stdin (v5) or goes.
	// Until what the client sent is read, its later messages (terminal
	// sizes and heartbeats too) wait: read it to its end.
	Stdin io.Reader
	// Stdout and Stderr fail once the client is gone. With TTY, Stderr is
	// nil: a terminal has one output.
	Stdout, Stderr io.Writer
	TTY            bool
	// Resize gives the terminal's sizes (with TTY; nil without), the
	// latest only if they come faster than they are read. It is closed at
	// the end of the session.
	Resize <-chan TerminalSize
}

// Runtime runs the sessions in containers (containerd).
type Runtime interface {
	// Exec runs cmd in the container with the streams, returning after
	// the process has exited and all its output has been written, with its
	// exit code. ctx ends when the client's connection closes.
	Exec(ctx context.Context, containerID string, cmd []string, s Streams) (exitCode int, err error)
	// Attach joins the streams to the container's main process until it
	// exits or ctx ends (the client's connection closed).
	Attach(ctx context.Context, containerID string, s Streams) error
}

type handler struct {
	pods Pods
	rt   Runtime
	log  *slog.Logger
	now  func() time.Time
	mux  *http.ServeMux
	// setupGrace: clientSetupGrace, but in tests.
	setupGrace time.Duration
}

// NewHandler returns the streaming server's handler (see the package
// documentation for its routes). log nil: slog.Default().
func NewHandler(pods Pods, rt Runtime, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	h := &handler{pods: pods, rt: rt, log: log, now: time.Now, mux: http.NewServeMux(), setupGrace: clientSetupGrace}
	h.mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", h.containerLogs)
	h.mux.HandleFunc("GET /exec/{namespace}/{pod}/{container}", h.exec)
	h.mux.HandleFunc("GET /attach/{namespace}/{pod}/{container}", h.attach)
	h.mux.HandleFunc("GET /portForward/{namespace}/{pod}", h.portForward)
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mux.ServeHTTP(w, r)
}

// target names the container a request is for.
type target struct{ namespace, pod, container string }

func targetOf(r *http.Request) target {
	return target{r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")}
}

func (t target) String() string {
	return fmt.Sprintf("container %q in pod %s/%s", t.container, t.namespace, t.pod)
}

// lookup finds the request's container, or answers the request with the
// error and returns false.
func (h *handler) lookup(w http.ResponseWriter, t target) (ContainerRef, bool) {
	ref, err := h.pods.Container(t.namespace, t.pod, t.container)
	switch {
	case err == nil:
		return ref, true
	case errors.Is(err, ErrNotFound):
		http.Error(w, err.Error(), http.StatusNotFound)
	case errors.Is(err, ErrNoPrevious):
		http.Error(w, err.Error(), http.StatusBadRequest)
	default:
		h.log.Error("stream: look up container", "target", t.String(), "err", err)
		http.Error(w, fmt.Sprintf("looking up %s: %v", t, err), http.StatusInternalServerError)
	}
	return ref, false
}

// queryError is a bad query parameter, answered with 400.
type queryError struct {
	name, value, want string
}

func (e *queryError) Error() string {
	return fmt.Sprintf("query parameter %s=%q: %s", e.name, e.value, e.want)
}

// boolParam reads the first of names present in q ("" and absent: false).
// The kubelet's own names (input, output, error) alias the API's.
func boolParam(q url.Values, names ...string) (bool, error) {
	for _, name := range names {
		if !q.Has(name) {
			continue
		}
		v := q.Get(name)
		if v == "" {
			return false, nil
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, &queryError{name, v, "want true or false"}
		}
		return b, nil
	}
	return false, nil
}

// intParam reads an integer parameter that must be at least least; ok is
// false if it is absent.
func intParam(q url.Values, name string, least int64) (v int64, ok bool, err error) {
	if !q.Has(name) {
		return 0, false, nil
	}
	s := q.Get(name)
	v, err = strconv.ParseInt(s, 10, 64)
	if err != nil || v < least {
		return 0, false, &queryError{name, s, fmt.Sprintf("want an integer >= %d", least)}
	}
	return v, true, nil
}
