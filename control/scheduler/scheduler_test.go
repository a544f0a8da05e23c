package scheduler_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/isle-cluster/isle/control/events"
	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/control/scheduler"
	"github.com/isle-cluster/isle/raft/rafttest"
)

const wait = 15 * time.Second

type env struct {
	*registry.Store
	t                                         *testing.T
	ctx                                       context.Context
	pods, nodes, pvcs, pvs, classes, eventRes *registry.Resource
}

// newEnv starts a store with namespace "default"; start starts the Event
// broadcaster and the scheduler. There are no node agents: nodes are Node
// objects with a status.
func newEnv(t *testing.T) *env {
	t.Helper()
	c := rafttest.NewCluster(t, rafttest.Options{Size: 1})
	s := registry.New(registry.Config{Node: c.Node(c.IDs()[0]), Logger: slog.New(slog.DiscardHandler)})
	lookup := func(gvr schema.GroupVersionResource) *registry.Resource {
		r, ok := s.Resources().Lookup(gvr)
		if !ok {
			t.Fatalf("%s not served", gvr)
		}
		return r
	}
	core := corev1.SchemeGroupVersion
	e := &env{Store: s, t: t, ctx: t.Context(),
		pods: lookup(core.WithResource("pods")), nodes: lookup(core.WithResource("nodes")),
		pvcs: lookup(core.WithResource("persistentvolumeclaims")), pvs: lookup(core.WithResource("persistentvolumes")),
		classes: lookup(storagev1.SchemeGroupVersion.WithResource("storageclasses")), eventRes: lookup(core.WithResource("events"))}
	e.create(lookup(core.WithResource("namespaces")), "", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}})
	return e
}

// start runs the Event broadcaster and the scheduler (with short
// backoffs); both stop, and must return, when the test ends.
func (e *env) start() {
	t := e.t
	log := slog.New(slog.DiscardHandler)
	b := events.NewBroadcaster(events.Config{Store: e.Store, Logger: log})
	sched := scheduler.New(scheduler.Config{Store: e.Store, Events: b.Recorder(scheduler.Name), Logger: log,
		InitialBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, run := range []func(context.Context){b.Run, sched.Run} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(ctx)
		}()
	}
	t.Cleanup(func() {
		cancel()
		done := make(chan struct{})
		go func() {
			wg.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(wait):
			t.Errorf("the scheduler did not stop within %v of its context's end", wait)
		}
	})
}

func (e *env) resource(gvr schema.GroupVersionResource) *registry.Resource {
	e.t.Helper()
	r, ok := e.Resources().Lookup(gvr)
	if !ok {
		e.t.Fatalf("%s not served", gvr)
	}
	return r
}

func (e *env) create(r *registry.Resource, ns string, obj runtime.Object) runtime.Object {
	e.t.Helper()
	out, err := e.Create(e.ctx, r, ns, obj, registry.WriteOptions{})
	if err != nil {
		e.t.Fatalf("create %s: %v", r, err)
	}
	return out
}

// node creates a Ready arm64 Node with 4 CPUs, 8 GiB and room for 110
// pods, changed by the options.
func (e *env) node(name string, opts ...func(*corev1.Node)) {
	e.t.Helper()
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			corev1.LabelHostname: name, corev1.LabelArchStable: "arm64", corev1.LabelOSStable: "linux"}},
		Status: corev1.NodeStatus{
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"),
				corev1.ResourcePods: resource.MustParse("110")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"),
				corev1.ResourcePods: resource.MustParse("110")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}},
		},
	}
	for _, o := range opts {
		o(n)
	}
	e.create(e.nodes, "", n)
}

// updateNode changes a Node's spec and metadata (sub ""), or its status
// (sub "status").
func (e *env) updateNode(name, sub string, change func(*corev1.Node)) {
	e.t.Helper()
	if _, err := e.Mutate(e.ctx, e.nodes, "", name, sub, func(obj runtime.Object) error {
		change(obj.(*corev1.Node))
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
}

func allocatable(cpu, memory string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse(cpu)
		n.Status.Allocatable[corev1.ResourceMemory] = resource.MustParse(memory)
	}
}

func nodeLabel(key, value string) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Labels[key] = value }
}

func cordon(n *corev1.Node) { n.Spec.Unschedulable = true }

