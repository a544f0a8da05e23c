package pods

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// A status the API server refuses (403) is written again a second later
// while the pod is the board's, and dropped once it is not: the API server
// forbids a board the status of a pod it no longer holds, and retrying
// that for ever flooded the server.
func TestStatusWriterDropsWritesOfPodsGone(t *testing.T) {
	var patches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		patches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`))
	}))
	defer srv.Close()
	client, err := rest.RESTClientFor(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{
		GroupVersion: &schema.GroupVersion{Version: "v1"}, NegotiatedSerializer: scheme.Codecs.WithoutConversion()}, APIPath: "/api"})
	if err != nil {
		t.Fatal(err)
	}
	w := newStatusWriter(client, slog.New(slog.DiscardHandler))
	var bound atomic.Bool
	bound.Store(true)
	w.bound = func(types.UID) bool { return bound.Load() }
	go w.run(t.Context())
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1"}}
	w.set(pod, corev1.PodStatus{Phase: corev1.PodRunning})

	deadline := time.Now().Add(10 * time.Second)
	for patches.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := patches.Load(); n < 2 {
		t.Fatalf("%d writes: a refused status of a pod still held is not written again", n)
	}
	bound.Store(false)
	pending := func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		_, ok := w.pending["u1"]
		return ok
	}
	for pending() && time.Now().Before(deadline) { // the next attempt drops it
		time.Sleep(50 * time.Millisecond)
	}
	if pending() {
		t.Fatal("the status of a pod the board no longer holds is still pending")
	}
	n := patches.Load()
	time.Sleep(2500 * time.Millisecond)
	if m := patches.Load(); m != n {
		t.Errorf("%d writes after it was dropped", m-n)
	}
}

// levels is an slog handler counting its records by level.
type levels struct {
	mu sync.Mutex
	n  map[slog.Level]int
}

func (l *levels) Enabled(context.Context, slog.Level) bool { return true }
func (l *levels) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n[r.Level]++
	return nil
}
func (l *levels) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *levels) WithGroup(string) slog.Handler      { return l }

func (l *levels) count(level slog.Level) int {
	return l.snapshot()[level]
}

func (l *levels) snapshot() map[slog.Level]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.n)
}

// While the API servers are unreachable (Config.Unreachable), the retried
// writes of a status are debug lines: the agent says it once for all.
// Other failures stay warnings.
func TestStatusWriterQuietWhileUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // connections refused
	client, err := rest.RESTClientFor(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{
		GroupVersion: &schema.GroupVersion{Version: "v1"}, NegotiatedSerializer: scheme.Codecs.WithoutConversion()}, APIPath: "/api"})
	if err != nil {
		t.Fatal(err)
	}
	refused := func(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }
	for _, tc := range []struct {
		name        string
		unreachable func(error) bool
		level       slog.Level
	}{
		{"unreachable", refused, slog.LevelDebug},
		{"no Unreachable", nil, slog.LevelWarn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &levels{n: map[slog.Level]int{}}
			w := newStatusWriter(client, slog.New(log))
			w.retryLevel = (&Config{Unreachable: tc.unreachable}).retryLevel
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			go w.run(ctx)
			w.set(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1"}}, corev1.PodStatus{Phase: corev1.PodRunning})
			deadline := time.Now().Add(10 * time.Second)
			for log.count(tc.level) < 2 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			cancel()
			got := log.snapshot()
			if got[tc.level] < 2 {
				t.Fatalf("failed writes logged %v, want two or more at %v", got, tc.level)
			}
			for l := range got {
				if l != tc.level {
					t.Errorf("failed writes logged %v, want %v only", got, tc.level)
				}
			}
		})
	}
}
