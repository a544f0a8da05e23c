package statefulset

import (
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/isle-cluster/isle/control/controllers/internal/ctltest"
	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/registry"
)

type env struct {
	*ctltest.Workload
	t                     *testing.T
	sets, claims, history *registry.Resource
	kubelet               *ctltest.Kubelet
}

func newEnv(t *testing.T) *env {
	w := ctltest.NewWorkload(t)
	e := &env{Workload: w, t: t,
		sets:    kit.MustLookup(w.Store, appsv1.SchemeGroupVersion.WithResource("statefulsets")),
		claims:  kit.MustLookup(w.Store, corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")),
		history: kit.MustLookup(w.Store, appsv1.SchemeGroupVersion.WithResource("controllerrevisions"))}
	if _, err := w.Store.Create(w.Ctx, w.Nodes, "", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "pi-1"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceCPU: resource.MustParse("4"),
				corev1.ResourceMemory: resource.MustParse("8Gi")}}}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Claims of a WaitForFirstConsumer class do not keep pods from being
	// scheduled (no volume controller runs here to bind them).
	sc := kit.MustLookup(w.Store, storagev1.SchemeGroupVersion.WithResource("storageclasses"))
	if _, err := w.Store.Create(w.Ctx, sc, "", &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local"}, Provisioner: "isle.dev/local-path",
		VolumeBindingMode: ctltest.Ptr(storagev1.VolumeBindingWaitForFirstConsumer)}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.kubelet = w.StartKubelet()
	c := New(w.Store, w.Log, w.Events.Recorder("statefulset-controller"))
	c.synced = w.Synced
	w.Run(t, c)
	return e
}

func (e *env) set() *appsv1.StatefulSet {
	e.t.Helper()
	obj, err := e.Store.Get(e.Ctx, e.sets, "default", "web", metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return obj.(*appsv1.StatefulSet)
}

func (e *env) mutate(change func(*appsv1.StatefulSet)) {
	e.t.Helper()
	if _, err := e.Store.Mutate(e.Ctx, e.sets, "default", "web", "", func(o runtime.Object) error {
		change(o.(*appsv1.StatefulSet))
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
}

// pods are the live pods by name.
func (e *env) pods() map[string]*corev1.Pod {
	out := map[string]*corev1.Pod{}
	for _, p := range e.PodList() {
		if p.DeletionTimestamp == nil {
			out[p.Name] = p
		}
	}
	return out
}

func (e *env) names() []string {
	var out []string
	for n := range e.pods() {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// exists reports whether an object is there and not being deleted (a
// claim's protection finalizer keeps it until a volume controller, which
// does not run here, removes it).
func (e *env) exists(res *registry.Resource, name string) (metav1.Object, bool) {
	e.t.Helper()
	obj, err := e.Store.Get(e.Ctx, res, "default", name, metav1.GetOptions{})
	if err != nil {
		return nil, false
	}
	m, _ := obj.(metav1.Object)
	return m, m.GetDeletionTimestamp() == nil
}

func (e *env) revisions() []appsv1.ControllerRevision {
	list, err := e.Store.List(e.Ctx, e.history, "default", metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return list.(*appsv1.ControllerRevisionList).Items
}

func TestStatefulSetOrderedReadyAndRollingUpdate(t *testing.T) {
	e := newEnv(t)
	e.kubelet.SetReady(func(*corev1.Pod) bool { return false })
	three := int32(3)
	app := map[string]string{"app": "web"}
	if _, err := e.Store.Create(e.Ctx, e.sets, "default", &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.StatefulSetSpec{Replicas: &three, ServiceName: "web", Selector: &metav1.LabelSelector{MatchLabels: app},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: app},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}}}},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ctltest.Ptr("local"), AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}},
		}}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}

	// OrderedReady: web-0 alone while it is not ready.
	e.Eventually("web-0 created", func() bool { return len(e.pods()) == 1 })
	p := e.pods()["web-0"]
	if p == nil || p.Spec.Hostname != "web-0" || p.Spec.Subdomain != "web" || p.Labels[podNameLabel] != "web-0" || p.Labels[podIndexLabel] != "0" {
		t.Fatalf("pod %+v", p)
	}
	if i := slices.IndexFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "data" }); i < 0 ||
		p.Spec.Volumes[i].PersistentVolumeClaim == nil || p.Spec.Volumes[i].PersistentVolumeClaim.ClaimName != "data-web-0" {
		t.Fatalf("volumes %+v: want data from claim data-web-0", p.Spec.Volumes)
	}
	if _, ok := e.exists(e.claims, "data-web-0"); !ok {
		t.Fatal("claim data-web-0 not made")
	}
	revs := e.revisions()
	if len(revs) != 1 || revs[0].Revision != 1 || p.Labels[appsv1.ControllerRevisionHashLabelKey] != revs[0].Name ||
		revs[0].Labels[appsv1.ControllerRevisionHashLabelKey] == "" || revs[0].Labels["app"] != "web" {
		t.Fatalf("revisions %+v, pod revision %q", revs, p.Labels[appsv1.ControllerRevisionHashLabelKey])
	}
	first := revs[0].Name
	e.Settle("default/web", e.sets, "web")
	if got := e.names(); !slices.Equal(got, []string{"web-0"}) {
		t.Fatalf("pods %v while web-0 is not ready, want web-0 alone", got)
	}

	// Ready: the others follow, in order.
	e.kubelet.SetReady(nil)
	e.Eventually("three ready replicas", func() bool {
		st := e.set().Status
		return st.Replicas == 3 && st.ReadyReplicas == 3 && st.AvailableReplicas == 3 && st.CurrentReplicas == 3 && st.UpdatedReplicas == 3 &&
			st.CurrentRevision == first && st.UpdateRevision == first && st.ObservedGeneration == e.set().Generation
	})
	for _, n := range []string{"web-1", "web-2"} {
		if !e.HasEvent("StatefulSet", "web", corev1.EventTypeNormal, "SuccessfulCreate", fmt.Sprintf("create Pod %s in StatefulSet web successful", n)) {
			t.Errorf("no SuccessfulCreate Event for %s", n)
		}
	}

	// A partition of 2: only web-2 takes the new template.
	e.mutate(func(s *appsv1.StatefulSet) {
		s.Spec.UpdateStrategy.RollingUpdate.Partition = ctltest.Ptr(int32(2))
		s.Spec.Template.Spec.Containers[0].Image = "busybox:2"
	})
	e.Eventually("web-2 updated, web-0 and web-1 not", func() bool {
		st, pods := e.set().Status, e.pods()
		return len(pods) == 3 && pods["web-2"].Spec.Containers[0].Image == "busybox:2" && pods["web-1"].Spec.Containers[0].Image == "busybox:1" &&
			pods["web-0"].Spec.Containers[0].Image == "busybox:1" && st.UpdatedReplicas == 1 && st.CurrentRevision == first &&
			st.UpdateRevision != first && st.ReadyReplicas == 3
	})
	if revs := e.revisions(); len(revs) != 2 {
		t.Fatalf("%d revisions, want 2", len(revs))
	}
	e.mutate(func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.RollingUpdate.Partition = ctltest.Ptr(int32(0)) })
	e.Eventually("the rollout finished", func() bool {
		st := e.set().Status
		return st.UpdatedReplicas == 3 && st.CurrentRevision == st.UpdateRevision && st.CurrentRevision != first && st.ReadyReplicas == 3
	})
	// The pod deleted keeps its name and its claim.
	old := e.pods()["web-1"]
	zero := int64(0)
	if _, _, err := e.Store.Delete(e.Ctx, e.Pods, "default", "web-1", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	e.Eventually("web-1 made again", func() bool {
		p := e.pods()["web-1"]
		return p != nil && p.UID != old.UID && kit.PodReady(p)
	})

	// A scale-down halts while pods above the lowest unhealthy one are
	// unhealthy (as kube-controller-manager: the conformance spec
	// "Scaling should happen in predictable order and halt if any
	// stateful pod is unhealthy")...
	e.kubelet.SetReady(func(*corev1.Pod) bool { return false })
	e.Eventually("no replica ready", func() bool { return e.set().Status.ReadyReplicas == 0 })
	e.mutate(func(s *appsv1.StatefulSet) { s.Spec.Replicas = ctltest.Ptr(int32(0)) })
	e.Settle("default/web", e.sets, "web")
	if got := e.names(); len(got) != 3 {
		t.Fatalf("pods %v after a scale-down to 0 with every pod unready, want the three kept", got)
	}
	// ...and goes on, highest ordinal first, once they are healthy: the
	// highest ordinals go; claims stay (Retain).
	e.kubelet.SetReady(nil)
	e.mutate(func(s *appsv1.StatefulSet) { s.Spec.Replicas = ctltest.Ptr(int32(1)) })
	e.Eventually("web-0 alone", func() bool { return slices.Equal(e.names(), []string{"web-0"}) && e.set().Status.Replicas == 1 })
	for _, c := range []string{"data-web-0", "data-web-1", "data-web-2"} {
		if _, ok := e.exists(e.claims, c); !ok {
			t.Errorf("claim %s gone on scale down, want it kept", c)
		}
	}
}