// pod creates a pod in "default", changed by the options.
func (e *env) pod(name string, opts ...func(*corev1.Pod)) *corev1.Pod {
	e.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	for _, o := range opts {
		o(p)
	}
	return e.create(e.pods, "default", p).(*corev1.Pod)
}

func cpu(q string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
	}
}

func memory(q string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(q)}
	}
}

func selector(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
	}
}

func claim(name string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: name,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}})
	}
}

func (e *env) get(name string) *corev1.Pod {
	e.t.Helper()
	obj, err := e.Get(e.ctx, e.pods, "default", name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return obj.(*corev1.Pod)
}

// bound waits for the pod to be bound and returns its node.
func (e *env) bound(name string) string {
	e.t.Helper()
	var node string
	eventually(e.t, "pod "+name+" is bound", func() bool {
		node = e.get(name).Spec.NodeName
		return node != ""
	})
	return node
}

// pending waits for the pod's PodScheduled condition to say message, and
// checks that it is not bound.
func (e *env) pending(name, message string) {
	e.t.Helper()
	var last string
	deadline := time.Now().Add(wait)
	for {
		p := e.get(name)
		if p.Spec.NodeName != "" {
			e.t.Fatalf("pod %s was bound to %s, want it pending: %s", name, p.Spec.NodeName, message)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled {
				last = fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
				if c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable && c.Message == message {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("pod %s: PodScheduled %q, want False/Unschedulable: %s", name, last, message)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// podEvents lists a pod's Events as kubectl describe lists them.
func (e *env) podEvents(p *corev1.Pod) []corev1.Event {
	e.t.Helper()
	list, err := e.List(e.ctx, e.eventRes, "default", metav1.ListOptions{FieldSelector: "involvedObject.name=" + p.Name +
		",involvedObject.namespace=default,involvedObject.kind=Pod,involvedObject.uid=" + string(p.UID)})
	if err != nil {
		e.t.Fatal(err)
	}
	return list.(*corev1.EventList).Items
}

// event waits for the pod to have an Event of the type, reason and message.
func (e *env) event(p *corev1.Pod, typ, reason, message string) corev1.Event {
	e.t.Helper()
	var found corev1.Event
	eventually(e.t, fmt.Sprintf("pod %s has a %s %s event %q", p.Name, typ, reason, message), func() bool {
		for _, ev := range e.podEvents(p) {
			if ev.Type == typ && ev.Reason == reason && ev.Message == message {
				found = ev
				return true
			}
		}
		return false
	})
	return found
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true within %v", what, wait)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// attempts returns scheduler_schedule_attempts_total of a result.
func attempts(t *testing.T, result string) float64 {
	t.Helper()
	metricsOnce.Do(func() { scheduler.RegisterMetrics(metricsReg) })
	families, err := metricsReg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "scheduler_schedule_attempts_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

var (
	metricsOnce sync.Once
	metricsReg  = prometheus.NewRegistry()
)

func TestSchedulerBindsPods(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"pi-1", "pi-2", "pi-3"} {
		e.node(n)
	}
	scheduled := attempts(t, "scheduled")
	e.start()
	var pods []*corev1.Pod
	for i := range 12 {
		pods = append(pods, e.pod(fmt.Sprintf("web-%d", i)))
	}
	perNode := map[string]int{}
	for _, p := range pods {
		node := e.bound(p.Name)
		perNode[node]++
		got := e.get(p.Name)
		if i := slices.IndexFunc(got.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue
		}); i < 0 {
			t.Errorf("pod %s bound without PodScheduled True: %+v", p.Name, got.Status.Conditions)
		}
		ev := e.event(p, corev1.EventTypeNormal, "Scheduled", "Successfully assigned default/"+p.Name+" to "+node)
		if ev.Source.Component != "default-scheduler" || ev.ReportingController != "default-scheduler" {
			t.Errorf("Scheduled event from %q/%q, want default-scheduler", ev.Source.Component, ev.ReportingController)
		}
	}
	eventually(t, "12 more scheduled attempts counted", func() bool { return attempts(t, "scheduled")-scheduled == 12 })
	// Least allocated: equal nodes take equal shares.
	for n, c := range perNode {
		if c != 4 {
			t.Errorf("node %s got %d of 12 pods (%v), want 4 each", n, c, perNode)
		}
	}
}

func TestSchedulerResourcesAcrossBinds(t *testing.T) {
	e := newEnv(t)
	e.node("a", allocatable("2", "8Gi"))
	e.node("b", allocatable("2", "8Gi"))
	e.start()
	// Created at once: the decisions follow each other faster than the
	// binds, which must not double-book a node.
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.pod(fmt.Sprintf("p-%d", i), cpu("1"))
		}()
	}
	wg.Wait()
	perNode := map[string][]string{}
	var waiting []string
	eventually(t, "4 pods bound and 2 unschedulable", func() bool {
		clear(perNode)
		waiting = nil
		for i := range 6 {
			name := fmt.Sprintf("p-%d", i)
			p := e.get(name)
			switch {
			case p.Spec.NodeName != "":
				perNode[p.Spec.NodeName] = append(perNode[p.Spec.NodeName], name)
			case slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Reason == corev1.PodReasonUnschedulable }):
				waiting = append(waiting, name)
			}
		}
		return len(waiting) == 2 && len(perNode["a"])+len(perNode["b"]) == 4
	})
	if len(perNode["a"]) != 2 || len(perNode["b"]) != 2 {
		t.Fatalf("pods per node %v, want 2 on each 2-CPU node", perNode)
	}
	for _, name := range waiting {
		e.pending(name, "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.")
		e.event(e.get(name), corev1.EventTypeWarning, "FailedScheduling", "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.")
	}

	// A new node: the waiting pods are tried again and fit there.
	e.node("c", allocatable("2", "8Gi"))
	for _, name := range waiting {
		if node := e.bound(name); node != "c" {
			t.Errorf("pod %s bound to %s, want the new node c", name, node)
		}
	}

	// A pod that fits nowhere waits until a pod is deleted.
	e.pod("late", cpu("1"))
	e.pending("late", "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.")
	victim := perNode["b"][0]
	zero := int64(0)
	if _, _, err := e.Delete(e.ctx, e.pods, "default", victim, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	if node := e.bound("late"); node != "b" {
		t.Errorf("pod late bound to %s, want b where a pod was deleted", node)
	}
}

func TestSchedulerTaintsSelectorsAffinity(t *testing.T) {
	e := newEnv(t)
	e.node("plain")
	e.node("tainted", func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}
	})
	e.node("ssd", nodeLabel("disk", "ssd"))
	e.node("cordoned", cordon)
	e.start()

	tolerateDB := func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "db", Effect: corev1.TaintEffectNoSchedule}}
	}
	hosts := func(names ...string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: names}}}}}}}
		}
	}
	preferSSD := func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
			{Weight: 50, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "disk", Operator: corev1.NodeSelectorOpIn, Values: []string{"ssd"}}}}}}}}
	}
	tests := []struct {
		name    string
		opts    []func(*corev1.Pod)
		allowed []string
	}{
		{"plain", nil, []string{"plain", "ssd"}},
		{"tolerates-the-taint", []func(*corev1.Pod){tolerateDB, hosts("tainted")}, []string{"tainted"}},
		{"selects-ssd", []func(*corev1.Pod){selector("disk", "ssd")}, []string{"ssd"}},
		{"requires-hosts-one-tainted-one-cordoned", []func(*corev1.Pod){hosts("tainted", "ssd", "cordoned")}, []string{"ssd"}},
		{"prefers-ssd", []func(*corev1.Pod){preferSSD}, []string{"ssd"}},
	}
	for _, tc := range tests {
		for i := range 3 {
			name := fmt.Sprintf("%s-%d", tc.name, i)
			e.pod(name, tc.opts...)
			if node := e.bound(name); !slices.Contains(tc.allowed, node) {
				t.Errorf("pod %s bound to %s, want one of %v", name, node, tc.allowed)
			}
		}
	}

	e.pod("nvme", selector("disk", "nvme"))
	e.pending("nvme", "0/4 nodes are available: 1 node(s) had untolerated taint {dedicated: db}, 1 node(s) were unschedulable, "+
		"2 node(s) didn't match Pod's node affinity/selector. preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling.")
	// A node gets the label: the pod fits there now.
	e.updateNode("plain", "", func(n *corev1.Node) { n.Labels["disk"] = "nvme" })
	if node := e.bound("nvme"); node != "plain" {
		t.Errorf("pod nvme bound to %s, want plain", node)
	}
}

