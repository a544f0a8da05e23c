package controllers_test

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/isle-cluster/isle/control/controllers/internal/tabletest"
)

// The whole table: a Deployment's pods are created, scheduled onto the
// node, and each step leaves the Events kubectl describe shows.
func TestDeploymentEventsAndScheduling(t *testing.T) {
	e := tabletest.New(t)
	e.Namespace(t, "default")
	e.MustCreate(t, e.Res(t, "", "v1", "nodes"), "", &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "pi-1", Labels: map[string]string{corev1.LabelHostname: "pi-1"}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"),
				corev1.ResourcePods: resource.MustParse("110")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		}})
	deploys := e.Res(t, "apps", "v1", "deployments")
	rsRes := e.Res(t, "apps", "v1", "replicasets")
	pods := e.Res(t, "", "v1", "pods")
	events := e.Res(t, "", "v1", "events")

	replicas := int32(3)
	d := e.MustCreate(t, deploys, "default", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: appsv1.DeploymentSpec{
		Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}}}})

	// messages lists the messages of an object's Events with the reason,
	// as kubectl describe finds them.
	messages := func(kind, name, uid, reason string) []string {
		t.Helper()
		list, err := e.List(e.Ctx, events, "default", metav1.ListOptions{FieldSelector: "involvedObject.kind=" + kind +
			",involvedObject.name=" + name + ",involvedObject.namespace=default,involvedObject.uid=" + uid + ",reason=" + reason})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, ev := range list.(*corev1.EventList).Items {
			out = append(out, ev.Message)
		}
		slices.Sort(out)
		return out
	}

	var rs *appsv1.ReplicaSet
	tabletest.Eventually(t, "the Deployment's ReplicaSet exists", func() bool {
		list, err := e.List(e.Ctx, rsRes, "default", metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if items := list.(*appsv1.ReplicaSetList).Items; len(items) == 1 {
			rs = &items[0]
		}
		return rs != nil
	})
	tabletest.Eventually(t, "ScalingReplicaSet from 0 to 3", func() bool {
		return slices.Equal(messages("Deployment", "web", string(d.GetUID()), "ScalingReplicaSet"),
			[]string{"Scaled up replica set " + rs.Name + " from 0 to 3"})
	})

	var podList []corev1.Pod
	tabletest.Eventually(t, "three pods bound to pi-1", func() bool {
		list, err := e.List(e.Ctx, pods, "default", metav1.ListOptions{FieldSelector: "spec.nodeName=pi-1"})
		if err != nil {
			t.Fatal(err)
		}
		podList = list.(*corev1.PodList).Items
		return len(podList) == 3
	})
	var created []string
	for _, p := range podList {
		created = append(created, "Created pod: "+p.Name)
		tabletest.Eventually(t, "pod "+p.Name+" has its Scheduled event", func() bool {
			return slices.Equal(messages("Pod", p.Name, string(p.UID), "Scheduled"), []string{"Successfully assigned default/" + p.Name + " to pi-1"})
		})
	}
	slices.Sort(created)
	tabletest.Eventually(t, "SuccessfulCreate for each pod", func() bool {
		return slices.Equal(messages("ReplicaSet", rs.Name, string(rs.UID), "SuccessfulCreate"), created)
	})

	// Scale down: the Deployment scales its ReplicaSet, which deletes pods.
	if _, err := e.Mutate(e.Ctx, deploys, "default", "web", "", func(obj runtime.Object) error {
		one := int32(1)
		obj.(*appsv1.Deployment).Spec.Replicas = &one
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	tabletest.Eventually(t, "ScalingReplicaSet from 3 to 1", func() bool {
		return slices.Contains(messages("Deployment", "web", string(d.GetUID()), "ScalingReplicaSet"),
			"Scaled down replica set "+rs.Name+" from 3 to 1")
	})
	tabletest.Eventually(t, "two SuccessfulDelete events", func() bool {
		deleted := messages("ReplicaSet", rs.Name, string(rs.UID), "SuccessfulDelete")
		for _, m := range deleted {
			if !strings.HasPrefix(m, "Deleted pod: "+rs.Name+"-") {
				t.Fatalf("SuccessfulDelete %q", m)
			}
		}
		return len(deleted) == 2
	})
}
