package replicaset

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/controllers/internal/ctltest"
	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/registry"
)

// The tests of the ReplicaSet controller inject its clock; their helpers
// are prefixed rs.

const rsWait = 15 * time.Second

type rsEnv struct {
	t     *testing.T
	s     *registry.Store
	ctx   context.Context
	clock *kit.TestClock
	rsRes *registry.Resource
	pods  *registry.Resource
}

// newRSEnv starts a store, with the fake clock as its clock too (creation
// and condition timestamps), and the ReplicaSet controller on it with the
// fake clock (ctltest.Env.Run: with the garbage collector, the scheduler
// and Events); namespace "default" exists.
func newRSEnv(t *testing.T) *rsEnv {
	t.Helper()
	clock := kit.NewTestClock(time.Now().UTC().Truncate(time.Second))
	env := ctltest.New(t, clock.Now)
	s := env.Store
	e := &rsEnv{t: t, s: s, ctx: t.Context(), clock: clock,
		rsRes: kit.MustLookup(s, appsv1.SchemeGroupVersion.WithResource("replicasets")),
		pods:  kit.MustLookup(s, corev1.SchemeGroupVersion.WithResource("pods"))}
	rsc := New(s, env.Log, env.Events.Recorder("replicaset-controller"))
	rsc.now = clock.Now
	env.Run(t, rsc)
	return e
}

func (e *rsEnv) eventually(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(rsWait)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: not true within %v", what, rsWait)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func rsTestSpec(replicas int32, selector, template map[string]string) appsv1.ReplicaSetSpec {
	return appsv1.ReplicaSetSpec{
		Replicas: &replicas,
		Selector: &metav1.LabelSelector{MatchLabels: selector},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: template},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}},
	}
}

func (e *rsEnv) createRS(name string, spec appsv1.ReplicaSetSpec) *appsv1.ReplicaSet {
	e.t.Helper()
	out, err := e.s.Create(e.ctx, e.rsRes, "default", &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, registry.WriteOptions{})
	if err != nil {
		e.t.Fatalf("create ReplicaSet %s: %v", name, err)
	}
	return out.(*appsv1.ReplicaSet)
}

func (e *rsEnv) getRS(name string) *appsv1.ReplicaSet {
	e.t.Helper()
	obj, err := e.s.Get(e.ctx, e.rsRes, "default", name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("get ReplicaSet %s: %v", name, err)
	}
	return obj.(*appsv1.ReplicaSet)
}

func (e *rsEnv) mutateRS(name string, change func(*appsv1.ReplicaSet)) {
	e.t.Helper()
	if _, err := e.s.Mutate(e.ctx, e.rsRes, "default", name, "", func(o runtime.Object) error {
		change(o.(*appsv1.ReplicaSet))
		return nil
	}); err != nil {
		e.t.Fatalf("update ReplicaSet %s: %v", name, err)
	}
}

func (e *rsEnv) scale(name string, n int32) {
	e.t.Helper()
	e.mutateRS(name, func(rs *appsv1.ReplicaSet) { rs.Spec.Replicas = &n })
}

func (e *rsEnv) createPod(name string, lbls map[string]string, refs ...metav1.OwnerReference) *corev1.Pod {
	e.t.Helper()
	out, err := e.s.Create(e.ctx, e.pods, "default", &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls, OwnerReferences: refs},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, registry.WriteOptions{})
	if err != nil {
		e.t.Fatalf("create pod %s: %v", name, err)
	}
	return out.(*corev1.Pod)
}

// allPods returns every pod of the namespace, by name.
func (e *rsEnv) allPods() map[string]*corev1.Pod {
	e.t.Helper()
	list, err := e.s.List(e.ctx, e.pods, "default", metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]*corev1.Pod{}
	for i := range list.(*corev1.PodList).Items {
		p := &list.(*corev1.PodList).Items[i]
		out[p.Name] = p
	}
	return out
}

// owned returns the pods rs controls that are not terminating.
func (e *rsEnv) owned(rs *appsv1.ReplicaSet) map[string]*corev1.Pod {
	e.t.Helper()
	out := map[string]*corev1.Pod{}
	for name, p := range e.allPods() {
		if ref := metav1.GetControllerOf(p); ref != nil && ref.UID == rs.UID && p.DeletionTimestamp == nil {
			out[name] = p
		}
	}
	return out
}

