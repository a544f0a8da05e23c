package nodelifecycle

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/registry"
)

func TestPodIndex(t *testing.T) {
	pod := func(name, node string, ready bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)}, Spec: corev1.PodSpec{NodeName: node}}
		if ready {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		return p
	}
	x := newPodIndex()
	keys := func(nodes []string, keep func(*boundPod) bool) []string {
		var out []string
		for _, p := range x.matching(nodes, keep) {
			out = append(out, p.key()+"@"+p.node)
		}
		return out
	}
	all := func(*boundPod) bool { return true }
	for _, ev := range []registry.WatchEvent{
		{Type: watch.Added, Object: pod("b", "pi1", true)},
		{Type: watch.Added, Object: pod("a", "pi2", false)},
		{Type: watch.Added, Object: pod("pending", "", false)},
		{Type: watch.Bookmark, Object: &corev1.Pod{}}, // a progress bookmark
	} {
		x.apply(ev)
	}
	if x.ready() {
		t.Fatal("synced before the initial events' end")
	}
	x.apply(registry.WatchEvent{Type: watch.Bookmark, Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}})
	if !x.ready() {
		t.Fatal("not synced after the initial events' end")
	}
	if got := keys(nil, all); !slices.Equal(got, []string{"default/a@pi2", "default/b@pi1"}) {
		t.Fatalf("bound pods %v", got)
	}
	x.apply(registry.WatchEvent{Type: watch.Modified, Object: pod("pending", "pi1", true)}) // bound
	terminating := pod("b", "pi1", true)
	terminating.DeletionTimestamp = &metav1.Time{}
	x.apply(registry.WatchEvent{Type: watch.Modified, Object: terminating})
	x.apply(registry.WatchEvent{Type: watch.Deleted, Object: pod("a", "pi2", false)})
	if got := keys([]string{"pi1", "pi2"}, func(p *boundPod) bool { return p.ready && !p.terminating }); !slices.Equal(got, []string{"default/pending@pi1"}) {
		t.Fatalf("ready pods not terminating %v", got)
	}
	if got := keys([]string{"pi2"}, all); got != nil {
		t.Fatalf("pods of pi2 after its only pod was deleted: %v", got)
	}
	x.reset()
	if x.ready() || keys(nil, all) != nil {
		t.Fatal("an index reset kept its pods or stayed synced")
	}
}