func TestSchedulerMixedArch(t *testing.T) {
	e := newEnv(t)
	armNode := nodeLabel(corev1.LabelArchStable, "arm")
	e.node("pi4-1")
	e.node("pi4-2")
	e.node("pi2-1", armNode)
	e.node("pi2-2", armNode)
	e.start()
	arm64 := []string{"pi4-1", "pi4-2"}
	arm := []string{"pi2-1", "pi2-2"}

	archAnnotation := func(v string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Annotations = map[string]string{scheduler.ArchAnnotation: v} }
	}
	requireArch := func(archs ...string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: archs}}}}}}}
		}
	}
	tests := []struct {
		name    string
		opt     func(*corev1.Pod)
		allowed []string
	}{
		{"selector-arm64", selector(corev1.LabelArchStable, "arm64", corev1.LabelOSStable, "linux"), arm64},
		{"annotation-arm64", archAnnotation("arm64"), arm64},
		{"affinity-arm", requireArch("arm"), arm},
		{"annotation-arm", archAnnotation("arm"), arm},
	}
	for _, tc := range tests {
		for i := range 8 {
			e.pod(fmt.Sprintf("%s-%d", tc.name, i), tc.opt)
		}
	}
	for _, tc := range tests {
		for i := range 8 {
			name := fmt.Sprintf("%s-%d", tc.name, i)
			if node := e.bound(name); !slices.Contains(tc.allowed, node) {
				t.Errorf("pod %s bound to %s, want one of %v", name, node, tc.allowed)
			}
		}
	}
	// Images for arm only, a selector for arm64: nowhere.
	e.pod("contradiction", archAnnotation("arm"), selector(corev1.LabelArchStable, "arm64"))
	e.pending("contradiction", "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector. "+
		"preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling.")
}

