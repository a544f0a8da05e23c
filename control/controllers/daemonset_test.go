package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/raft/rafttest"
)

// The DaemonSet and Job tests share wlEnv: the whole controller table on a
// real store, with no node agent; fakeKubelet plays one where a test needs
// it. Their helpers are prefixed wl, ds and job.

const wlWait = 20 * time.Second

type wlEnv struct {
	t                           *testing.T
	s                           *registry.Store
	ctx                         context.Context
	dsRes, jobRes, pods, nodeRs *registry.Resource

	mu       sync.Mutex
	dsSynced map[string]int64 // by key: the highest revision a finished sync began at
	jbSynced map[string]int64
}

// newWLEnv starts a store and every controller of the table on it, the
// DaemonSet and Job controllers reporting their syncs and changed by tune
// (if set); namespace "default" exists.
func newWLEnv(t *testing.T, tune func(Controller)) *wlEnv {
	t.Helper()
	c := rafttest.NewCluster(t, rafttest.Options{Size: 1})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := registry.New(registry.Config{Node: c.Node(c.IDs()[0]), Logger: log})
	e := &wlEnv{t: t, s: s, ctx: t.Context(), dsSynced: map[string]int64{}, jbSynced: map[string]int64{},
		dsRes:  kit.MustLookup(s, appsv1.SchemeGroupVersion.WithResource("daemonsets")),
		jobRes: kit.MustLookup(s, batchv1.SchemeGroupVersion.WithResource("jobs")),
		pods:   kit.MustLookup(s, corev1.SchemeGroupVersion.WithResource("pods")),
		nodeRs: kit.MustLookup(s, corev1.SchemeGroupVersion.WithResource("nodes"))}
	note := func(m map[string]int64) func(string, int64) {
		return func(key string, rev int64) {
			e.mu.Lock()
			defer e.mu.Unlock()
			m[key] = max(m[key], rev)
		}
	}
	table := Table(s, log)
	var found int
	for _, ctl := range table {
		switch x := ctl.(type) {
		case *daemonSets:
			x.synced = note(e.dsSynced)
			found++
		case *jobs:
			x.synced = note(e.jbSynced)
			found++
		}
		if tune != nil {
			tune(ctl)
		}
	}
	if found != 2 {
		t.Fatal("the DaemonSet and Job controllers are not both in the table")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunAll(ctx, table, log)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(wlWait):
			t.Errorf("controllers did not stop within %v of their context's end", wlWait)
		}
	})
	nsRes := kit.MustLookup(s, corev1.SchemeGroupVersion.WithResource("namespaces"))
	if _, err := s.Create(e.ctx, nsRes, "", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *wlEnv) eventually(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(wlWait)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: not true within %v", what, wlWait)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// settle waits until the controller whose syncs are in synced has synced
// key in a sync that began after every write so far; touch (a change of
// the object) makes sure such a sync happens. What the test sees then is
// the controller's answer to everything before.
func (e *wlEnv) settle(synced map[string]int64, key string, touch func()) {
	e.t.Helper()
	touch()
	rev := e.s.Revision()
	e.eventually("a sync of "+key+" after revision "+strconv.FormatInt(rev, 10), func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return synced[key] >= rev
	})
}

// poke returns a touch for settle: a change of an annotation of the object.
func (e *wlEnv) poke(res *registry.Resource, name string) func() {
	return func() {
		e.t.Helper()
		if _, err := e.s.Mutate(e.ctx, res, "default", name, "", func(obj runtime.Object) error {
			m, _ := obj.(metav1.Object)
			a := maps.Clone(m.GetAnnotations())
			if a == nil {
				a = map[string]string{}
			}
			n, _ := strconv.Atoi(a["test.isle.dev/poke"])
			a["test.isle.dev/poke"] = strconv.Itoa(n + 1)
			m.SetAnnotations(a)
			return nil
		}); err != nil {
			e.t.Fatalf("poke %s %s: %v", res, name, err)
		}
	}
}

