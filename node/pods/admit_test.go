package pods

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

func TestHostPortAdmission(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := func(name string, created time.Time, started bool, phase corev1.PodPhase, ports ...corev1.ContainerPort) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name), CreationTimestamp: metav1.NewTime(created)},
			Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Ports: ports}}},
			Status: corev1.PodStatus{Phase: phase}}
		if started {
			st := metav1.NewTime(created)
			p.Status.StartTime = &st
		}
		return p
	}
	tcp := func(port int32, ip string) corev1.ContainerPort {
		return corev1.ContainerPort{ContainerPort: 80, HostPort: port, HostIP: ip}
	}
	udp := corev1.ContainerPort{ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolUDP}
	m := &Manager{pods: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})}
	for _, p := range []*corev1.Pod{
		pod("running", t0, true, corev1.PodRunning, tcp(8080, "")),
		pod("done", t0, true, corev1.PodSucceeded, tcp(9090, "")),
		pod("on-one-ip", t0, true, corev1.PodRunning, tcp(7070, "10.0.0.1")),
		pod("queued", t0.Add(time.Minute), false, corev1.PodPending, tcp(6060, "")),
	} {
		if err := m.pods.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	later := t0.Add(time.Hour)
	for _, c := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"the port of a running pod", pod("new", later, false, corev1.PodPending, tcp(8080, "")), true},
		{"the port on one of its addresses", pod("new", later, false, corev1.PodPending, tcp(8080, "10.0.0.2")), true},
		{"another protocol", pod("new", later, false, corev1.PodPending, udp), false},
		{"the port of a finished pod", pod("new", later, false, corev1.PodPending, tcp(9090, "")), false},
		{"another address of a pod bound to one", pod("new", later, false, corev1.PodPending, tcp(7070, "10.0.0.2")), false},
		{"the same address", pod("new", later, false, corev1.PodPending, tcp(7070, "10.0.0.1")), true},
		{"a port an older pod waits for", pod("new", later, false, corev1.PodPending, tcp(6060, "")), true},
		{"a port a newer pod waits for", pod("old", t0, false, corev1.PodPending, tcp(6060, "")), false},
		{"no host port", pod("new", later, false, corev1.PodPending, corev1.ContainerPort{ContainerPort: 8080}), false},
		{"itself", pod("running", t0, true, corev1.PodRunning, tcp(8080, "")), false},
	} {
		if got := m.hostPortTaken(c.pod); got != c.want {
			t.Errorf("%s: taken %v, want %v", c.name, got, c.want)
		}
	}
}
