package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
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
	enc := json.NewEncoder(w)
	for ev := range events {
		obj := ev.Object
		if o.table && ev.Type != watch.Error && ev.Type != watch.Bookmark {
			t, err := s.toTable(req.Resource, obj, o)
			if err != nil {
				st := statusOf(err)
				obj, ev.Type = st, watch.Error
			} else {
				obj = t
			}
		}
		if err := enc.Encode(&metav1.WatchEvent{Type: string(ev.Type), Object: runtime.RawExtension{Object: obj}}); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
}
