// Package ctltest runs controllers on an in-process store for the
// controllers' own tests, which cannot run the table (it imports them).
package ctltest

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/isle-cluster/isle/control/controllers/gc"
	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/events"
	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/control/scheduler"
	"github.com/isle-cluster/isle/raft/rafttest"
)

// Wait is how long the controllers have to stop once their test ends.
const Wait = 20 * time.Second

// Env is a registry on a one-member in-process store, with the namespace
// "default" created, and an Event broadcaster on it.
type Env struct {
	Store  *registry.Store
	Log    *slog.Logger
	Events *events.Broadcaster
}

// New starts an Env; now, if set, is the registry's clock (creation and
// condition timestamps).
func New(t *testing.T, now func() time.Time) *Env {
	t.Helper()
	c := rafttest.NewCluster(t, rafttest.Options{Size: 1})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := registry.New(registry.Config{Node: c.Node(c.IDs()[0]), Logger: log, Now: now})
	nsRes := kit.MustLookup(s, corev1.SchemeGroupVersion.WithResource("namespaces"))
	if _, err := s.Create(t.Context(), nsRes, "", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return &Env{Store: s, Log: log, Events: events.NewBroadcaster(events.Config{Store: s, Logger: log})}
}

// Run runs ctls until the test ends, beside what the table runs around
// any controller: the Event broadcaster, the garbage collector and the
// scheduler. The test fails if they do not stop within Wait of its end.
func (e *Env) Run(t *testing.T, ctls ...kit.Controller) {
	t.Helper()
	all := append([]kit.Controller{e.Events, gc.New(e.Store, e.Log),
		scheduler.New(scheduler.Config{Store: e.Store, Events: e.Events.Recorder(scheduler.Name), Logger: e.Log})}, ctls...)
	Start(t, func(ctx context.Context) {
		var wg sync.WaitGroup
		for _, c := range all {
			wg.Go(func() { c.Run(ctx) })
		}
		wg.Wait()
	})
}

// Start runs run until the test ends; the test fails if run does not
// return within Wait of the end of its context.
func Start(t *testing.T, run func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(Wait):
			t.Errorf("controllers did not stop within %v of their context's end", Wait)
		}
	})
}

// SetReady sets a pod's Ready condition, turned so at since.
func SetReady(p *corev1.Pod, ready bool, since time.Time) {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status.Conditions = slices.DeleteFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodReady })
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: st, LastTransitionTime: metav1.NewTime(since)})
}