// hasEvent reports whether an Event about the object of kind and name
// has the reason and message.
func (e *wlEnv) hasEvent(kind, name, eventType, reason, message string) bool {
	e.t.Helper()
	list, err := e.s.List(e.ctx, kit.MustLookup(e.s, corev1.SchemeGroupVersion.WithResource("events")), "default", metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, ev := range list.(*corev1.EventList).Items {
		o := ev.InvolvedObject
		if o.Kind == kind && o.Name == name && ev.Type == eventType && ev.Reason == reason && ev.Message == message {
			return true
		}
	}
	return false
}

func (e *wlEnv) node(name string, lbls map[string]string, taints ...corev1.Taint) {
	e.t.Helper()
	if _, err := e.s.Create(e.ctx, e.nodeRs, "", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Spec: corev1.NodeSpec{Taints: taints}}, registry.WriteOptions{}); err != nil {
		e.t.Fatalf("create node %s: %v", name, err)
	}
}

func (e *wlEnv) mutateNode(name string, change func(*corev1.Node)) {
	e.t.Helper()
	if _, err := e.s.Mutate(e.ctx, e.nodeRs, "", name, "", func(o runtime.Object) error {
		change(o.(*corev1.Node))
		return nil
	}); err != nil {
		e.t.Fatalf("update node %s: %v", name, err)
	}
}

// podList returns the pods of namespace default.
func (e *wlEnv) podList() []*corev1.Pod {
	e.t.Helper()
	list, err := e.s.List(e.ctx, e.pods, "default", metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []*corev1.Pod
	for i := range list.(*corev1.PodList).Items {
		out = append(out, &list.(*corev1.PodList).Items[i])
	}
	return out
}

func (e *wlEnv) podStatus(p *corev1.Pod, change func(*corev1.Pod)) {
	e.t.Helper()
	if _, err := e.s.Mutate(e.ctx, e.pods, p.Namespace, p.Name, "status", func(o runtime.Object) error {
		change(o.(*corev1.Pod))
		return nil
	}); err != nil {
		e.t.Fatalf("update status of pod %s: %v", p.Name, err)
	}
}

// fakeKubelet plays the node agent for pods bound to nodes: a pod starts
// Running, and is Ready when ready says so (nil: always); a pod being
// deleted is stopped at once (deleted with grace 0, as a kubelet does once
// its containers are gone). Stopped, it does nothing.
type fakeKubelet struct {
	e       *wlEnv
	mu      sync.Mutex
	ready   func(*corev1.Pod) bool
	stopped bool
}

func (e *wlEnv) startKubelet() *fakeKubelet {
	k := &fakeKubelet{e: e}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	e.t.Cleanup(func() {
		cancel()
		<-done
	})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			events, err := e.s.Watch(ctx, e.pods, "", metav1.ListOptions{})
			if err != nil {
				kit.Sleep(ctx, 10*time.Millisecond)
				continue
			}
			for ev := range events {
				if pod, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Deleted {
					k.handle(ctx, pod)
				}
			}
		}
	}()
	return k
}

// setReady changes which pods are ready and applies it to every pod.
func (k *fakeKubelet) setReady(ready func(*corev1.Pod) bool) {
	k.mu.Lock()
	k.ready = ready
	k.mu.Unlock()
	for _, pod := range k.e.podList() {
		k.handle(k.e.ctx, pod)
	}
}

func (k *fakeKubelet) stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopped = true
}

