package daemonset

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/isle-cluster/isle/control/controllers/internal/ctltest"
	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/registry"
)

// The DaemonSet tests run the controller on a ctltest.Workload; their
// helpers are prefixed ds.

type dsEnv struct {
	*ctltest.Workload
	dsRes *registry.Resource
}

// newDSEnv starts the DaemonSet controller, reporting its syncs, on a
// Workload.
func newDSEnv(t *testing.T) *dsEnv {
	t.Helper()
	w := ctltest.NewWorkload(t)
	e := &dsEnv{Workload: w, dsRes: kit.MustLookup(w.Store, appsv1.SchemeGroupVersion.WithResource("daemonsets"))}
	c := New(w.Store, w.Log, w.Events.Recorder("daemonset-controller"))
	c.synced = w.Synced
	w.Run(t, c)
	return e
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

func (e *dsEnv) createDS(ds *appsv1.DaemonSet) *appsv1.DaemonSet {
	e.T.Helper()
	out, err := e.Store.Create(e.Ctx, e.dsRes, "default", ds, registry.WriteOptions{})
	if err != nil {
		e.T.Fatalf("create DaemonSet %s: %v", ds.Name, err)
	}
	return out.(*appsv1.DaemonSet)
}

func (e *dsEnv) getDS(name string) *appsv1.DaemonSet {
	e.T.Helper()
	obj, err := e.Store.Get(e.Ctx, e.dsRes, "default", name, metav1.GetOptions{})
	if err != nil {
		e.T.Fatalf("get DaemonSet %s: %v", name, err)
	}
	return obj.(*appsv1.DaemonSet)
}

func (e *dsEnv) mutateDS(name string, change func(*appsv1.DaemonSet)) {
	e.T.Helper()
	if _, err := e.Store.Mutate(e.Ctx, e.dsRes, "default", name, "", func(o runtime.Object) error {
		change(o.(*appsv1.DaemonSet))
		return nil
	}); err != nil {
		e.T.Fatalf("update DaemonSet %s: %v", name, err)
	}
}

func (e *dsEnv) settleDS(name string) {
	e.T.Helper()
	e.Settle("default/"+name, e.dsRes, name)
}

// dsPods returns the live (not deleting) pods ds controls, by node.
func (e *dsEnv) dsPods(ds *appsv1.DaemonSet) map[string][]*corev1.Pod {
	e.T.Helper()
	out := map[string][]*corev1.Pod{}
	for _, p := range e.PodList() {
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

// dsRevision is one of a DaemonSet's ControllerRevisions as the tests
// look at it.
type dsRevision struct {
	Revision          int64
	Name, ChangeCause string
	Hash              string // its label, the template hash its pods carry
}

// dsRevisions lists the ControllerRevisions of ds, oldest first.
func (e *dsEnv) dsRevisions(ds *appsv1.DaemonSet) []dsRevision {
	e.T.Helper()
	list, err := e.Store.List(e.Ctx, kit.MustLookup(e.Store, appsv1.SchemeGroupVersion.WithResource("controllerrevisions")), "default", metav1.ListOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	var out []dsRevision
	for _, r := range list.(*appsv1.ControllerRevisionList).Items {
		if ref := metav1.GetControllerOf(&r); ref != nil && ref.UID == ds.UID {
			out = append(out, dsRevision{Revision: r.Revision, Name: r.Name, ChangeCause: r.Annotations["kubernetes.io/change-cause"],
				Hash: r.Labels[appsv1.ControllerRevisionHashLabelKey]})
		}
	}
	slices.SortFunc(out, func(a, b dsRevision) int { return int(a.Revision - b.Revision) })
	return out
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
			e := newDSEnv(t)
			e.StartKubelet()
			for _, n := range tc.nodes {
				e.Node(n.name, n.labels, n.taints...)
			}
			ds := e.createDS(dsTestSet("agent", tc.change))
			n := int32(len(tc.want))
			e.Eventually(fmt.Sprintf("status: %d desired, all ready and available", n), func() bool {
				return dsStatusIs(e.getDS("agent"), n, n, n, n, n, 0)
			})
			e.settleDS("agent")
			ds = e.getDS("agent")
			hist := e.dsRevisions(ds)
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
				e.Eventually("Event SuccessfulCreate for pod "+p.Name, func() bool {
					return e.HasEvent("DaemonSet", "agent", corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: "+p.Name)
				})
			}
		})
	}
}

func TestDaemonSetFollowsNodes(t *testing.T) {
	e := newDSEnv(t)
	kubelet := e.StartKubelet()
	edge := map[string]string{"pool": "edge"}
	e.Node("a", edge)
	e.Node("b", edge)
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
		{"a node joins", func() { e.Node("c", edge) }, []string{"a", "b", "c"}, [6]int32{3, 3, 3, 3, 3, 0}},
		{"a node that no longer matches loses its pod", func() { e.MutateNode("b", func(n *corev1.Node) { n.Labels["pool"] = "core" }) },
			[]string{"a", "c"}, [6]int32{2, 2, 2, 2, 2, 0}},
		{"an untolerated NoSchedule taint keeps the running pod, misscheduled",
			func() {
				e.MutateNode("a", func(n *corev1.Node) {
					n.Spec.Taints = []corev1.Taint{dsTaint("maintenance", "", corev1.TaintEffectNoSchedule)}
				})
			},
			[]string{"a", "c"}, [6]int32{1, 1, 1, 1, 1, 1}},
		{"an untolerated NoExecute taint evicts it",
			func() {
				e.MutateNode("a", func(n *corev1.Node) {
					n.Spec.Taints = []corev1.Taint{dsTaint("maintenance", "", corev1.TaintEffectNoExecute)}
				})
			},
			[]string{"c"}, [6]int32{1, 1, 1, 1, 1, 0}},
		{"the taint goes, the pod comes back", func() { e.MutateNode("a", func(n *corev1.Node) { n.Spec.Taints = nil }) },
			[]string{"a", "c"}, [6]int32{2, 2, 2, 2, 2, 0}},
		// No node agent stops the pod of a node that is gone: the
		// controller removes it at once.
		{"a node is deleted", func() {
			kubelet.Stop()
			if _, _, err := e.Store.Delete(e.Ctx, e.Nodes, "", "c", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, []string{"a"}, [6]int32{1, 1, 1, 1, 1, 0}},
	}
	for _, st := range steps {
		st.do()
		e.Eventually(st.name+": pods on "+fmt.Sprint(st.nodes), onNodes(st.nodes...))
		s := st.status
		e.Eventually(st.name+": status "+fmt.Sprint(s), func() bool { return dsStatusIs(e.getDS("agent"), s[0], s[1], s[2], s[3], s[4], s[5]) })
	}
	e.Eventually("no pod of node c is left, not even terminating", func() bool {
		for _, p := range e.PodList() {
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
			RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ctltest.Ptr(intstr.FromInt32(2))}}, 2, 1, 2},
		{"RollingUpdate, maxUnavailable 34% (rounded up)", appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ctltest.Ptr(intstr.FromString("34%"))}}, 2, 1, 2},
		{"RollingUpdate, maxSurge 1", appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ctltest.Ptr(intstr.FromInt32(0)), MaxSurge: ctltest.Ptr(intstr.FromInt32(1))}}, 1, 3, -1},
		{"OnDelete", appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}, 0, 3, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newDSEnv(t)
			kubelet := e.StartKubelet()
			for _, n := range []string{"n1", "n2", "n3"} {
				e.Node(n, nil)
			}
			ds := e.createDS(dsTestSet("agent", func(ds *appsv1.DaemonSet) { ds.Spec.UpdateStrategy = tc.strategy }))
			e.Eventually("3 pods ready and available", func() bool { return dsStatusIs(e.getDS("agent"), 3, 3, 3, 3, 3, 0) })
			oldHash := e.dsRevisions(e.getDS("agent"))[0].Hash

			// New pods stay not ready: the update stops where its budget ends.
			kubelet.SetReady(func(p *corev1.Pod) bool { return p.Spec.Containers[0].Image == "agent:1" })
			e.mutateDS("agent", func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.Containers[0].Image = "agent:2"
				ds.Annotations["kubernetes.io/change-cause"] = "agent 2"
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
			e.Eventually(fmt.Sprintf("%d new pods and %d old ones", tc.newPods, tc.oldPods), func() bool {
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

			kubelet.SetReady(nil)
			if tc.strategy.Type == appsv1.OnDeleteDaemonSetStrategyType {
				for _, pods := range e.dsPods(ds) {
					for _, p := range pods {
						if _, _, err := e.Store.Delete(e.Ctx, e.Pods, "default", p.Name, metav1.DeleteOptions{}); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			// With a surge, a node whose new pod sorts first (same second,
			// smaller name) counts as updated before its old pod is deleted,
			// as upstream counts it: wait for both.
			e.Eventually("rolled out: 3 new pods, ready and available, no old one", func() bool {
				cur := e.getDS("agent")
				n, o := count()
				return dsRolledOut(cur) && dsStatusIs(cur, 3, 3, 3, 3, 3, 0) && n == 3 && o == 0
			})
			for node, pods := range e.dsPods(ds) {
				if len(pods) != 1 || pods[0].Labels[dsPodGenerationLabel] != "2" || pods[0].Spec.Containers[0].Image != "agent:2" {
					t.Errorf("node %s: %d pods, the first labeled %v", node, len(pods), pods[0].Labels)
				}
			}
			hist := e.dsRevisions(e.getDS("agent"))
			if len(hist) != 2 || hist[0].Hash != oldHash || hist[1].Revision != 2 || hist[1].ChangeCause != "agent 2" {
				t.Errorf("revision history %+v, want the old template as 1 and the new as 2 with its change-cause", hist)
			}
		})
	}
}

func TestDaemonSetRevisionHistory(t *testing.T) {
	e := newDSEnv(t)
	e.createDS(dsTestSet("agent", func(ds *appsv1.DaemonSet) { ds.Spec.RevisionHistoryLimit = ctltest.Ptr(int32(2)) }))
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
		// The newest revision is made, then the oldest beyond the limit
		// deleted: the history settles on want.
		var got []string
		e.Eventually(fmt.Sprintf("after %s: history %v", st.image, st.want), func() bool {
			got = got[:0]
			h := e.dsRevisions(e.getDS("agent"))
			for _, r := range h {
				image := "?"
				for img, hh := range hashes {
					if hh == r.Hash {
						image = img
					}
				}
				got = append(got, fmt.Sprintf("%d:%s", r.Revision, image))
			}
			return len(h) > 0 && h[len(h)-1].Hash == hash && slices.Equal(got, st.want)
		})
	}
}

func TestDaemonSetReplacesFinishedPods(t *testing.T) {
	for _, phase := range []corev1.PodPhase{corev1.PodFailed, corev1.PodSucceeded} {
		t.Run(string(phase), func(t *testing.T) {
			e := newDSEnv(t)
			e.StartKubelet()
			e.Node("n1", nil)
			e.Node("n2", nil)
			ds := e.createDS(dsTestSet("agent", nil))
			e.Eventually("2 pods ready", func() bool { return dsStatusIs(e.getDS("agent"), 2, 2, 2, 2, 2, 0) })
			// Twice: the second failure of the node's pod comes within the
			// node's backoff, and is replaced when it ends.
			for range 2 {
				first := e.dsPods(ds)["n1"][0]
				e.PodStatus(first, func(p *corev1.Pod) {
					p.Status.Phase = phase
					ctltest.SetReady(p, false, time.Now())
				})
				e.Eventually("the finished pod is replaced", func() bool {
					pods := e.dsPods(ds)["n1"]
					return len(pods) == 1 && pods[0].UID != first.UID && kit.PodReady(pods[0])
				})
				for _, p := range e.PodList() {
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
	e := newDSEnv(t)
	e.StartKubelet()
	e.Node("n1", nil)
	e.Node("n2", nil)
	orphan, err := e.Store.Create(e.Ctx, e.Pods, "default", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stray", Labels: map[string]string{"app": "agent"}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "agent", Image: "agent:0"}}}}, registry.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ds := e.createDS(dsTestSet("agent", func(ds *appsv1.DaemonSet) { ds.Spec.UpdateStrategy.Type = appsv1.OnDeleteDaemonSetStrategyType }))
	e.Eventually("the stray pod is adopted and n2 gets a pod", func() bool {
		byNode := e.dsPods(ds)
		return len(byNode["n1"]) == 1 && byNode["n1"][0].Name == "stray" && len(byNode["n2"]) == 1
	})
	e.settleDS("agent")
	if n := len(e.PodList()); n != 2 {
		t.Fatalf("%d pods, want the adopted one and one for n2", n)
	}
	// Its labels changed, it is released, and n1 gets a pod of its own.
	if _, err := e.Store.Mutate(e.Ctx, e.Pods, "default", "stray", "", func(o runtime.Object) error {
		o.(*corev1.Pod).Labels = map[string]string{"app": "other"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.Eventually("the stray pod is released and replaced", func() bool {
		byNode := e.dsPods(ds)
		return len(byNode["n1"]) == 1 && byNode["n1"][0].Name != "stray"
	})
	obj, err := e.Store.Get(e.Ctx, e.Pods, "default", "stray", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the released pod: %v", err)
	}
	if refs := obj.(*corev1.Pod).OwnerReferences; len(refs) != 0 || obj.(*corev1.Pod).UID != orphan.(*corev1.Pod).UID {
		t.Errorf("released pod ownerReferences %+v", refs)
	}
}
