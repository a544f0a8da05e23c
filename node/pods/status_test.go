package pods

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
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