func (k *fakeKubelet) handle(ctx context.Context, pod *corev1.Pod) {
	k.mu.Lock()
	ready, stopped := k.ready, k.stopped
	k.mu.Unlock()
	if stopped || pod.Spec.NodeName == "" || kit.PodFinished(pod) {
		return
	}
	// Errors are left alone: the pod changed or went meanwhile, and its
	// next event brings it back here.
	s := k.e.s
	if pod.DeletionTimestamp != nil {
		zero, uid := int64(0), pod.UID
		s.Delete(ctx, k.e.pods, pod.Namespace, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
		return
	}
	want := ready == nil || ready(pod)
	if pod.Status.Phase == corev1.PodRunning && kit.PodReady(pod) == want {
		return
	}
	s.Mutate(ctx, k.e.pods, pod.Namespace, pod.Name, "status", func(o runtime.Object) error {
		p := o.(*corev1.Pod)
		if p.UID != pod.UID || kit.PodFinished(p) {
			return kit.ErrClaimSkip
		}
		p.Status.Phase = corev1.PodRunning
		setReady(p, want, time.Now())
		return nil
	})
}

// dsTestSet is a DaemonSet of app=agent pods; change adjusts it.
func dsTestSet(name string, change func(*appsv1.DaemonSet)) *appsv1.DaemonSet {
	lbl := map[string]string{"app": "agent"}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: lbl},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}}}}}}
	if change != nil {
		change(ds)
	}
	return ds
}

func (e *wlEnv) createDS(ds *appsv1.DaemonSet) *appsv1.DaemonSet {
	e.t.Helper()
	out, err := e.s.Create(e.ctx, e.dsRes, "default", ds, registry.WriteOptions{})
	if err != nil {
		e.t.Fatalf("create DaemonSet %s: %v", ds.Name, err)
	}
	return out.(*appsv1.DaemonSet)
}

func (e *wlEnv) getDS(name string) *appsv1.DaemonSet {
	e.t.Helper()
	obj, err := e.s.Get(e.ctx, e.dsRes, "default", name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("get DaemonSet %s: %v", name, err)
	}
	return obj.(*appsv1.DaemonSet)
}

func (e *wlEnv) mutateDS(name string, change func(*appsv1.DaemonSet)) {
	e.t.Helper()
	if _, err := e.s.Mutate(e.ctx, e.dsRes, "default", name, "", func(o runtime.Object) error {
		change(o.(*appsv1.DaemonSet))
		return nil
	}); err != nil {
		e.t.Fatalf("update DaemonSet %s: %v", name, err)
	}
}

func (e *wlEnv) settleDS(name string) {
	e.t.Helper()
	e.settle(e.dsSynced, "default/"+name, e.poke(e.dsRes, name))
}

// dsPods returns the live (not deleting) pods ds controls, by node.
func (e *wlEnv) dsPods(ds *appsv1.DaemonSet) map[string][]*corev1.Pod {
	e.t.Helper()
	out := map[string][]*corev1.Pod{}
	for _, p := range e.podList() {
		if ref := metav1.GetControllerOf(p); ref != nil && ref.UID == ds.UID && p.DeletionTimestamp == nil {
			out[p.Spec.NodeName] = append(out[p.Spec.NodeName], p)
		}
	}
	return out
}

// dsRolledOut is `kubectl rollout status ds` reporting success.
func dsRolledOut(ds *appsv1.DaemonSet) bool {
	st := ds.Status
	return ds.Generation <= st.ObservedGeneration && st.UpdatedNumberScheduled >= st.DesiredNumberScheduled &&
		st.NumberAvailable >= st.DesiredNumberScheduled
}

func dsStatusIs(ds *appsv1.DaemonSet, desired, current, ready, updated, available, misscheduled int32) bool {
	st := ds.Status
	return st.ObservedGeneration == ds.Generation && st.DesiredNumberScheduled == desired && st.CurrentNumberScheduled == current &&
		st.NumberReady == ready && st.UpdatedNumberScheduled == updated && st.NumberAvailable == available &&
		st.NumberMisscheduled == misscheduled && st.NumberUnavailable == desired-available
}

func dsRevisions(ds *appsv1.DaemonSet) []dsRevision {
	var hist []dsRevision
	json.Unmarshal([]byte(ds.Annotations[dsRevisionsAnnotation]), &hist)
	return hist
}

