package events

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/isle-cluster/isle/control/registry"
)

// Config configures a Broadcaster. Zero values take the defaults.
type Config struct {
	// Store is where Events are written. Required.
	Store *registry.Store
	// Logger reports Events that could not be written. Default slog.Default().
	Logger *slog.Logger
	// Writers write the Events of different objects at once; all Events of
	// one object go through the same writer, in order. Default 4.
	Writers int
	// QueueSize bounds the Events waiting for each writer; an Event that
	// finds its writer's queue full is dropped. Default 1000 (client-go's
	// maxQueuedEvents).
	QueueSize int
	// CacheSize bounds the Broadcaster's memory of the Events it has seen,
	// for de-duplication and aggregation: each writer remembers its share.
	// Default 4096 (client-go's maxLruCacheEntries, which bounds a process's).
	CacheSize int
	// TTL is how long an Event lives after its last update. Default one
	// hour (Kubernetes' --event-ttl).
	TTL time.Duration
	// SweepInterval is how often expired Events are looked for. Default one
	// minute.
	SweepInterval time.Duration
	// Now is the clock of Event timestamps and expiry. Default time.Now.
	Now func() time.Time
	// OnEvent, if set, is called at every Event recorded (the leader's
	// activity LED flashes); it must not block.
	OnEvent func()
}

func (c *Config) validate() error {
	if c.Store == nil {
		return errors.New("events: Config.Store is required")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Writers <= 0 {
		c.Writers = 4
	}
	if c.QueueSize <= 0 {
		c.QueueSize = 1000
	}
	if c.CacheSize <= 0 {
		c.CacheSize = 4096
	}
	if c.TTL <= 0 {
		c.TTL = time.Hour
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = time.Minute
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Broadcaster writes the Events its Recorders report and deletes expired
// ones. It is a controller: Run it on the leader.
type Broadcaster struct {
	cfg    Config
	events *registry.Resource
	queues []chan *corev1.Event
	// lastName is the time, in Unix nanoseconds, last used to name an
	// Event: names stay unique even when the clock stands still.
	lastName atomic.Int64
}

// NewBroadcaster returns a Broadcaster; it panics on an invalid Config
// (a missing Store is a programming error).
func NewBroadcaster(cfg Config) *Broadcaster {
	if err := cfg.validate(); err != nil {
		panic(err)
	}
	r, ok := cfg.Store.Resources().Lookup(corev1.SchemeGroupVersion.WithResource("events"))
	if !ok {
		panic("events: core/v1 events are not served")
	}
	b := &Broadcaster{cfg: cfg, events: r, queues: make([]chan *corev1.Event, cfg.Writers)}
	for i := range b.queues {
		b.queues[i] = make(chan *corev1.Event, cfg.QueueSize)
	}
	return b
}

// Name is the Broadcaster's name in the controllers' table.
func (b *Broadcaster) Name() string { return "events" }

// Run writes queued Events and deletes expired ones until ctx ends.
func (b *Broadcaster) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, q := range b.queues {
		w := newWriter(b, q)
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run(ctx)
		}()
	}
	b.expire(ctx)
	wg.Wait()
}

// Recorder returns a Recorder whose Events name component as their source
// and reporting controller.
func (b *Broadcaster) Recorder(component string) *Recorder {
	return &Recorder{b: b, component: component}
}

// Recorder records Events for one component. A nil Recorder records
// nothing, so a controller built without one still works.
type Recorder struct {
	b         *Broadcaster
	component string
}

// Eventf records an Event about obj (an API object, or a
// *corev1.ObjectReference): eventType is corev1.EventTypeNormal or
// corev1.EventTypeWarning, reason a short UpperCamelCase word, and the
// message is messageFmt formatted with args. It never blocks: the Event is
// written later, or dropped if too many are waiting.
func (r *Recorder) Eventf(obj runtime.Object, eventType, reason, messageFmt string, args ...any) {
	if r == nil {
		return
	}
	ref, err := reference(obj)
	if err != nil {
		r.b.cfg.Logger.Warn("events: cannot refer to the object; event dropped", "reason", reason, "err", err)
		return
	}
	ev := r.b.newEvent(ref, r.component, eventType, reason, fmt.Sprintf(messageFmt, args...))
	if f := r.b.cfg.OnEvent; f != nil {
		f()
	}
	select {
	case r.b.queues[r.b.writerFor(ref)] <- ev:
	default:
		eventsDropped.Inc()
		r.b.cfg.Logger.Debug("events: queue full; event dropped", "object", ref.Kind+" "+ref.Namespace+"/"+ref.Name, "reason", reason)
	}
}

// newEvent builds an Event as client-go's recorder does: named
// <object>.<nanoseconds in hex>, in the object's namespace or "default".
func (b *Broadcaster) newEvent(ref corev1.ObjectReference, component, eventType, reason, message string) *corev1.Event {
	now := b.cfg.Now()
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	t := metav1.NewTime(now)
	return &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: b.eventName(ref.Name, now), Namespace: ns},
		InvolvedObject:      ref,
		Reason:              reason,
		Message:             message,
		Source:              corev1.EventSource{Component: component},
		FirstTimestamp:      t,
		LastTimestamp:       t,
		Count:               1,
		Type:                eventType,
		ReportingController: component,
	}
}

// eventName is "<object name>.<nanoseconds in hex>", the nanoseconds moved
// on past the last name's if the clock has not.
func (b *Broadcaster) eventName(object string, now time.Time) string {
	n := now.UnixNano()
	for {
		last := b.lastName.Load()
		if n <= last {
			n = last + 1
		}
		if b.lastName.CompareAndSwap(last, n) {
			return fmt.Sprintf("%v.%x", object, n)
		}
	}
}

// writerFor picks the writer of an object's Events.
func (b *Broadcaster) writerFor(ref corev1.ObjectReference) int {
	h := fnv.New32a()
	if ref.UID != "" {
		h.Write([]byte(ref.UID))
	} else {
		h.Write([]byte(ref.Kind + "/" + ref.Namespace + "/" + ref.Name))
	}
	return int(h.Sum32() % uint32(len(b.queues)))
}

// reference refers to obj as client-go's reference.GetReference does.
func reference(obj runtime.Object) (corev1.ObjectReference, error) {
	if obj == nil {
		return corev1.ObjectReference{}, errors.New("no object")
	}
	if ref, ok := obj.(*corev1.ObjectReference); ok {
		return *ref, nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return corev1.ObjectReference{}, err
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Kind == "" {
		// Objects read through the registry carry no kind: the Go type says it.
		gvks, _, err := registry.Scheme.ObjectKinds(obj)
		if err != nil {
			return corev1.ObjectReference{}, err
		}
		gvk = gvks[0]
	}
	return corev1.ObjectReference{
		Kind:            gvk.Kind,
		APIVersion:      gvk.GroupVersion().String(),
		Name:            m.GetName(),
		Namespace:       m.GetNamespace(),
		UID:             m.GetUID(),
		ResourceVersion: m.GetResourceVersion(),
	}, nil
}