func TestSchedulerUnschedulableMessage(t *testing.T) {
	e := newEnv(t)
	e.start()
	e.pod("early", memory("2Gi"))
	e.pending("early", "no nodes available to schedule pods")

	for _, n := range []string{"pi-1", "pi-2", "pi-3"} {
		e.node(n, allocatable("4", "1Gi"))
	}
	// Two boards stopped reporting: their readiness is unknown.
	for _, n := range []string{"pi-4", "pi-5"} {
		e.node(n, func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionUnknown })
	}
	const want = "0/5 nodes are available: 2 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, 3 Insufficient memory. " +
		"preemption: 0/5 nodes are available: 2 Preemption is not helpful for scheduling, 3 No preemption victims found for incoming pod."
	e.pending("early", want)
	p := e.get("early")
	ev := e.event(p, corev1.EventTypeWarning, "FailedScheduling", want)
	if ev.Source.Component != scheduler.Name {
		t.Errorf("event source %q, want %q", ev.Source.Component, scheduler.Name)
	}
	i := slices.IndexFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodScheduled })
	if c := p.Status.Conditions[i]; c.Status != corev1.ConditionFalse || c.LastTransitionTime.IsZero() {
		t.Errorf("PodScheduled %+v, want False with a transition time", c)
	}

	// A board comes back: the pod fits there.
	e.updateNode("pi-4", "status", func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionTrue })
	if node := e.bound("early"); node != "pi-4" {
		t.Errorf("bound to %s, want pi-4", node)
	}
}

