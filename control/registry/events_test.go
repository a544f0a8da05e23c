package registry_test

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