func wlPtr[T any](v T) *T { return &v }

func dsTaint(key, value string, effect corev1.TaintEffect) corev1.Taint {
	return corev1.Taint{Key: key, Value: value, Effect: effect}
}

func TestDaemonSetPlacement(t *testing.T) {
	type node struct {
		name   string
		labels map[string]string
		taints []corev1.Taint
	}
	cases := []struct {
		name   string
		nodes  []node
		change func(*appsv1.DaemonSet)
		want   []string
	}{
		{name: "every node", nodes: []node{{name: "n1"}, {name: "n2"}, {name: "n3"}}, want: []string{"n1", "n2", "n3"}},
		{name: "nodeSelector",
			nodes:  []node{{name: "n1", labels: map[string]string{"disk": "ssd"}}, {name: "n2", labels: map[string]string{"disk": "hdd"}}, {name: "n3"}},
			change: func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = map[string]string{"disk": "ssd"} },
			want:   []string{"n1"}},
		{name: "required node affinity, replaced on the pods by the node's name",
			nodes: []node{{name: "n1", labels: map[string]string{"zone": "a"}}, {name: "n2", labels: map[string]string{"zone": "b"}}, {name: "n3"}},
			change: func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
						MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}}}}}},
					PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1, Preference: corev1.NodeSelectorTerm{
						MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}}}}
			},
			want: []string{"n1", "n2"}},
		{name: "untolerated NoSchedule and NoExecute taints; PreferNoSchedule does not count",
			nodes: []node{{name: "n1", taints: []corev1.Taint{dsTaint("dedicated", "gpu", corev1.TaintEffectNoSchedule)}},
				{name: "n2", taints: []corev1.Taint{dsTaint("evict", "", corev1.TaintEffectNoExecute)}},
				{name: "n3", taints: []corev1.Taint{dsTaint("soft", "", corev1.TaintEffectPreferNoSchedule)}}},
			want: []string{"n3"}},
		{name: "tolerated taint",
			nodes: []node{{name: "n1", taints: []corev1.Taint{dsTaint("dedicated", "gpu", corev1.TaintEffectNoSchedule)}}, {name: "n2", taints: []corev1.Taint{dsTaint("dedicated", "tpu", corev1.TaintEffectNoSchedule)}}},
			change: func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
			},
			want: []string{"n1"}},
		{name: "the taints every daemon pod tolerates",
			nodes: []node{{name: "cordoned", taints: []corev1.Taint{dsTaint(corev1.TaintNodeUnschedulable, "", corev1.TaintEffectNoSchedule)}},
				{name: "not-ready", taints: []corev1.Taint{dsTaint(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoExecute)}},
				{name: "unreachable", taints: []corev1.Taint{dsTaint(corev1.TaintNodeUnreachable, "", corev1.TaintEffectNoExecute)}},
				{name: "pressed", taints: []corev1.Taint{dsTaint(corev1.TaintNodeMemoryPressure, "", corev1.TaintEffectNoSchedule),
					dsTaint(corev1.TaintNodeDiskPressure, "", corev1.TaintEffectNoSchedule), dsTaint(corev1.TaintNodePIDPressure, "", corev1.TaintEffectNoSchedule)}},
				{name: "no-network", taints: []corev1.Taint{dsTaint(corev1.TaintNodeNetworkUnavailable, "", corev1.TaintEffectNoSchedule)}}},
			want: []string{"cordoned", "not-ready", "pressed", "unreachable"}},
		{name: "pods on the host network tolerate a node without pod network",
			nodes:  []node{{name: "no-network", taints: []corev1.Taint{dsTaint(corev1.TaintNodeNetworkUnavailable, "", corev1.TaintEffectNoSchedule)}}},
			change: func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.HostNetwork = true },
			want:   []string{"no-network"}},
		{name: "template nodeName", nodes: []node{{name: "n1"}, {name: "n2"}},
			change: func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeName = "n2" },
			want:   []string{"n2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newWLEnv(t, nil)
			e.startKubelet()
			for _, n := range tc.nodes {
				e.node(n.name, n.labels, n.taints...)
			}
			ds := e.createDS(dsTestSet("agent", tc.change))
			n := int32(len(tc.want))
			e.eventually(fmt.Sprintf("status: %d desired, all ready and available", n), func() bool {
				return dsStatusIs(e.getDS("agent"), n, n, n, n, n, 0)
			})
			e.settleDS("agent")
			ds = e.getDS("agent")
			hist := dsRevisions(ds)
			if len(hist) != 1 || hist[0].Revision != 1 {
				t.Fatalf("revision history %+v, want revision 1 only", hist)
			}
			byNode := e.dsPods(ds)
			if got := slices.Sorted(maps.Keys(byNode)); !slices.Equal(got, tc.want) {
				t.Fatalf("pods on nodes %v, want %v", got, tc.want)
			}
			for node, pods := range byNode {
				if len(pods) != 1 {
					t.Fatalf("node %s has %d pods", node, len(pods))
				}
				p := pods[0]
				if p.GenerateName != "agent-" || p.Labels["app"] != "agent" || p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] != hist[0].Hash ||
					p.Labels[dsPodGenerationLabel] != "1" {
					t.Errorf("pod %s: generateName %q labels %v, want agent-, the template's, hash %s and generation 1", p.Name, p.GenerateName, p.Labels, hist[0].Hash)
				}
				ref := metav1.GetControllerOf(p)
				if ref == nil || ref.Kind != "DaemonSet" || ref.APIVersion != "apps/v1" || ref.UID != ds.UID {
					t.Errorf("pod %s controller %+v", p.Name, ref)
				}
				na := p.Spec.Affinity.NodeAffinity
				wantTerms := []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
					{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}
				if !equality.Semantic.DeepEqual(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms, wantTerms) {
					t.Errorf("pod %s required node affinity %+v, want only metadata.name In [%s]", p.Name, na.RequiredDuringSchedulingIgnoredDuringExecution, node)
				}
				if tmpl := ds.Spec.Template.Spec.Affinity; tmpl != nil && !equality.Semantic.DeepEqual(na.PreferredDuringSchedulingIgnoredDuringExecution, tmpl.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) {
					t.Errorf("pod %s lost the template's preferred affinity", p.Name)
				}
				for _, want := range dsTolerations {
					if !slices.ContainsFunc(p.Spec.Tolerations, func(have corev1.Toleration) bool { return equality.Semantic.DeepEqual(have, want) }) {
						t.Errorf("pod %s tolerations %+v lack %+v", p.Name, p.Spec.Tolerations, want)
					}
				}
				e.eventually("Event SuccessfulCreate for pod "+p.Name, func() bool {
					return e.hasEvent("DaemonSet", "agent", corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: "+p.Name)
				})
			}
		})
	}
}

