package events

import (
	"context"
	"errors"
	"hash/maphash"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/lru"

	"github.com/isle-cluster/isle/control/registry"
)

// Aggregation of similar Events, as client-go's EventAggregator: from the
// aggregateMax-th different message for the same object, type and reason
// within aggregateWindow on, the messages are combined into one Event.
const (
	aggregateMax    = 10
	aggregateWindow = 10 * time.Minute
	aggregatePrefix = "(combined from similar events): "
	// writeBatch bounds the queued Events a writer correlates before it
	// writes them.
	writeBatch = 100
)

// writer correlates and writes the Events of its queue, one at a time: all
// its state is its own.
//
// Its caches are keyed by the 64-bit hashes of their keys, and the
// aggregation remembers the hashes of the messages: an entry is then a few
// dozen bytes besides the Event it counts, where the keys (source,
// object, reason, message) and a map of messages took about 1 KiB for
// every Event of a pod.
type writer struct {
	b     *Broadcaster
	queue <-chan *corev1.Event
	seed  maphash.Seed
	// similar maps an aggregate key's hash to the messages seen with it.
	similar *lru.Cache
	// seen maps an Event key's hash to the Event that stands for it.
	seen *lru.Cache
}

// similarRecord is what the aggregation remembers of one aggregate key:
// the hashes of its latest different messages, aggregateMax at most.
type similarRecord struct {
	messages []uint64
	last     time.Time
}

// seenEvent is what the writer remembers of one stored (or to be stored)
// Event: its name, count and first time, not the Event itself (an Event
// is ~1 KiB in memory, and the caches hold thousands). The Event to write
// next is held only until it is written.
type seenEvent struct {
	name    string
	count   int32
	first   metav1.Time
	last    time.Time
	stored  bool          // created in the store (else the next write creates it)
	pending *corev1.Event // the Event to write, nil once written
}

// newWriter makes one of the Broadcaster's writers, with its share of
// the CacheSize Events the Broadcaster remembers.
func newWriter(b *Broadcaster, queue <-chan *corev1.Event) *writer {
	size := max(1, b.cfg.CacheSize/b.cfg.Writers)
	return &writer{b: b, queue: queue, seed: maphash.MakeSeed(), similar: lru.New(size), seen: lru.New(size)}
}

func (w *writer) run(ctx context.Context) {
	for {
		var first *corev1.Event
		select {
		case <-ctx.Done():
			return
		case first = <-w.queue:
		}
		// Events queued together for the same Event are written once.
		batch := []*seenEvent{w.correlate(first)}
	drain:
		for len(batch) < writeBatch {
			select {
			case ev := <-w.queue:
				s := w.correlate(ev)
				if !containsSeen(batch, s) {
					batch = append(batch, s)
				}
			default:
				break drain
			}
		}
		for _, s := range batch {
			if ctx.Err() != nil {
				return
			}
			w.write(ctx, s)
		}
	}
}

func containsSeen(batch []*seenEvent, s *seenEvent) bool {
	for _, x := range batch {
		if x == s {
			return true
		}
	}
	return false
}

// correlate folds ev into what the writer has seen and returns the Event
// that now stands for it.
func (w *writer) correlate(ev *corev1.Event) *seenEvent {
	now := ev.LastTimestamp.Time
	ev, key := w.aggregate(ev, now)
	if v, ok := w.seen.Get(key); ok {
		s := v.(*seenEvent)
		// Past the TTL the stored Event is gone: start a new one.
		if now.Sub(s.last) < w.b.cfg.TTL {
			// ev, under the name and first time of the Event it repeats.
			s.count++
			ev.Name, ev.Count, ev.FirstTimestamp = s.name, s.count, s.first
			s.last, s.pending = now, ev
			return s
		}
	}
	s := &seenEvent{name: ev.Name, count: ev.Count, first: ev.FirstTimestamp, last: now, pending: ev}
	w.seen.Add(key, s)
	return s
}