func TestSchedulerVolumes(t *testing.T) {
	e := newEnv(t)
	e.node("pi-1")
	e.node("pi-2")
	e.node("pi-3", cordon)
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	e.create(e.classes, "", &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local"}, Provisioner: "isle.dev/local-path", VolumeBindingMode: &wffc})
	e.create(e.classes, "", &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "nfs"}, Provisioner: "example.com/nfs"})
	e.start()
	pvc := func(name, class, volume string) {
		e.t.Helper()
		e.create(e.pvcs, "default", &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				StorageClassName: &class, VolumeName: volume}})
	}
	localPV := func(name, node string) {
		e.t.Helper()
		e.create(e.pvs, "", &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/var/lib/isle/volumes/" + name}},
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}}})
	}

	// Missing claim, then unbound immediate
	{
		e.pod("no-claim", claim("later"))
		e.pending("no-claim", `0/3 nodes are available: persistentvolumeclaim "later" not found. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.`)
		pvc("later", "nfs", "")
		e.pending("no-claim", "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
	}

	// Bound to a volume on one node
	{
		localPV("disk-1", "pi-1")
		pvc("data-1", "local", "disk-1")
		for i := range 3 {
			name := fmt.Sprintf("uses-disk-1-%d", i)
			e.pod(name, claim("data-1"))
			if node := e.bound(name); node != "pi-1" {
				t.Errorf("pod %s bound to %s, want pi-1 where its volume is", name, node)
			}
		}
	}

	// The volume's node is cordoned
	{
		localPV("disk-3", "pi-3")
		pvc("data-3", "local", "disk-3")
		e.pod("stuck", claim("data-3"))
		e.pending("stuck", "0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) had volume node affinity conflict. "+
			"preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
		e.updateNode("pi-3", "", func(n *corev1.Node) { n.Spec.Unschedulable = false })
		if node := e.bound("stuck"); node != "pi-3" {
			t.Errorf("bound to %s after uncordon, want pi-3", node)
		}
	}

	// Bound to a volume that does not exist
	{
		pvc("ghost", "local", "no-such-volume")
		e.pod("haunted", claim("ghost"))
		e.pending("haunted", "0/3 nodes are available: 3 node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s). "+
			"preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
	}

	// Wait for first consumer
	{
		pvc("scratch", "local", "")
		e.pod("first", claim("scratch"))
		node := e.bound("first")
		obj, err := e.Get(e.ctx, e.pvcs, "default", "scratch", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := obj.(*corev1.PersistentVolumeClaim).Annotations["volume.kubernetes.io/selected-node"]; got != node {
			t.Fatalf("claim's selected-node %q, want %q where its first pod went", got, node)
		}
		// Later pods of the claim follow it, even where another node would score better.
		for i := range 3 {
			name := fmt.Sprintf("follower-%d", i)
			e.pod(name, claim("scratch"))
			if got := e.bound(name); got != node {
				t.Errorf("pod %s bound to %s, want %s, the claim's node", name, got, node)
			}
		}
	}
}

func TestSchedulerSpreadsOwnersPods(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"a", "b", "c"} {
		e.node(n)
	}
	e.start()
	yes := true
	owner := func(uid types.UID) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: uid, Controller: &yes}}
		}
	}
	// Another owner's pods crowd node a; spreading is per owner.
	for i := range 3 {
		e.pod(fmt.Sprintf("other-%d", i), owner("other"), selector(corev1.LabelHostname, "a"))
	}
	for i := range 9 {
		e.pod(fmt.Sprintf("web-%d", i), owner("web"))
	}
	perNode := map[string]int{}
	for i := range 9 {
		perNode[e.bound(fmt.Sprintf("web-%d", i))]++
	}
	if want := map[string]int{"a": 3, "b": 3, "c": 3}; !maps.Equal(perNode, want) {
		t.Errorf("replicas per node %v, want %v", perNode, want)
	}
}

func TestSchedulerIgnoresOtherSchedulersAndGates(t *testing.T) {
	e := newEnv(t)
	e.node("pi-1")
	e.start()
	e.pod("other", func(p *corev1.Pod) { p.Spec.SchedulerName = "my-scheduler" })
	e.pod("gated", func(p *corev1.Pod) { p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}} })
	// The scheduler sees pods in the order they were written: once a later
	// one is bound, it has passed over these two.
	e.pod("mine")
	e.bound("mine")
	for _, name := range []string{"other", "gated"} {
		if p := e.get(name); p.Spec.NodeName != "" || len(p.Status.Conditions) > 0 {
			t.Errorf("pod %s: node %q conditions %+v, want it untouched", name, p.Spec.NodeName, p.Status.Conditions)
		}
	}
	// The gate is removed: the pod is scheduled.
	if _, err := e.Mutate(e.ctx, e.pods, "default", "gated", "", func(obj runtime.Object) error {
		obj.(*corev1.Pod).Spec.SchedulingGates = nil
		return nil
	}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	e.bound("gated")
}

