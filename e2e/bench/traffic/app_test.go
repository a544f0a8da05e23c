package main

import (
	"errors"
	"io"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// helloPod is a pod of the app on node, Ready or not.
func helloPod(name, node, ip string, ready bool) corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

func TestReadyPod(t *testing.T) {
	deleting := helloPod("old", "pi3", "10.42.3.4", true)
	deleting.DeletionTimestamp = &metav1.Time{}
	failed := helloPod("hello-a", "pi3", "", false)
	failed.Status.Phase = corev1.PodFailed
	for _, c := range []struct {
		name        string
		items       []corev1.Pod
		wantIP      string
		wantWaiting string
		wantErr     string
	}{
		{name: "ready", items: []corev1.Pod{helloPod("hello-a", "pi3", "10.42.3.5", true)}, wantIP: "10.42.3.5"},
		{name: "a deleted one left out", items: []corev1.Pod{deleting, helloPod("hello-a", "pi3", "10.42.3.5", true)}, wantIP: "10.42.3.5"},
		{name: "none yet", wantWaiting: "one pod of app=hello, not 0"},
		{name: "two", items: []corev1.Pod{helloPod("a", "pi3", "", false), helloPod("b", "pi3", "", false)}, wantWaiting: "not 2"},
		{name: "not placed", items: []corev1.Pod{helloPod("hello-a", "", "", false)}, wantWaiting: "to be placed"},
		{name: "not ready", items: []corev1.Pod{helloPod("hello-a", "pi3", "10.42.3.5", false)}, wantWaiting: "to be Ready (Running)"},
		{name: "on the wrong board", items: []corev1.Pod{helloPod("hello-a", "pi2", "10.42.2.5", true)}, wantErr: "runs on pi2, want pi3"},
		{name: "ended", items: []corev1.Pod{failed}, wantErr: "ended (Failed)"},
		{name: "no pod IP", items: []corev1.Pod{helloPod("hello-a", "pi3", "", true)}, wantErr: `status.podIP ""`},
		{name: "IPv6 pod IP", items: []corev1.Pod{helloPod("hello-a", "pi3", "fd00::5", true)}, wantErr: "want an IPv4 address"},
	} {
		t.Run(c.name, func(t *testing.T) {
			name, ip, waiting, err := readyPod(c.items, "pi3")
			switch {
			case c.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want one with %q", err, c.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case c.wantWaiting != "":
				if !strings.Contains(waiting, c.wantWaiting) || ip.IsValid() {
					t.Fatalf("waiting %q with IP %v, want %q and no IP", waiting, ip, c.wantWaiting)
				}
			default:
				if waiting != "" || name != "hello-a" || ip.String() != c.wantIP {
					t.Fatalf("got %s %v, waiting %q; want hello-a %s", name, ip, waiting, c.wantIP)
				}
			}
		})
	}
}

func TestReadyEndpoint(t *testing.T) {
	yes, no := true, false
	slice := func(addr string, ready *bool) discoveryv1.EndpointSlice {
		return discoveryv1.EndpointSlice{Endpoints: []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}}}
	}
	ip := netip.MustParseAddr("10.42.3.5")
	for _, c := range []struct {
		name   string
		slices []discoveryv1.EndpointSlice
		want   bool
	}{
		{"ready", []discoveryv1.EndpointSlice{slice("10.42.3.9", &yes), slice("10.42.3.5", &yes)}, true},
		{"not ready", []discoveryv1.EndpointSlice{slice("10.42.3.5", &no)}, false},
		{"readiness unknown", []discoveryv1.EndpointSlice{slice("10.42.3.5", nil)}, false},
		{"another address", []discoveryv1.EndpointSlice{slice("10.42.3.6", &yes)}, false},
		{"no slice", nil, false},
	} {
		if got := readyEndpoint(c.slices, ip); got != c.want {
			t.Errorf("%s: readyEndpoint = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestPaths(t *testing.T) {
	a := app{clientNS: "/run/netns/isle-pi2", podName: "hello-7d-x", podIP: netip.MustParseAddr("10.42.3.5"),
		clusterIP: netip.MustParseAddr("10.43.0.57"), ingressAddr: netip.MustParseAddr("10.77.0.12")}
	want := []string{"direct http://10.42.3.5:8080/hello", "ClusterIP http://10.43.0.57/hello", "Ingress http://10.77.0.12/hello"}
	ps := a.paths()
	if len(ps) != len(want) {
		t.Fatalf("%d paths, want %d", len(ps), len(want))
	}
	for i, p := range ps {
		if got := p.name + " " + p.url; got != want[i] || p.ns != a.clientNS || p.body != "hello from hello-7d-x\n" {
			t.Errorf("path %d: %s in %s expecting %q; want %s in %s", i, got, p.ns, p.body, want[i], a.clientNS)
		}
	}
}

func TestCheckAnswer(t *testing.T) {
	const want = "hello from a\n"
	if err := checkAnswer(200, []byte(want), nil, want); err != nil {
		t.Errorf("the right answer: %v", err)
	}
	for _, c := range []struct {
		status int
		body   string
		err    error
	}{
		{503, want, nil},
		{200, "hello from b\n", nil},
		{200, "", nil},
	} {
		if err := checkAnswer(c.status, []byte(c.body), c.err, want); !errors.Is(err, errWrongAnswer) {
			t.Errorf("%d %q: %v, want errWrongAnswer", c.status, c.body, err)
		}
	}
	if err := checkAnswer(200, []byte(want), io.ErrUnexpectedEOF, want); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a body cut short: %v", err)
	}
}