func (e *rsEnv) pod(name string) (*corev1.Pod, bool) {
	e.t.Helper()
	obj, err := e.s.Get(e.ctx, e.pods, "default", name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return obj.(*corev1.Pod), true
}

func (e *rsEnv) podStatus(name string, change func(*corev1.Pod)) {
	e.t.Helper()
	if _, err := e.s.Mutate(e.ctx, e.pods, "default", name, "status", func(o runtime.Object) error {
		change(o.(*corev1.Pod))
		return nil
	}); err != nil {
		e.t.Fatalf("update status of pod %s: %v", name, err)
	}
}

func (e *rsEnv) mutatePod(name string, change func(*corev1.Pod)) {
	e.t.Helper()
	if _, err := e.s.Mutate(e.ctx, e.pods, "default", name, "", func(o runtime.Object) error {
		change(o.(*corev1.Pod))
		return nil
	}); err != nil {
		e.t.Fatalf("update pod %s: %v", name, err)
	}
}

func (e *rsEnv) bind(name, node string) {
	e.t.Helper()
	if err := e.s.Bind(e.ctx, "default", name, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Target: corev1.ObjectReference{Kind: "Node", Name: node}}); err != nil {
		e.t.Fatalf("bind %s to %s: %v", name, node, err)
	}
}

func rsStatusIs(rs *appsv1.ReplicaSet, replicas, fully, ready, available int32) bool {
	s := rs.Status
	return s.ObservedGeneration == rs.Generation && s.Replicas == replicas && s.FullyLabeledReplicas == fully &&
		s.ReadyReplicas == ready && s.AvailableReplicas == available
}

func rsFailure(rs *appsv1.ReplicaSet) *appsv1.ReplicaSetCondition {
	for i, c := range rs.Status.Conditions {
		if c.Type == appsv1.ReplicaSetReplicaFailure {
			return &rs.Status.Conditions[i]
		}
	}
	return nil
}

var rsPodName = regexp.MustCompile(`^web-[a-z0-9]{5}$`)

func TestReplicaSetScaleUp(t *testing.T) {
	e := newRSEnv(t)
	tmpl := map[string]string{"app": "web", "tier": "front"}
	rs := e.createRS("web", rsTestSpec(0, map[string]string{"app": "web"}, tmpl))
	e.eventually("status of the empty ReplicaSet is written", func() bool {
		cur := e.getRS("web")
		return cur.Status.ObservedGeneration == 1 && cur.Status.TerminatingReplicas != nil
	})
	if n := len(e.allPods()); n != 0 {
		t.Fatalf("%d pods for 0 replicas", n)
	}

	e.scale("web", 3)
	e.eventually("status shows 3 replicas of generation 2", func() bool {
		cur := e.getRS("web")
		return cur.Generation == 2 && rsStatusIs(cur, 3, 3, 0, 0)
	})
	pods := e.allPods()
	if len(pods) != 3 {
		t.Fatalf("%d pods, want 3: %v", len(pods), slices.Collect(maps.Keys(pods)))
	}
	for name, p := range pods {
		if !rsPodName.MatchString(name) || p.GenerateName != "web-" {
			t.Errorf("pod name %q (generateName %q), want web- and 5 lowercase alphanumerics", name, p.GenerateName)
		}
		if !maps.Equal(p.Labels, tmpl) {
			t.Errorf("pod %s labels %v, want the template's %v", name, p.Labels, tmpl)
		}
		refs := p.OwnerReferences
		if len(refs) != 1 {
			t.Fatalf("pod %s ownerReferences %+v", name, refs)
		}
		r := refs[0]
		if r.APIVersion != "apps/v1" || r.Kind != "ReplicaSet" || r.Name != "web" || r.UID != rs.UID ||
			r.Controller == nil || !*r.Controller || r.BlockOwnerDeletion == nil || !*r.BlockOwnerDeletion {
			t.Errorf("pod %s ownerReference %+v", name, r)
		}
		if len(p.Spec.Containers) != 1 || p.Spec.Containers[0].Image != "busybox" {
			t.Errorf("pod %s containers %+v, want the template's", name, p.Spec.Containers)
		}
	}
	if rsFailure(e.getRS("web")) != nil {
		t.Errorf("ReplicaFailure condition after successful creations")
	}
}

