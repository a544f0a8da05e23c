package events

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/isle-cluster/isle/control/registry"
)

// expire deletes Events not updated for the TTL, every SweepInterval,
// until ctx ends. Kubernetes gives each Event write an etcd lease of the
// TTL; isle's store has no leases, so the leader sweeps instead.
func (b *Broadcaster) expire(ctx context.Context) {
	t := time.NewTicker(b.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := b.sweep(ctx); err != nil && ctx.Err() == nil {
				b.cfg.Logger.Warn("events: expiry sweep failed; will retry", "err", err)
			}
		}
	}
}

// expiredEvent names an Event to delete, at the revision it was seen.
type expiredEvent struct {
	namespace, name, resourceVersion string
}

// sweep deletes the Events whose last update is older than the TTL.
func (b *Broadcaster) sweep(ctx context.Context) error {
	cutoff := b.cfg.Now().Add(-b.cfg.TTL)
	var expired []expiredEvent
	// The local copy is enough: an Event updated meanwhile fails the
	// deletion's precondition and stays.
	_, err := b.cfg.Store.Scan(ctx, b.events, "", metav1.ListOptions{ResourceVersion: "0"}, func(obj runtime.Object) error {
		ev := obj.(*corev1.Event)
		if lastUpdate(ev).Before(cutoff) {
			expired = append(expired, expiredEvent{ev.Namespace, ev.Name, ev.ResourceVersion})
		}
		return nil
	}, registry.WithoutManagedFields())
	if err != nil {
		return err
	}
	for _, e := range expired {
		rv := e.resourceVersion
		_, _, err := b.cfg.Store.Delete(ctx, b.events, e.namespace, e.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		switch {
		case err == nil:
			eventsWritten.WithLabelValues("expire").Inc()
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		default:
			return err
		}
	}
	return nil
}

// lastUpdate is the latest time an Event records: the core/v1 timestamps,
// or those of the events.k8s.io API (eventTime, series), or its creation.
func lastUpdate(ev *corev1.Event) time.Time {
	last := ev.CreationTimestamp.Time
	for _, t := range []time.Time{ev.FirstTimestamp.Time, ev.LastTimestamp.Time, ev.EventTime.Time} {
		if t.After(last) {
			last = t
		}
	}
	if ev.Series != nil && ev.Series.LastObservedTime.After(last) {
		last = ev.Series.LastObservedTime.Time
	}
	return last
}
