package registry_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/registry"
)

// The field selectors of Events, as Kubernetes indexes them: kubectl
// describe lists an object's Events by involvedObject name, namespace, kind
// and uid.
func TestListEventSelectors(t *testing.T) {
	e := newEnv(t)
	events := e.res(t, "", "v1", "events")
	now := metav1.NewTime(time.Now())
	classic := func(name, ns string, obj corev1.ObjectReference, typ, reason, component string) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, InvolvedObject: obj,
			Type: typ, Reason: reason, Source: corev1.EventSource{Component: component}, ReportingController: component,
			FirstTimestamp: now, LastTimestamp: now, Count: 1}
	}
	pod := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "default", Name: "web", UID: "pod-uid", FieldPath: "spec.containers{app}"}
	oldPod := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "default", Name: "web", UID: "old-uid"}
	rs := corev1.ObjectReference{Kind: "ReplicaSet", APIVersion: "apps/v1", Namespace: "default", Name: "web", UID: "rs-uid"}
	node := corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: "pi-1", UID: "node-uid"}
	for _, ev := range []*corev1.Event{
		classic("web.1", "default", pod, corev1.EventTypeNormal, "Scheduled", "default-scheduler"),
		classic("web.2", "default", pod, corev1.EventTypeWarning, "BackOff", "kubelet"),
		classic("web.3", "default", oldPod, corev1.EventTypeNormal, "Scheduled", "default-scheduler"),
		classic("web.4", "default", rs, corev1.EventTypeNormal, "SuccessfulCreate", "replicaset-controller"),
		classic("pi-1.1", "default", node, corev1.EventTypeNormal, "RegisteredNode", "node-controller"),
		// Written through events.k8s.io: no source, a reporting controller.
		{ObjectMeta: metav1.ObjectMeta{Name: "web.5", Namespace: "default"}, InvolvedObject: pod, Type: corev1.EventTypeNormal,
			Reason: "Pulled", EventTime: metav1.NewMicroTime(now.Time), Action: "Pull",
			ReportingController: "kubelet", ReportingInstance: "pi-1"},
	} {
		e.create(t, events, "default", ev)
	}

	tests := []struct {
		name, ns, selector string
		want               []string
	}{
		{"kubectl describe pod", "default",
			"involvedObject.name=web,involvedObject.namespace=default,involvedObject.kind=Pod,involvedObject.uid=pod-uid",
			[]string{"web.1", "web.2", "web.5"}},
		{"kubectl describe node", "",
			"involvedObject.name=pi-1,involvedObject.namespace=,involvedObject.kind=Node,involvedObject.uid=node-uid",
			[]string{"pi-1.1"}},
		{"apiVersion", "", "involvedObject.apiVersion=apps/v1", []string{"web.4"}},
		{"fieldPath", "", "involvedObject.fieldPath=spec.containers{app}", []string{"web.1", "web.2", "web.5"}},
		{"reason", "", "reason=Scheduled", []string{"web.1", "web.3"}},
		{"type", "", "type=Warning", []string{"web.2"}},
		{"source", "", "source=default-scheduler", []string{"web.1", "web.3"}},
		{"source of an events.k8s.io event", "", "source=kubelet,reason=Pulled", []string{"web.5"}},
		{"reportingComponent", "", "reportingComponent=replicaset-controller", []string{"web.4"}},
		{"not equal", "default", "involvedObject.kind!=Pod", []string{"pi-1.1", "web.4"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			list, err := e.List(e.ctx, events, tc.ns, metav1.ListOptions{FieldSelector: tc.selector})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ev := range list.(*corev1.EventList).Items {
				got = append(got, ev.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	if _, err := e.List(e.ctx, events, "", metav1.ListOptions{FieldSelector: "involvedObject.bogus=x"}); !apierrors.IsBadRequest(err) {
		t.Errorf("unknown field: got %v, want BadRequest", err)
	}
}

// events.k8s.io/v1 Events are the core Events under other names: written
// through either API, read through both, watched through the new one,
// selected by its field names, and checked by its stricter rules.
func TestEventsV1(t *testing.T) {
	e := newEnv(t)
	core, v1 := e.res(t, "", "v1", "events"), e.res(t, "events.k8s.io", "v1", "events")
	at := metav1.NewMicroTime(time.Unix(1505828956, 0))
	w := e.watch(t, v1, "default", metav1.ListOptions{})
	pod := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "default", Name: "web", UID: "pod-uid"}
	ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web.1", Namespace: "default", Labels: map[string]string{"set": "a"}},
		Regarding: pod, EventTime: at, Note: "pulled", Action: "Pull", Reason: "Pulled", Type: corev1.EventTypeNormal,
		ReportingController: "kubelet", ReportingInstance: "pi-1"}
	want := ev.DeepCopy()
	e.create(t, v1, "default", ev)
	w.expect(watch.Added, "web.1")

	asCore := e.get(t, core, "default", "web.1").(*corev1.Event)
	if asCore.Message != "pulled" || asCore.InvolvedObject != pod || asCore.ReportingController != "kubelet" || !asCore.EventTime.Equal(&at) {
		t.Errorf("read as core/v1: %+v", asCore)
	}
	back := e.get(t, v1, "default", "web.1").(*eventsv1.Event)
	back.ResourceVersion, back.ManagedFields, back.UID, back.CreationTimestamp = "", nil, "", metav1.Time{}
	want.TypeMeta = back.TypeMeta
	if !apiequality.Semantic.DeepEqual(back, want) {
		t.Errorf("read back as events.k8s.io/v1:\n%+v\nwant\n%+v", back, want)
	}

	classic := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web.2", Namespace: "default"}, InvolvedObject: pod,
		Reason: "BackOff", Message: "back-off", Type: corev1.EventTypeWarning, Source: corev1.EventSource{Component: "kubelet", Host: "pi-1"},
		FirstTimestamp: metav1.NewTime(at.Time), LastTimestamp: metav1.NewTime(at.Time), Count: 3}
	e.create(t, core, "default", classic)
	w.expect(watch.Added, "web.2")
	got := e.get(t, v1, "default", "web.2").(*eventsv1.Event)
	if got.Note != "back-off" || got.DeprecatedCount != 3 || got.DeprecatedSource.Host != "pi-1" || got.Regarding != pod {
		t.Errorf("a core Event read as events.k8s.io/v1: %+v", got)
	}

	list, err := e.List(e.ctx, v1, "", metav1.ListOptions{FieldSelector: "reportingController=kubelet,regarding.name=web"})
	if err != nil {
		t.Fatal(err)
	}
	if items := list.(*eventsv1.EventList).Items; len(items) != 1 || items[0].Name != "web.1" {
		t.Errorf("reportingController=kubelet: %v", items)
	}

	bad := want.DeepCopy()
	bad.Name, bad.EventTime, bad.Type, bad.DeprecatedCount = "web.3", metav1.MicroTime{}, "Odd", 2
	if _, err := e.Create(e.ctx, v1, "default", bad, registry.WriteOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "eventTime: Required value") || !strings.Contains(err.Error(), "type: Invalid value") ||
		!strings.Contains(err.Error(), "count: Invalid value: \"\": needs to be unset") {
		t.Errorf("an events.k8s.io/v1 Event without eventTime, of type Odd, with a count: %v", err)
	}
}
