// Package tabletest runs the whole controller table on an in-process store
// for the tests that see controllers work together, from outside their
// packages.
package tabletest

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/isle-cluster/isle/control/controllers"
	"github.com/isle-cluster/isle/control/controllers/internal/ctltest"
	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/raft/rafttest"
)

// Wait is how long any condition in these tests may take.
const Wait = 15 * time.Second

// TestCAPEM stands for the cluster CA's certificate in the controllers'
// tests: the publisher copies it without reading it.
const TestCAPEM = "-----BEGIN CERTIFICATE-----\nTUlJQg==\n-----END CERTIFICATE-----\n"

// Env is a registry on a one-member in-process store.
type Env struct {
	*registry.Store
	Ctx context.Context
	Log *slog.Logger
}

// NewStore starts an Env with no controller.
func NewStore(t *testing.T) *Env {
	t.Helper()
	c := rafttest.NewCluster(t, rafttest.Options{Size: 1})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := registry.New(registry.Config{Node: c.Node(c.IDs()[0]), Logger: log})
	return &Env{Store: s, Ctx: t.Context(), Log: log}
}

// New starts an Env and every controller of the table on it, the root-CA
// publisher with TestCAPEM, configured by opts; the controllers are
// stopped, and must return, when the test ends.
func New(t *testing.T, opts ...controllers.Option) *Env {
	t.Helper()
	e := NewStore(t)
	table := controllers.Table(e.Store, e.Log, append([]controllers.Option{controllers.WithRootCA(func() []byte { return []byte(TestCAPEM) })}, opts...)...)
	ctltest.Start(t, func(ctx context.Context) { controllers.RunAll(ctx, table, e.Log) })
	return e
}

// Res is a served resource.
func (e *Env) Res(t *testing.T, group, version, resource string) *registry.Resource {
	t.Helper()
	r, ok := e.Resources().Lookup(schema.GroupVersionResource{Group: group, Version: version, Resource: resource})
	if !ok {
		t.Fatalf("%s/%s %s not served", group, version, resource)
	}
	return r
}

// MustCreate creates obj.
func (e *Env) MustCreate(t *testing.T, r *registry.Resource, ns string, obj runtime.Object) metav1.Object {
	t.Helper()
	out, err := e.Create(e.Ctx, r, ns, obj, registry.WriteOptions{})
	if err != nil {
		t.Fatalf("create %s: %v", r, err)
	}
	m, _ := meta.Accessor(out)
	return m
}

// Namespace creates namespace name.
func (e *Env) Namespace(t *testing.T, name string) {
	t.Helper()
	e.MustCreate(t, e.Res(t, "", "v1", "namespaces"), "", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// Exists reports whether an object is stored (and returns it).
func (e *Env) Exists(t *testing.T, r *registry.Resource, ns, name string) (metav1.Object, bool) {
	t.Helper()
	obj, err := e.Get(e.Ctx, r, ns, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatalf("get %s %s/%s: %v", r, ns, name, err)
	}
	m, _ := meta.Accessor(obj)
	return m, true
}

// Eventually fails the test unless cond holds within Wait.
func Eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true within %v", what, Wait)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ReadyNode is a Node whose agent reports it Ready.
func ReadyNode(name string) *corev1.Node {
	now := metav1.Now()
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastTransitionTime: now},
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastTransitionTime: now},
	}}}
}
