package islandbench

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/isle-cluster/isle/node/island"
)

func pod(name string, uid types.UID, phase corev1.PodPhase) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid}, Status: corev1.PodStatus{Phase: phase}}
}

func TestByName(t *testing.T) {
	for _, c := range []struct {
		name         string
		items        []corev1.Pod
		names        []string
		wantOrder    []string
		wantWaiting  string
		wantErrMatch string
	}{
		{name: "all running, in the order named",
			items:     []corev1.Pod{pod("a", "u1", corev1.PodRunning), pod("b", "u2", corev1.PodRunning)},
			names:     []string{"b", "a"},
			wantOrder: []string{"b", "a"}},
		{name: "the first not running is named",
			items:       []corev1.Pod{pod("a", "u1", corev1.PodPending), pod("b", "u2", corev1.PodPending)},
			names:       []string{"a", "b"},
			wantOrder:   []string{"a", "b"},
			wantWaiting: "pod a (Pending)"},
		{name: "missing pod",
			items:        []corev1.Pod{pod("a", "u1", corev1.PodRunning)},
			names:        []string{"a", "b"},
			wantErrMatch: "does not list b"},
		{name: "ended pod",
			items:        []corev1.Pod{pod("a", "u1", corev1.PodFailed)},
			names:        []string{"a"},
			wantErrMatch: "pod a ended (Failed)"},
		{name: "a UID that would escape the namespace directory",
			items:        []corev1.Pod{pod("a", "../x", corev1.PodRunning)},
			names:        []string{"a"},
			wantErrMatch: "is not a UID"},
		{name: "no UID",
			items:        []corev1.Pod{pod("a", "", corev1.PodRunning)},
			names:        []string{"a"},
			wantErrMatch: "is not a UID"},
	} {
		t.Run(c.name, func(t *testing.T) {
			pods, waiting, err := byName(c.items, c.names)
			if c.wantErrMatch != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErrMatch) {
					t.Fatalf("err = %v, want one with %q", err, c.wantErrMatch)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range pods {
				got = append(got, p.Name)
			}
			if strings.Join(got, " ") != strings.Join(c.wantOrder, " ") || waiting != c.wantWaiting {
				t.Errorf("got %v, waiting %q; want %v, waiting %q", got, waiting, c.wantOrder, c.wantWaiting)
			}
		})
	}
}

func TestNamespacePaths(t *testing.T) {
	if got := BoardNS("pi2"); got != "/run/netns/isle-pi2" {
		t.Errorf("BoardNS(pi2) = %s", got)
	}
	st := &island.State{Dir: "/tmp/isl"}
	if got := PodNS(st, "pi3", pod("a", "1234-abcd", corev1.PodRunning)); got != "/tmp/isl/pi3/run/netns/1234-abcd" {
		t.Errorf("PodNS = %s", got)
	}
}
