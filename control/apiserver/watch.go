package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/gorilla/websocket"

	"github.com/isle-cluster/isle/control/registry"
)

// serveWatch streams watch events as newline-separated JSON objects
// {"type":…,"object":…}, each object a one-row Table if the client asked
// for tables. It ends when the client leaves, after ?timeoutSeconds, or
// when the store ends the watch (with an ERROR event, e.g. 410 Gone).
func (s *Server) serveWatch(w http.ResponseWriter, r *http.Request, req request) {
	opts, err := listOptions(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Name != "" {
		// A watch of one object is a watch of its name, as in Kubernetes.
		sel := "metadata.name=" + req.Name
		if opts.FieldSelector != "" {
			sel = opts.FieldSelector + "," + sel
		}
		opts.FieldSelector = sel
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if opts.TimeoutSeconds != nil && *opts.TimeoutSeconds > 0 {
		ctx, cancel = context.WithTimeout(ctx, time.Duration(*opts.TimeoutSeconds)*time.Second)
		defer cancel()
	}
	events, err := s.store.Watch(ctx, req.Resource, req.Namespace, opts)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	o := negotiate(r)
	if websocket.IsWebSocketUpgrade(r) {
		s.serveWatchWebSocket(w, r, req, o, events, cancel)
		return
	}
	ct := "application/json"
	if o.table {
		ct = "application/json;as=Table;v=" + orDefault(o.tableVersion, "v1") + ";g=meta.k8s.io"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "no-cache, private")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	s.metrics.watches.Inc()
	defer s.metrics.watches.Dec()
	for ev := range events {
		b, err := s.encodeEvent(req, o, ev)
		if err != nil {
			return
		}
		if _, err := w.Write(b); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
}

// encodeEvent is the JSON of a watch event, a line of its own. The object
// of a change is encoded once for every watch that sends it as it is (not
// as a Table): each watch of a kind receives the same decoded object for
// one change (registry's shared decoding), and a hundred boards watch the
// Services and EndpointSlices.
func (s *Server) encodeEvent(req request, o output, ev registry.WatchEvent) ([]byte, error) {
	if o.table || ev.Type != watch.Added && ev.Type != watch.Modified && ev.Type != watch.Deleted {
		b, err := json.Marshal(s.watchEvent(req, o, ev))
		return append(b, '\n'), err
	}
	obj, err := s.encoded.get(ev.Object)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(obj)+32)
	b = append(b, `{"type":"`...)
	b = append(b, ev.Type...)
	b = append(b, `","object":`...)
	b = append(b, obj...)
	return append(b, "}\n"...), nil
}

// encodedObjectsKept is how many encoded objects encodedObjects keeps: the
// changes of the last moments, while every watch of their kind sends them
// (a Node's JSON is several KiB: 256 held 3 MB at 100 boards).
const encodedObjectsKept = 128

// encodedObjects keeps the JSON of the last objects watches sent, by the
// object (a key that keeps it alive, so its address is not reused while
// kept). The objects are never changed once sent (registry's rule for
// what watches receive).
type encodedObjects struct {
	mu   sync.Mutex
	m    map[runtime.Object][]byte
	ring [encodedObjectsKept]runtime.Object
	next int
}

func (c *encodedObjects) get(obj runtime.Object) ([]byte, error) {
	c.mu.Lock()
	b, ok := c.m[obj]
	c.mu.Unlock()
	if ok {
		return b, nil
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[runtime.Object][]byte{}
	}
	if _, ok := c.m[obj]; !ok {
		if old := c.ring[c.next]; old != nil {
			delete(c.m, old)
		}
		c.ring[c.next] = obj
		c.next = (c.next + 1) % encodedObjectsKept
		c.m[obj] = b
	}
	return b, nil
}

// watchEvent is ev as the client receives it: its object as a one-row
// Table if the client asked for tables.
func (s *Server) watchEvent(req request, o output, ev registry.WatchEvent) *metav1.WatchEvent {
	obj := ev.Object
	if o.table && ev.Type != watch.Error && ev.Type != watch.Bookmark {
		t, err := s.toTable(req.Resource, obj, o)
		if err != nil {
			obj, ev.Type = statusOf(err), watch.Error
		} else {
			obj = t
		}
	}
	return &metav1.WatchEvent{Type: string(ev.Type), Object: runtime.RawExtension{Object: obj}}
}

// wsUpgrader accepts a watch's WebSocket from any origin, as
// kube-apiserver does: requests are authenticated by certificate or
// token, never by a cookie a page of another origin could send.
var wsUpgrader = websocket.Upgrader{
	CheckOrigin:     func(*http.Request) bool { return true },
	ReadBufferSize:  512,
	WriteBufferSize: 4096,
}

// wsWriteWait bounds the sending of one watch event on a WebSocket.
const wsWriteWait = 30 * time.Second

// serveWatchWebSocket streams the watch's events on a WebSocket, one text
// message of JSON each, as kube-apiserver does for a watch asked with an
// Upgrade: websocket (browsers, which hold at most six HTTP/1.1
// connections to a server, follow many kinds this way). The watch ends
// when the client closes the socket.
func (s *Server) serveWatchWebSocket(w http.ResponseWriter, r *http.Request, req request, o output, events <-chan registry.WatchEvent, cancel context.CancelFunc) {
	conn, err := wsUpgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered the client
	}
	defer conn.Close()
	// Reading handles the client's pings and close; any error ends the watch.
	conn.SetReadLimit(4096)
	go func() {
		defer cancel()
		for {
			if _, _, err := conn.NextReader(); err != nil {
				return
			}
		}
	}()
	s.metrics.watches.Inc()
	defer s.metrics.watches.Dec()
	for ev := range events {
		b, err := s.encodeEvent(req, o, ev)
		if err != nil {
			return
		}
		_ = conn.SetWriteDeadline(time.Now().Add(wsWriteWait))
		if err := conn.WriteMessage(websocket.TextMessage, b); err != nil {
			return
		}
	}
	_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
}