func TestDaemonSetFollowsNodes(t *testing.T) {
	e := newWLEnv(t, nil)
	kubelet := e.startKubelet()
	edge := map[string]string{"pool": "edge"}
	e.node("a", edge)
	e.node("b", edge)
	ds := e.createDS(dsTestSet("agent", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = edge }))
	onNodes := func(want ...string) func() bool {
		return func() bool {
			byNode := e.dsPods(ds)
			for _, pods := range byNode {
				if len(pods) != 1 {
					return false
				}
			}
			return slices.Equal(slices.Sorted(maps.Keys(byNode)), want)
		}
	}
	steps := []struct {
		name   string
		do     func()
		nodes  []string
		status [6]int32 // desired, current, ready, updated, available, misscheduled
	}{
		{"initial nodes", func() {}, []string{"a", "b"}, [6]int32{2, 2, 2, 2, 2, 0}},
		{"a node joins", func() { e.node("c", edge) }, []string{"a", "b", "c"}, [6]int32{3, 3, 3, 3, 3, 0}},
		{"a node that no longer matches loses its pod", func() { e.mutateNode("b", func(n *corev1.Node) { n.Labels["pool"] = "core" }) },
			[]string{"a", "c"}, [6]int32{2, 2, 2, 2, 2, 0}},
		{"an untolerated NoSchedule taint keeps the running pod, misscheduled",
			func() {
				e.mutateNode("a", func(n *corev1.Node) {
					n.Spec.Taints = []corev1.Taint{dsTaint("maintenance", "", corev1.TaintEffectNoSchedule)}
				})
			},
			[]string{"a", "c"}, [6]int32{1, 1, 1, 1, 1, 1}},
		{"an untolerated NoExecute taint evicts it",
			func() {
				e.mutateNode("a", func(n *corev1.Node) {
					n.Spec.Taints = []corev1.Taint{dsTaint("maintenance", "", corev1.TaintEffectNoExecute)}
				})
			},
			[]string{"c"}, [6]int32{1, 1, 1, 1, 1, 0}},
		{"the taint goes, the pod comes back", func() { e.mutateNode("a", func(n *corev1.Node) { n.Spec.Taints = nil }) },
			[]string{"a", "c"}, [6]int32{2, 2, 2, 2, 2, 0}},
		// No node agent stops the pod of a node that is gone: the
		// controller removes it at once.
		{"a node is deleted", func() {
			kubelet.stop()
			if _, _, err := e.s.Delete(e.ctx, e.nodeRs, "", "c", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, []string{"a"}, [6]int32{1, 1, 1, 1, 1, 0}},
	}
	for _, st := range steps {
		st.do()
		e.eventually(st.name+": pods on "+fmt.Sprint(st.nodes), onNodes(st.nodes...))
		s := st.status
		e.eventually(st.name+": status "+fmt.Sprint(s), func() bool { return dsStatusIs(e.getDS("agent"), s[0], s[1], s[2], s[3], s[4], s[5]) })
	}
	e.eventually("no pod of node c is left, not even terminating", func() bool {
		for _, p := range e.podList() {
			if p.Spec.NodeName == "c" {
				return false
			}
		}
		return true
	})
}

func TestDaemonSetUpdate(t *testing.T) {
	cases := []struct {
		name     string
		strategy appsv1.DaemonSetUpdateStrategy
		// While new pods do not turn ready: how many nodes have a new pod,
		// how many old pods are left, and how many nodes count as updated
		// (their oldest pod is new; -1: either, as a surge pod created in
		// the old pod's second may sort first).
		newPods, oldPods int
		updated          int32
	}{
		{"RollingUpdate, maxUnavailable 1", appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType}, 1, 2, 1},
		{"RollingUpdate, maxUnavailable 2", appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: wlPtr(intstr.FromInt32(2))}}, 2, 1, 2},
		{"RollingUpdate, maxUnavailable 34% (rounded up)", appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: wlPtr(intstr.FromString("34%"))}}, 2, 1, 2},
		{"RollingUpdate, maxSurge 1", appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: wlPtr(intstr.FromInt32(0)), MaxSurge: wlPtr(intstr.FromInt32(1))}}, 1, 3, -1},
		{"OnDelete", appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}, 0, 3, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newWLEnv(t, nil)
			kubelet := e.startKubelet()
			for _, n := range []string{"n1", "n2", "n3"} {
				e.node(n, nil)
			}
			ds := e.createDS(dsTestSet("agent", func(ds *appsv1.DaemonSet) { ds.Spec.UpdateStrategy = tc.strategy }))
			e.eventually("3 pods ready and available", func() bool { return dsStatusIs(e.getDS("agent"), 3, 3, 3, 3, 3, 0) })
			oldHash := dsRevisions(e.getDS("agent"))[0].Hash

			// New pods stay not ready: the update stops where its budget ends.
			kubelet.setReady(func(p *corev1.Pod) bool { return p.Spec.Containers[0].Image == "agent:1" })
			e.mutateDS("agent", func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.Containers[0].Image = "agent:2"
				ds.Annotations[dsChangeCause] = "agent 2"
			})
			count := func() (newPods, oldPods int) {
				for _, pods := range e.dsPods(ds) {
					for _, p := range pods {
						if p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == oldHash {
							oldPods++
						} else {
							newPods++
						}
					}
				}
				return newPods, oldPods
			}
			e.eventually(fmt.Sprintf("%d new pods and %d old ones", tc.newPods, tc.oldPods), func() bool {
				n, o := count()
				return n == tc.newPods && o == tc.oldPods
			})
			e.settleDS("agent")
			if n, o := count(); n != tc.newPods || o != tc.oldPods {
				t.Fatalf("the update went on to %d new and %d old pods while the new ones are not ready", n, o)
			}
			cur := e.getDS("agent")
			if cur.Annotations[appsv1.DeprecatedTemplateGeneration] != "2" {
				t.Fatalf("template generation %q, want 2", cur.Annotations[appsv1.DeprecatedTemplateGeneration])
			}
			if st := cur.Status; tc.updated >= 0 && st.UpdatedNumberScheduled != tc.updated || dsRolledOut(cur) {
				t.Errorf("status %+v: want %d updated and the rollout not done", st, tc.updated)
			}

			kubelet.setReady(nil)
			if tc.strategy.Type == appsv1.OnDeleteDaemonSetStrategyType {
				for _, pods := range e.dsPods(ds) {
					for _, p := range pods {
						if _, _, err := e.s.Delete(e.ctx, e.pods, "default", p.Name, metav1.DeleteOptions{}); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			// With a surge, a node whose new pod sorts first (same second,
			// smaller name) counts as updated before its old pod is deleted,
			// as upstream counts it: wait for both.
			e.eventually("rolled out: 3 new pods, ready and available, no old one", func() bool {
				cur := e.getDS("agent")
				n, o := count()
				return dsRolledOut(cur) && dsStatusIs(cur, 3, 3, 3, 3, 3, 0) && n == 3 && o == 0
			})
			for node, pods := range e.dsPods(ds) {
				if len(pods) != 1 || pods[0].Labels[dsPodGenerationLabel] != "2" || pods[0].Spec.Containers[0].Image != "agent:2" {
					t.Errorf("node %s: %d pods, the first labeled %v", node, len(pods), pods[0].Labels)
				}
			}
			hist := dsRevisions(e.getDS("agent"))
			if len(hist) != 2 || hist[0].Hash != oldHash || hist[1].Revision != 2 || hist[1].ChangeCause != "agent 2" {
				t.Errorf("revision history %+v, want the old template as 1 and the new as 2 with its change-cause", hist)
			}
		})
	}
}