func TestReplicaSetScaleDownOrder(t *testing.T) {
	e := newRSEnv(t)
	web := map[string]string{"app": "web"}
	// Orphans, oldest first, each a minute younger than the one before.
	// Their expected order of deletion: a, b, c, d, e, f; g stays.
	names := []string{"a", "b", "c", "d", "e", "g", "f"}
	for _, n := range names {
		e.createPod(n, web)
		e.clock.Advance(time.Minute)
	}
	readySince := e.clock.Now().Add(-time.Hour)
	running := func(ready bool, restarts int32) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			ctltest.SetReady(p, ready, readySince)
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Image: "busybox", Ready: ready, RestartCount: restarts,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(readySince)}}}}
		}
	}
	// a: unscheduled, Pending (oldest: scheduling beats age)
	e.bind("b", "n1") // b: Pending
	e.bind("c", "n2")
	e.podStatus("c", func(p *corev1.Pod) { p.Status.Phase = corev1.PodUnknown })
	e.bind("d", "n3")
	e.podStatus("d", running(false, 0))
	e.bind("e", "n4")
	e.podStatus("e", running(true, 3))
	e.bind("f", "n5")
	e.podStatus("f", running(true, 0))
	e.bind("g", "n6")
	e.podStatus("g", running(true, 0))

	rs := e.createRS("web", rsTestSpec(7, web, web))
	e.eventually("all seven orphans are adopted", func() bool {
		return len(e.owned(rs)) == 7 && rsStatusIs(e.getRS("web"), 7, 7, 3, 3)
	})
	if n := len(e.allPods()); n != 7 {
		t.Fatalf("%d pods, want the 7 adopted ones", n)
	}

	order := []string{"a", "b", "c", "d", "e", "f"}
	for i, victim := range order {
		want := int32(6 - i)
		e.scale("web", want)
		e.eventually(fmt.Sprintf("scaled to %d, pod %s goes", want, victim), func() bool {
			p, ok := e.pod(victim)
			return !ok || p.DeletionTimestamp != nil
		})
		e.eventually(fmt.Sprintf("status shows %d replicas", want), func() bool {
			return e.getRS("web").Status.Replicas == want
		})
		left := e.owned(rs)
		wantLeft := append(slices.Clone(order[i+1:]), "g")
		if got := slices.Sorted(maps.Keys(left)); !slices.Equal(got, slices.Sorted(slices.Values(wantLeft))) {
			t.Fatalf("after scaling to %d the active pods are %v, want %v", want, got, slices.Sorted(slices.Values(wantLeft)))
		}
	}
	// Deleted pods on nodes wait for their node (none here): terminating.
	if p, ok := e.pod("b"); !ok || p.DeletionTimestamp == nil {
		t.Errorf("scheduled victim b: present=%v, want present and terminating", ok)
	}
	if _, ok := e.pod("a"); ok {
		t.Errorf("unscheduled victim a is still stored")
	}
	e.eventually("terminatingReplicas counts the victims that wait for their node", func() bool {
		st := e.getRS("web").Status
		return st.TerminatingReplicas != nil && *st.TerminatingReplicas == 5
	})
}

func TestReplicaSetReplacesDeletedPods(t *testing.T) {
	e := newRSEnv(t)
	web := map[string]string{"app": "web"}
	rs := e.createRS("web", rsTestSpec(2, web, web))
	e.eventually("2 pods", func() bool { return len(e.owned(rs)) == 2 })
	first := slices.Sorted(maps.Keys(e.owned(rs)))

	// An unscheduled pod goes at once and is replaced.
	if _, _, err := e.s.Delete(e.ctx, e.pods, "default", first[0], metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the deleted pod is replaced", func() bool {
		o := e.owned(rs)
		_, old := o[first[0]]
		return len(o) == 2 && !old
	})

	// A pod on a node stays terminating until its node stops it; it does
	// not count, and is replaced meanwhile.
	e.bind(first[1], "n1")
	if _, _, err := e.s.Delete(e.ctx, e.pods, "default", first[1], metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the terminating pod is replaced", func() bool {
		o := e.owned(rs)
		_, old := o[first[1]]
		return len(o) == 2 && !old
	})
	e.eventually("status: 2 replicas, 1 terminating", func() bool {
		cur := e.getRS("web")
		return rsStatusIs(cur, 2, 2, 0, 0) && cur.Status.TerminatingReplicas != nil && *cur.Status.TerminatingReplicas == 1
	})
	if n := len(e.allPods()); n != 3 {
		t.Errorf("%d pods, want 2 active and 1 terminating", n)
	}
}