func TestSchedulerPodAffinity(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"a", "b", "c"} {
		e.node(n)
	}
	e.start()
	labelled := func(app string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Labels = map[string]string{"app": app} }
	}
	sel := func(app string) []corev1.PodAffinityTerm {
		return []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
	}
	// Three replicas that must not share a board take the three boards;
	// a fourth fits none.
	antiWeb := func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: sel("web")}}
	}
	nodes := map[string]bool{}
	for i := range 3 {
		e.pod(fmt.Sprintf("web-%d", i), labelled("web"), antiWeb)
	}
	for i := range 3 {
		nodes[e.bound(fmt.Sprintf("web-%d", i))] = true
	}
	if len(nodes) != 3 {
		t.Errorf("three replicas on nodes %v, want three nodes", slices.Collect(maps.Keys(nodes)))
	}
	e.pod("web-3", labelled("web"), antiWeb)
	e.pending("web-3", "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules. "+
		"preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.")

	// A pod that must be beside a db pod waits for one, and is placed
	// beside it as soon as it is placed.
	e.pod("cache", labelled("cache"), func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: sel("db")}}
	})
	e.pending("cache", "0/3 nodes are available: 3 node(s) didn't match pod affinity rules. "+
		"preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
	e.pod("db", labelled("db"), selector(corev1.LabelHostname, "b"))
	if got := e.bound("cache"); got != "b" {
		t.Errorf("cache pod on %s, want b beside the db pod", got)
	}
}

func TestSchedulerPreemption(t *testing.T) {
	e := newEnv(t)
	classes := e.resource(schedulingv1.SchemeGroupVersion.WithResource("priorityclasses"))
	for name, value := range map[string]int32{"low": 10, "high": 1000} {
		e.create(classes, "", &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value})
	}
	never := corev1.PreemptNever
	e.create(classes, "", &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high-never"}, Value: 1000, PreemptionPolicy: &never})
	for _, n := range []string{"a", "b"} {
		e.node(n, allocatable("2", "8Gi"))
	}
	e.start()
	class := func(name string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Spec.PriorityClassName = name }
	}
	app := func(v string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Labels = map[string]string{"app": v} }
	}
	e.pod("guarded", class("low"), app("guarded"), cpu("1500m"), selector(corev1.LabelHostname, "a"))
	e.pod("spare", class("low"), app("spare"), cpu("1500m"), selector(corev1.LabelHostname, "b"))
	e.bound("guarded")
	e.bound("spare")
	// A budget allows no disruption of the guarded pod.
	pdbs := e.resource(policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets"))
	one := intstr.FromInt32(1)
	e.create(pdbs, "default", &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "guarded"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}}})
	if _, err := e.Mutate(e.ctx, pdbs, "default", "guarded", "status", func(obj runtime.Object) error {
		obj.(*policyv1.PodDisruptionBudget).Status = policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 1}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// A pod that may not preempt waits, and says why.
	e.pod("polite", class("high-never"), cpu("1"))
	e.pending("polite", "0/2 nodes are available: 2 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never.")
	if _, _, err := e.Delete(e.ctx, e.pods, "default", "polite", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// A pod of higher priority takes the place of the pod no budget
	// guards, and is nominated to its node.
	urgent := e.pod("urgent", class("high"), cpu("1"))
	var victim *corev1.Pod
	eventually(t, "the spare pod is preempted", func() bool {
		victim = e.get("spare")
		return victim.DeletionTimestamp != nil
	})
	if c := findCondition(victim.Status.Conditions, corev1.DisruptionTarget); c == nil || c.Status != corev1.ConditionTrue ||
		c.Reason != corev1.PodReasonPreemptionByScheduler || c.Message != "default-scheduler: preempting to accommodate a higher priority pod" {
		t.Errorf("victim's DisruptionTarget condition %+v", c)
	}
	e.event(victim, corev1.EventTypeNormal, "Preempted", fmt.Sprintf("Preempted by pod %s on node b", urgent.UID))
	if p := e.get("guarded"); p.DeletionTimestamp != nil {
		t.Error("the pod the budget guards was preempted")
	}
	eventually(t, "urgent is nominated to b", func() bool { return e.get("urgent").Status.NominatedNodeName == "b" })
	e.pending("urgent", "0/2 nodes are available: 2 Insufficient cpu.")

	// No second preemption while the victim terminates.
	if p := e.get("guarded"); p.DeletionTimestamp != nil {
		t.Error("a second pod was preempted while the first terminates")
	}
	// The board confirms the victim's end: the pod takes its place.
	zero := int64(0)
	if _, _, err := e.Delete(e.ctx, e.pods, "default", "spare", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	if got := e.bound("urgent"); got != "b" {
		t.Errorf("urgent bound to %s, want b", got)
	}
}

func findCondition(cs []corev1.PodCondition, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}
