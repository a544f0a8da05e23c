package pods

import (
	"context"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// recorder posts the kubelet's Events about pods (Pulling, Started,
// BackOff, Unhealthy…) from a goroutine of its own, never blocking a
// sync: when the API is slow or gone, events beyond a small queue are
// dropped. A repeat of the same event within ten minutes updates its
// count instead of creating another, as Kubernetes does.
type recorder struct {
	client *rest.RESTClient
	node   string
	log    *slog.Logger
	queue  chan *corev1.Event

	mu     sync.Mutex
	recent map[eventKey]*corev1.Event // bounded: see maxRecent
}

type eventKey struct {
	uid              types.UID
	typ, reason, msg string
}

const (
	eventQueue  = 64
	maxRecent   = 256
	repeatSpan  = 10 * time.Minute
	eventSource = "kubelet"
)

// activity tells the board's activity LED that a container started or is
// being stopped.
func (m *Manager) activity() {
	if f := m.cfg.Activity; f != nil {
		f()
	}
}

func newRecorder(c *rest.RESTClient, node string, log *slog.Logger) *recorder {
	return &recorder{client: c, node: node, log: log, queue: make(chan *corev1.Event, eventQueue), recent: map[eventKey]*corev1.Event{}}
}

func (r *recorder) normal(pod *corev1.Pod, reason, msg string) {
	r.emit(pod, corev1.EventTypeNormal, reason, msg)
}
func (r *recorder) warning(pod *corev1.Pod, reason, msg string) {
	r.emit(pod, corev1.EventTypeWarning, reason, msg)
}

func (r *recorder) emit(pod *corev1.Pod, typ, reason, msg string) {
	now := metav1.NewTime(time.Now())
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: pod.Name + ".", Namespace: pod.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name,
			UID: pod.UID, ResourceVersion: pod.ResourceVersion},
		Reason: reason, Message: msg, Type: typ, Count: 1, FirstTimestamp: now, LastTimestamp: now,
		Source:              corev1.EventSource{Component: eventSource, Host: r.node},
		ReportingController: eventSource, ReportingInstance: r.node,
	}
	select {
	case r.queue <- ev:
	default:
		r.log.Debug("pods: event dropped (queue full)", "reason", reason, "pod", pod.Namespace+"/"+pod.Name)
	}
}

func (r *recorder) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-r.queue:
			r.post(ctx, ev)
		}
	}
}

func (r *recorder) post(ctx context.Context, ev *corev1.Event) {
	key := eventKey{ev.InvolvedObject.UID, ev.Type, ev.Reason, ev.Message}
	r.mu.Lock()
	prev := r.recent[key]
	r.mu.Unlock()
	if prev != nil && ev.LastTimestamp.Sub(prev.LastTimestamp.Time) < repeatSpan {
		upd := prev.DeepCopy()
		upd.Count++
		upd.LastTimestamp = ev.LastTimestamp
		out := &corev1.Event{}
		if err := r.client.Put().Namespace(upd.Namespace).Resource("events").Name(upd.Name).Body(upd).Do(ctx).Into(out); err == nil {
			r.remember(key, out)
			return
		}
		// Gone or changed meanwhile: post it anew.
	}
	out := &corev1.Event{}
	if err := r.client.Post().Namespace(ev.Namespace).Resource("events").Body(ev).Do(ctx).Into(out); err != nil {
		if ctx.Err() == nil {
			r.log.Debug("pods: event not posted", "reason", ev.Reason, "err", err)
		}
		return
	}
	r.remember(key, out)
}

func (r *recorder) remember(key eventKey, ev *corev1.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.recent[key]; !ok && len(r.recent) >= maxRecent {
		for k := range r.recent { // room for it: forget any one
			delete(r.recent, k)
			break
		}
	}
	r.recent[key] = ev
}