// aggregate returns the Event to record for ev and its key: ev itself,
// keyed by everything that identifies it, or, once too many similar
// Events came, a combined Event keyed by what they share.
func (w *writer) aggregate(ev *corev1.Event, now time.Time) (*corev1.Event, uint64) {
	akey := similarKey(ev)
	ahash := maphash.String(w.seed, akey)
	var rec *similarRecord
	if v, ok := w.similar.Get(ahash); ok {
		rec = v.(*similarRecord)
		if now.Sub(rec.last) > aggregateWindow {
			rec = nil
		}
	}
	if rec == nil {
		rec = &similarRecord{}
		w.similar.Add(ahash, rec)
	}
	rec.last = now
	msg := maphash.String(w.seed, ev.Message)
	if !slices.Contains(rec.messages, msg) {
		rec.messages = append(rec.messages, msg)
	}
	if len(rec.messages) < aggregateMax {
		return ev, maphash.String(w.seed, akey+"\x00"+ev.InvolvedObject.FieldPath+"\x00"+ev.Message)
	}
	// Keep the set bounded: one message out for the one that came in.
	if i := slices.IndexFunc(rec.messages, func(m uint64) bool { return m != msg }); i >= 0 {
		rec.messages = slices.Delete(rec.messages, i, i+1)
	}
	combined := w.b.newEvent(ev.InvolvedObject, ev.Source.Component, ev.Type, ev.Reason, aggregatePrefix+ev.Message)
	combined.FirstTimestamp, combined.LastTimestamp = ev.LastTimestamp, ev.LastTimestamp
	return combined, ahash
}

// similarKey is what similar Events share: source, object, type and reason.
func similarKey(ev *corev1.Event) string {
	o := ev.InvolvedObject
	return strings.Join([]string{ev.Source.Component, ev.Source.Host, o.Kind, o.Namespace, o.Name,
		string(o.UID), o.APIVersion, ev.Type, ev.Reason, ev.ReportingController, ev.ReportingInstance}, "\x00")
}

// write stores the Event s stands for: created the first time, its count,
// message and lastTimestamp updated afterwards.
func (w *writer) write(ctx context.Context, s *seenEvent) {
	ev := s.pending
	if ev == nil {
		return
	}
	s.pending = nil
	if s.stored {
		err := w.update(ctx, ev)
		if err == nil {
			eventsWritten.WithLabelValues("update").Inc()
			return
		}
		if !apierrors.IsNotFound(err) {
			w.failed(ev, "update", err)
			return
		}
		// Deleted meanwhile (expired, or by a user): store it again.
		s.stored = false
	}
	_, err := w.b.cfg.Store.Create(ctx, w.b.events, ev.Namespace, ev, registry.WriteOptions{})
	if apierrors.IsAlreadyExists(err) {
		// An earlier create that seemed to fail was applied after all.
		err = w.update(ctx, ev)
	}
	if err != nil {
		w.failed(ev, "create", err)
		return
	}
	s.stored = true
	eventsWritten.WithLabelValues("create").Inc()
}

// update sets a stored Event's count, message and lastTimestamp.
func (w *writer) update(ctx context.Context, ev *corev1.Event) error {
	_, err := w.b.cfg.Store.Mutate(ctx, w.b.events, ev.Namespace, ev.Name, "", func(obj runtime.Object) error {
		cur := obj.(*corev1.Event)
		cur.Count = ev.Count
		cur.Message = ev.Message
		cur.LastTimestamp = ev.LastTimestamp
		return nil
	})
	return err
}

func (w *writer) failed(ev *corev1.Event, op string, err error) {
	eventsFailed.Inc()
	log := w.b.cfg.Logger.Warn
	if errors.Is(err, context.Canceled) || rejectedByTerminatingNamespace(err) {
		log = w.b.cfg.Logger.Debug
	}
	log("events: write failed; event lost", "op", op, "namespace", ev.Namespace, "event", ev.Name, "reason", ev.Reason, "err", err)
}

// rejectedByTerminatingNamespace: Events about objects of a namespace being
// deleted are refused, as in Kubernetes; nothing to report.
func rejectedByTerminatingNamespace(err error) bool {
	return apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) ||
		apierrors.IsForbidden(err) && strings.Contains(err.Error(), "because it is being terminated")
}