func TestReplicaSetAdoptionAndRelease(t *testing.T) {
	e := newRSEnv(t)
	web := map[string]string{"app": "web"}
	cms := kit.MustLookup(e.s, corev1.SchemeGroupVersion.WithResource("configmaps"))
	bossObj, err := e.s.Create(e.ctx, cms, "default", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "boss"}}, registry.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	boss := bossObj.(*corev1.ConfigMap)
	yes := true
	bossRef := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "boss", UID: boss.UID, Controller: &yes}

	e.createPod("stray", web)
	e.createPod("foreign", web, bossRef)
	e.createPod("unrelated", map[string]string{"app": "other"})
	rs := e.createRS("web", rsTestSpec(2, web, web))

	e.eventually("the orphan is adopted and one pod is created", func() bool {
		o := e.owned(rs)
		_, stray := o["stray"]
		return len(o) == 2 && stray && rsStatusIs(e.getRS("web"), 2, 2, 0, 0)
	})
	stray, _ := e.pod("stray")
	ref := metav1.GetControllerOf(stray)
	if ref == nil || ref.UID != rs.UID || ref.Kind != "ReplicaSet" || ref.APIVersion != "apps/v1" ||
		ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Fatalf("adopted pod's controller reference %+v", ref)
	}
	foreign, _ := e.pod("foreign")
	if len(foreign.OwnerReferences) != 1 || foreign.OwnerReferences[0].UID != boss.UID || foreign.DeletionTimestamp != nil {
		t.Errorf("another controller's pod was touched: %+v", foreign.ObjectMeta)
	}
	unrelated, _ := e.pod("unrelated")
	if len(unrelated.OwnerReferences) != 0 {
		t.Errorf("a pod not matching the selector was adopted")
	}

	// A pod relabelled out of the selector is released, not deleted, and
	// replaced.
	var created string
	for name := range e.owned(rs) {
		if name != "stray" {
			created = name
		}
	}
	e.mutatePod(created, func(p *corev1.Pod) { p.Labels = map[string]string{"app": "moved"} })
	e.eventually("the relabelled pod is released and replaced", func() bool {
		p, ok := e.pod(created)
		o := e.owned(rs)
		_, still := o[created]
		return ok && len(p.OwnerReferences) == 0 && len(o) == 2 && !still
	})
	if p, _ := e.pod(created); p.DeletionTimestamp != nil {
		t.Errorf("the released pod is being deleted")
	}
	if n := len(e.allPods()); n != 5 {
		t.Errorf("%d pods, want 5 (2 owned, released, foreign, unrelated)", n)
	}
	foreign, _ = e.pod("foreign")
	if len(foreign.OwnerReferences) != 1 || foreign.OwnerReferences[0].UID != boss.UID || foreign.DeletionTimestamp != nil {
		t.Errorf("another controller's pod was touched: %+v", foreign.ObjectMeta)
	}

	// Labelled back, it is an orphan again and adopted; the set is one
	// over, and one goes.
	e.mutatePod(created, func(p *corev1.Pod) { p.Labels = web })
	e.eventually("readopted, and back to 2", func() bool {
		p, ok := e.pod(created)
		if !ok {
			return len(e.owned(rs)) == 2 // readopted, then the one deleted
		}
		r := metav1.GetControllerOf(p)
		return r != nil && r.UID == rs.UID && len(e.owned(rs)) == 2
	})
}