func TestStatefulSetParallelAndClaimRetention(t *testing.T) {
	e := newEnv(t)
	e.kubelet.SetReady(func(*corev1.Pod) bool { return false })
	app := map[string]string{"app": "db"}
	if _, err := e.Store.Create(e.Ctx, e.sets, "default", &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.StatefulSetSpec{Replicas: ctltest.Ptr(int32(3)), PodManagementPolicy: appsv1.ParallelPodManagement,
			Ordinals: &appsv1.StatefulSetOrdinals{Start: 5}, Selector: &metav1.LabelSelector{MatchLabels: app},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.DeletePersistentVolumeClaimRetentionPolicyType},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: app},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ctltest.Ptr("local"), AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}},
		}}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Parallel: all three at once, though none is ready; ordinals from 5.
	e.Eventually("web-5, web-6 and web-7 at once", func() bool { return slices.Equal(e.names(), []string{"web-5", "web-6", "web-7"}) })
	set := e.set()
	obj, _ := e.exists(e.claims, "data-web-7")
	if obj == nil || !slices.ContainsFunc(obj.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return r.UID == set.UID }) {
		t.Fatalf("claim data-web-7: %v, want it owned by the set (whenDeleted: Delete)", obj)
	}
	// whenScaled Delete: the claim of the surplus pod goes with it.
	e.kubelet.SetReady(nil)
	e.mutate(func(s *appsv1.StatefulSet) { s.Spec.Replicas = ctltest.Ptr(int32(2)) })
	e.Eventually("web-7 and its claim gone", func() bool {
		_, claim := e.exists(e.claims, "data-web-7")
		return slices.Equal(e.names(), []string{"web-5", "web-6"}) && !claim
	})
	// whenDeleted Delete: the claims go with the set.
	if _, _, err := e.Store.Delete(e.Ctx, e.sets, "default", "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually("pods and claims gone with the set", func() bool {
		_, c5 := e.exists(e.claims, "data-web-5")
		_, c6 := e.exists(e.claims, "data-web-6")
		return len(e.pods()) == 0 && !c5 && !c6
	})
}