func TestDaemonSetRevisionHistory(t *testing.T) {
	e := newWLEnv(t, nil)
	e.createDS(dsTestSet("agent", func(ds *appsv1.DaemonSet) { ds.Spec.RevisionHistoryLimit = wlPtr(int32(2)) }))
	hashes := map[string]string{} // by image
	steps := []struct {
		image string
		want  []string // revision:image, oldest first
	}{
		{"agent:1", []string{"1:agent:1"}},
		{"agent:2", []string{"1:agent:1", "2:agent:2"}},
		{"agent:3", []string{"1:agent:1", "2:agent:2", "3:agent:3"}},
		{"agent:1", []string{"2:agent:2", "3:agent:3", "4:agent:1"}}, // seen before: renumbered
		{"agent:4", []string{"3:agent:3", "4:agent:1", "5:agent:4"}}, // the limit keeps 2 old ones
	}
	for _, st := range steps {
		e.mutateDS("agent", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = st.image })
		cur := e.getDS("agent")
		hash := kit.TemplateHash(&cur.Spec.Template, cur.Status.CollisionCount)
		hashes[st.image] = hash
		e.eventually("revision of "+st.image+" recorded", func() bool {
			h := dsRevisions(e.getDS("agent"))
			return len(h) > 0 && h[len(h)-1].Hash == hash
		})
		var got []string
		for _, h := range dsRevisions(e.getDS("agent")) {
			image := "?"
			for img, hh := range hashes {
				if hh == h.Hash {
					image = img
				}
			}
			got = append(got, fmt.Sprintf("%d:%s", h.Revision, image))
		}
		if !slices.Equal(got, st.want) {
			t.Fatalf("after %s: history %v, want %v", st.image, got, st.want)
		}
	}
}

