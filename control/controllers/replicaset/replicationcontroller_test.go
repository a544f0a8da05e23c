package replicaset

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/isle-cluster/isle/control/controllers/internal/ctltest"
	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/registry"
)

// TestReplicationController runs the controller on ReplicationControllers:
// the same work as for ReplicaSets, on the v1 kind, its owner references,
// status and Events.
func TestReplicationController(t *testing.T) {
	w := ctltest.NewWorkload(t)
	if _, err := w.Store.Create(w.Ctx, w.Nodes, "", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "pi-1"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceCPU: resource.MustParse("4"),
				corev1.ResourceMemory: resource.MustParse("8Gi")}}}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.StartKubelet()
	w.Run(t, NewReplicationControllers(w.Store, w.Log, w.Events.Recorder("replication-controller")))
	rcs := kit.MustLookup(w.Store, corev1.SchemeGroupVersion.WithResource("replicationcontrollers"))

	// The selector, the labels and the replica count default as upstream's.
	out, err := w.Store.Create(w.Ctx, rcs, "default", &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ReplicationControllerSpec{Template: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}, registry.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rc := out.(*corev1.ReplicationController)
	if rc.Spec.Selector["app"] != "web" || rc.Labels["app"] != "web" || rc.Spec.Replicas == nil || *rc.Spec.Replicas != 1 {
		t.Fatalf("defaults: selector %v, labels %v, replicas %v", rc.Spec.Selector, rc.Labels, rc.Spec.Replicas)
	}
	get := func() *corev1.ReplicationController {
		obj, err := w.Store.Get(w.Ctx, rcs, "default", "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return obj.(*corev1.ReplicationController)
	}
	owned := func() []*corev1.Pod {
		var out []*corev1.Pod
		for _, p := range w.PodList() {
			if ref := metav1.GetControllerOf(p); ref != nil && ref.UID == rc.UID && p.DeletionTimestamp == nil {
				if ref.Kind != "ReplicationController" || ref.APIVersion != "v1" || !strings.HasPrefix(p.Name, "web-") {
					t.Fatalf("pod %s: controller %+v", p.Name, ref)
				}
				out = append(out, p)
			}
		}
		return out
	}
	if _, err := w.Store.Mutate(w.Ctx, rcs, "default", "web", "", func(o runtime.Object) error {
		o.(*corev1.ReplicationController).Spec.Replicas = ctltest.Ptr(int32(3))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	w.Eventually("three ready pods, in the status", func() bool {
		st := get().Status
		return len(owned()) == 3 && st.Replicas == 3 && st.ReadyReplicas == 3 && st.AvailableReplicas == 3 && st.FullyLabeledReplicas == 3 &&
			st.ObservedGeneration == get().Generation
	})
	w.Eventually("a SuccessfulCreate Event about the ReplicationController", func() bool {
		for _, p := range owned() {
			if w.HasEvent("ReplicationController", "web", corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: "+p.Name) {
				return true
			}
		}
		return false
	})

	// A pod relabelled out of the selector is released and replaced; an
	// orphan that matches is adopted, and the surplus deleted.
	victim := owned()[0]
	if _, err := w.Store.Mutate(w.Ctx, w.Pods, "default", victim.Name, "", func(o runtime.Object) error {
		o.(*corev1.Pod).Labels = map[string]string{"app": "debug"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	w.Eventually("the relabelled pod released and replaced", func() bool {
		obj, err := w.Store.Get(w.Ctx, w.Pods, "default", victim.Name, metav1.GetOptions{})
		return err == nil && metav1.GetControllerOf(obj.(*corev1.Pod)) == nil && len(owned()) == 3
	})
	if _, err := w.Store.Mutate(w.Ctx, w.Pods, "default", victim.Name, "", func(o runtime.Object) error {
		o.(*corev1.Pod).Labels = map[string]string{"app": "web"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	w.Eventually("the orphan adopted, and three pods kept", func() bool {
		obj, err := w.Store.Get(w.Ctx, w.Pods, "default", victim.Name, metav1.GetOptions{})
		adopted := err == nil && metav1.GetControllerOf(obj.(*corev1.Pod)) != nil || err != nil
		return adopted && len(owned()) == 3 && get().Status.Replicas == 3
	})

}
