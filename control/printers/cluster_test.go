package printers

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNamespaceRows(t *testing.T) {
	tests := []struct {
		name string
		ns   *corev1.Namespace
		want []interface{}
	}{
		{"active", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", CreationTimestamp: ago(400 * 24 * time.Hour)}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}},
			[]interface{}{"default", "Active", "400d"}},
		{"terminating", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "old", CreationTimestamp: ago(3 * 365 * 24 * time.Hour)}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}},
			[]interface{}{"old", "Terminating", "3y"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkCells(t, gr("", "namespaces"), tt.ns, tt.want)
		})
	}
}

func TestNodeRows(t *testing.T) {
	ready := readyNode()
	cordoned := cordonedNode()

	notReady := readyNode()
	notReady.Labels = map[string]string{"kubernetes.io/role": "worker", "node-role.kubernetes.io/storage": "true", "node-role.kubernetes.io/": ""}
	notReady.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}

	fresh := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "pi-9", CreationTimestamp: ago(20 * time.Second)}}

	tests := []struct {
		name string
		node *corev1.Node
		want []interface{}
	}{
		{"ready control plane", &ready, []interface{}{"pi-1", "Ready", "control-plane", "90d", "v1.32.0",
			"192.168.1.21", "<none>", "Debian GNU/Linux 12 (bookworm)", "6.6.51+rpt-rpi-v8", "isle://0.1.0"}},
		{"unknown and cordoned", &cordoned, []interface{}{"pi-2", "NotReady,SchedulingDisabled", "<none>", "90d", "v1.32.0",
			"192.168.1.22", "203.0.113.7", "Debian GNU/Linux 12 (bookworm)", "6.6.51+rpt-rpi-v8", "isle://0.1.0"}},
		{"not ready, roles from both labels", &notReady, []interface{}{"pi-1", "NotReady", "storage,worker", "90d", "v1.32.0",
			"192.168.1.21", "<none>", "Debian GNU/Linux 12 (bookworm)", "6.6.51+rpt-rpi-v8", "isle://0.1.0"}},
		{"just registered", &fresh, []interface{}{"pi-9", "Unknown", "<none>", "20s", "",
			"<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkCells(t, gr("", "nodes"), tt.node, tt.want)
		})
	}
}

func TestEventRows(t *testing.T) {
	classic := classicEvent()
	newAPI := newAPIEvent()

	series := newAPIEvent()
	series.Name = "series"
	series.Series = &corev1.EventSeries{Count: 7, LastObservedTime: metav1.NewMicroTime(now.Add(-30 * time.Second))}
	series.ReportingInstance = "isle-scheduler-pi-1"

	nodeEvent := corev1.Event{
		ObjectMeta:     meta("pi-1.17c8", 3*time.Hour),
		InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "pi-1"},
		Reason:         "NodeReady",
		Message:        "Node pi-1 status is now: NodeReady",
		Source:         corev1.EventSource{Component: "kubelet"},
		FirstTimestamp: ago(3 * time.Hour),
		Type:           corev1.EventTypeNormal,
		Count:          1,
	}

	tests := []struct {
		name string
		ev   *corev1.Event
		want []interface{}
	}{
		{"kubelet warning with count", &classic, []interface{}{"2m", "Warning", "BackOff", "pod/api-6b8f9d7c4-kq2lm", "spec.containers{api}", "kubelet, pi-2",
			"Back-off restarting failed container api in pod api-6b8f9d7c4-kq2lm_default", "58m", int64(212), "api-6b8f9d7c4-kq2lm.17c8f1b2a3"}},
		{"events.k8s.io singleton", &newAPI, []interface{}{"5m", "Normal", "Scheduled", "pod/web-7d4b9c6f5-x2x9q", "", "default-scheduler",
			"Successfully assigned default/web-7d4b9c6f5-x2x9q to pi-1", "5m", int64(1), "web-7d4b9c6f5-x2x9q.17c8f1b2b4"}},
		{"events.k8s.io series", &series, []interface{}{"30s", "Normal", "Scheduled", "pod/web-7d4b9c6f5-x2x9q", "", "default-scheduler, isle-scheduler-pi-1",
			"Successfully assigned default/web-7d4b9c6f5-x2x9q to pi-1", "5m", int64(7), "series"}},
		{"no last timestamp", &nodeEvent, []interface{}{"3h", "Normal", "NodeReady", "node/pi-1", "", "kubelet",
			"Node pi-1 status is now: NodeReady", "3h", int64(1), "pi-1.17c8"}},
		{"no timestamps at all", &corev1.Event{ObjectMeta: meta("bare", time.Second), InvolvedObject: corev1.ObjectReference{Kind: "Namespace"}},
			[]interface{}{"<unknown>", "", "", "namespace", "", "", "", "<unknown>", int64(1), "bare"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkCells(t, gr("", "events"), tt.ev, tt.want)
		})
	}
}

func TestLeaseRows(t *testing.T) {
	held := lease()
	free := coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "isle-controller-manager", Namespace: "kube-system", CreationTimestamp: ago(4 * time.Hour)}}
	tests := []struct {
		name  string
		lease *coordinationv1.Lease
		want  []interface{}
	}{
		{"held", &held, []interface{}{"pi-1", "pi-1", "90d"}},
		{"no holder", &free, []interface{}{"isle-controller-manager", "", "4h"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkCells(t, gr("coordination.k8s.io", "leases"), tt.lease, tt.want)
		})
	}
}