func TestDaemonSetReplacesFinishedPods(t *testing.T) {
	for _, phase := range []corev1.PodPhase{corev1.PodFailed, corev1.PodSucceeded} {
		t.Run(string(phase), func(t *testing.T) {
			e := newWLEnv(t, nil)
			e.startKubelet()
			e.node("n1", nil)
			e.node("n2", nil)
			ds := e.createDS(dsTestSet("agent", nil))
			e.eventually("2 pods ready", func() bool { return dsStatusIs(e.getDS("agent"), 2, 2, 2, 2, 2, 0) })
			// Twice: the second failure of the node's pod comes within the
			// node's backoff, and is replaced when it ends.
			for range 2 {
				first := e.dsPods(ds)["n1"][0]
				e.podStatus(first, func(p *corev1.Pod) {
					p.Status.Phase = phase
					setReady(p, false, time.Now())
				})
				e.eventually("the finished pod is replaced", func() bool {
					pods := e.dsPods(ds)["n1"]
					return len(pods) == 1 && pods[0].UID != first.UID && kit.PodReady(pods[0])
				})
				for _, p := range e.podList() {
					if p.UID == first.UID {
						t.Fatalf("the finished pod %s is still stored", p.Name)
					}
				}
			}
			if pods := e.dsPods(ds)["n2"]; len(pods) != 1 {
				t.Errorf("node n2 has %d pods", len(pods))
			}
		})
	}
}