func TestReplicaSetStatus(t *testing.T) {
	e := newRSEnv(t)
	tmpl := map[string]string{"app": "web", "tier": "front"}
	e.createPod("partial", map[string]string{"app": "web"}) // adopted, not fully labelled
	spec := rsTestSpec(3, map[string]string{"app": "web"}, tmpl)
	spec.MinReadySeconds = 10
	rs := e.createRS("web", spec)
	e.eventually("3 pods, 2 fully labelled", func() bool {
		return len(e.owned(rs)) == 3 && rsStatusIs(e.getRS("web"), 3, 2, 0, 0)
	})

	since := e.clock.Now()
	for name := range e.owned(rs) {
		e.podStatus(name, func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning; ctltest.SetReady(p, true, since) })
	}
	e.eventually("3 ready, none available yet (minReadySeconds 10)", func() bool {
		return rsStatusIs(e.getRS("web"), 3, 2, 3, 0)
	})

	// Ten seconds later (by the controller's clock) they are available;
	// an update of the ReplicaSet has it looked at.
	e.clock.Advance(11 * time.Second)
	e.mutateRS("web", func(rs *appsv1.ReplicaSet) { rs.Annotations = map[string]string{"touch": "1"} })
	e.eventually("3 available", func() bool { return rsStatusIs(e.getRS("web"), 3, 2, 3, 3) })

	e.podStatus("partial", func(p *corev1.Pod) { ctltest.SetReady(p, false, e.clock.Now()) })
	e.eventually("a pod turning unready counts", func() bool { return rsStatusIs(e.getRS("web"), 3, 2, 2, 2) })

	// observedGeneration follows a change of the spec.
	e.mutateRS("web", func(rs *appsv1.ReplicaSet) {
		rs.Spec.Template.Annotations = map[string]string{"rev": "2"}
	})
	e.eventually("observedGeneration 2", func() bool {
		cur := e.getRS("web")
		return cur.Generation == 2 && cur.Status.ObservedGeneration == 2 && rsStatusIs(cur, 3, 2, 2, 2)
	})

	// A settled status is not written again: pod changes that leave it
	// as it is (annotations) write nothing to the ReplicaSet; the first
	// write after them is the one a readiness change brings.
	cur := e.getRS("web")
	wctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	events, err := e.s.Watch(wctx, e.rsRes, "default", metav1.ListOptions{ResourceVersion: cur.ResourceVersion, FieldSelector: "metadata.name=web"})
	if err != nil {
		t.Fatal(err)
	}
	for name := range e.owned(rs) {
		e.mutatePod(name, func(p *corev1.Pod) { p.Annotations = map[string]string{"x": "y"} })
	}
	e.podStatus("partial", func(p *corev1.Pod) { ctltest.SetReady(p, true, e.clock.Now().Add(-time.Minute)) })
	select {
	case ev := <-events:
		got, ok := ev.Object.(*appsv1.ReplicaSet)
		if !ok || ev.Type != watch.Modified || !rsStatusIs(got, 3, 2, 3, 3) {
			t.Fatalf("first write after settling: %s %+v, want the status with 3 ready", ev.Type, ev.Object)
		}
	case <-time.After(rsWait):
		t.Fatal("no status write after a pod turned ready")
	}
}

func TestReplicaSetStatusTimerMakesPodsAvailable(t *testing.T) {
	e := newRSEnv(t)
	web := map[string]string{"app": "web"}
	spec := rsTestSpec(1, web, web)
	spec.MinReadySeconds = 1
	rs := e.createRS("web", spec)
	e.eventually("1 pod", func() bool { return len(e.owned(rs)) == 1 })
	for name := range e.owned(rs) {
		e.podStatus(name, func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning; ctltest.SetReady(p, true, e.clock.Now()) })
	}
	e.eventually("ready, not available", func() bool { return rsStatusIs(e.getRS("web"), 1, 1, 1, 0) })
	// The controller looks again when minReadySeconds have passed.
	e.clock.Advance(2 * time.Second)
	e.eventually("available without any event", func() bool { return rsStatusIs(e.getRS("web"), 1, 1, 1, 1) })
}

func TestReplicaSetReplicaFailure(t *testing.T) {
	e := newRSEnv(t)
	web := map[string]string{"app": "web"}
	spec := rsTestSpec(2, web, web)
	// Template metadata is not validated as a pod's: this finalizer name is
	// accepted in a ReplicaSet and refused in a pod.
	spec.Template.Finalizers = []string{"unqualified"}
	rs := e.createRS("bad", spec)
	e.eventually("ReplicaFailure FailedCreate", func() bool {
		c := rsFailure(e.getRS("bad"))
		return c != nil && c.Status == corev1.ConditionTrue && c.Reason == "FailedCreate" && c.Message != ""
	})
	if n := len(e.allPods()); n != 0 {
		t.Fatalf("%d pods created from an invalid template", n)
	}
	e.mutateRS("bad", func(rs *appsv1.ReplicaSet) { rs.Spec.Template.Finalizers = nil })
	e.eventually("pods created and the condition removed", func() bool {
		cur := e.getRS("bad")
		return len(e.owned(rs)) == 2 && rsFailure(cur) == nil && rsStatusIs(cur, 2, 2, 0, 0)
	})
}