func TestDaemonSetAdoptsAndReleases(t *testing.T) {
	e := newWLEnv(t, nil)
	e.startKubelet()
	e.node("n1", nil)
	e.node("n2", nil)
	orphan, err := e.s.Create(e.ctx, e.pods, "default", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stray", Labels: map[string]string{"app": "agent"}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "agent", Image: "agent:0"}}}}, registry.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ds := e.createDS(dsTestSet("agent", func(ds *appsv1.DaemonSet) { ds.Spec.UpdateStrategy.Type = appsv1.OnDeleteDaemonSetStrategyType }))
	e.eventually("the stray pod is adopted and n2 gets a pod", func() bool {
		byNode := e.dsPods(ds)
		return len(byNode["n1"]) == 1 && byNode["n1"][0].Name == "stray" && len(byNode["n2"]) == 1
	})
	e.settleDS("agent")
	if n := len(e.podList()); n != 2 {
		t.Fatalf("%d pods, want the adopted one and one for n2", n)
	}
	// Its labels changed, it is released, and n1 gets a pod of its own.
	if _, err := e.s.Mutate(e.ctx, e.pods, "default", "stray", "", func(o runtime.Object) error {
		o.(*corev1.Pod).Labels = map[string]string{"app": "other"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the stray pod is released and replaced", func() bool {
		byNode := e.dsPods(ds)
		return len(byNode["n1"]) == 1 && byNode["n1"][0].Name != "stray"
	})
	obj, err := e.s.Get(e.ctx, e.pods, "default", "stray", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the released pod: %v", err)
	}
	if refs := obj.(*corev1.Pod).OwnerReferences; len(refs) != 0 || obj.(*corev1.Pod).UID != orphan.(*corev1.Pod).UID {
		t.Errorf("released pod ownerReferences %+v", refs)
	}
}