func TestReplicaSetDeletion(t *testing.T) {
	e := newRSEnv(t)
	sel := func(app string) map[string]string { return map[string]string{"app": app} }
	count := func(app string) int {
		n := 0
		for _, p := range e.allPods() {
			if p.Labels["app"] == app {
				n++
			}
		}
		return n
	}
	bg := e.createRS("bg", rsTestSpec(3, sel("bg"), sel("bg")))
	fg := e.createRS("fg", rsTestSpec(3, sel("fg"), sel("fg")))
	or := e.createRS("or", rsTestSpec(2, sel("or"), sel("or")))
	e.eventually("pods of all three", func() bool {
		return len(e.owned(bg)) == 3 && len(e.owned(fg)) == 3 && len(e.owned(or)) == 2
	})

	if _, _, err := e.s.Delete(e.ctx, e.rsRes, "default", "bg", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the garbage collector removes bg's pods", func() bool { return count("bg") == 0 })

	policy := metav1.DeletePropagationForeground
	if _, _, err := e.s.Delete(e.ctx, e.rsRes, "default", "fg", metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
		t.Fatal(err)
	}
	e.eventually("fg and its pods are removed", func() bool {
		_, err := e.s.Get(e.ctx, e.rsRes, "default", "fg", metav1.GetOptions{})
		return apierrors.IsNotFound(err) && count("fg") == 0
	})

	policy = metav1.DeletePropagationOrphan
	if _, _, err := e.s.Delete(e.ctx, e.rsRes, "default", "or", metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
		t.Fatal(err)
	}
	e.eventually("or is removed, its pods orphaned", func() bool {
		_, err := e.s.Get(e.ctx, e.rsRes, "default", "or", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false
		}
		n := 0
		for _, p := range e.allPods() {
			if p.Labels["app"] == "or" && len(p.OwnerReferences) == 0 && p.DeletionTimestamp == nil {
				n++
			}
		}
		return n == 2
	})
	if n := count("or"); n != 2 {
		t.Errorf("%d pods of the orphaning ReplicaSet, want its 2", n)
	}
}

func TestReplicaSetDeleteOrder(t *testing.T) {
	at := func(min int) metav1.Time { return metav1.NewTime(time.Date(2030, 1, 1, 0, min, 0, 0, time.UTC)) }
	pod := func(name string, f func(p *corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: at(0)},
			Spec: corev1.PodSpec{NodeName: "n-" + name}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		ctltest.SetReady(p, true, at(10).Time)
		if f != nil {
			f(p)
		}
		return p
	}
	// Listed in the expected order of deletion.
	pods := []*corev1.Pod{
		pod("unscheduled", func(p *corev1.Pod) { p.Spec.NodeName = ""; p.CreationTimestamp = at(-5) }),
		pod("pending", func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }),
		pod("unknown", func(p *corev1.Pod) { p.Status.Phase = corev1.PodUnknown }),
		pod("unready", func(p *corev1.Pod) { ctltest.SetReady(p, false, at(10).Time) }),
		pod("cheap", func(p *corev1.Pod) { p.Annotations = map[string]string{kit.DeletionCost: "-5"} }),
		pod("doubled-1", func(p *corev1.Pod) { p.Spec.NodeName = "shared" }),
		pod("doubled-2", func(p *corev1.Pod) { p.Spec.NodeName = "shared"; p.CreationTimestamp = at(-1) }),
		pod("ready-recently", func(p *corev1.Pod) { ctltest.SetReady(p, true, at(20).Time) }),
		pod("restarts", func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", RestartCount: 1}, {Name: "d", RestartCount: 4}}
		}),
		pod("newer", func(p *corev1.Pod) { p.CreationTimestamp = at(1) }),
		pod("older", nil),
		pod("dear", func(p *corev1.Pod) { p.Annotations = map[string]string{kit.DeletionCost: "100"} }),
	}
	want := make([]string, len(pods))
	for i, p := range pods {
		want[i] = p.Name
	}
	shuffled := slices.Clone(pods)
	for i := range 5 {
		slices.Reverse(shuffled)
		shuffled = slices.Concat(shuffled[i:], shuffled[:i])
		victims := rsVictims(shuffled, len(pods)-1)
		got := make([]string, len(victims))
		for j, v := range victims {
			got[j] = v.Name
		}
		if !slices.Equal(got, want[:len(want)-1]) {
			t.Fatalf("deletion order\n got %v\nwant %v", got, want[:len(want)-1])
		}
	}
	if v := rsVictims(pods, len(pods)); len(v) != len(pods) {
		t.Errorf("deleting all: %d victims", len(v))
	}
}
