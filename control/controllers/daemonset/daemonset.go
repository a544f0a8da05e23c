// Package daemonset is the DaemonSet controller.
package daemonset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	schedulinghelper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/registry"
)

// Controller runs one pod of every apps/v1 DaemonSet on each node that
// should run it, as Kubernetes' DaemonSet controller:
//   - a node should run the pod if the template's nodeName (if set),
//     nodeSelector and required node affinity match it and the template's
//     tolerations, plus those Kubernetes gives every daemon pod (dsTolerations),
//     tolerate its NoSchedule and NoExecute taints; a pod already there may
//     stay while only NoSchedule taints are untolerated. Nodes that appear
//     get a pod; pods on nodes that no longer should run one are deleted;
//   - pods are created bound to their node. Like Kubernetes, the template's
//     required node affinity is replaced by a matchFields term on
//     metadata.name; unlike Kubernetes, spec.nodeName is set too, so that a
//     daemon pod never waits for isle's scheduler (which places only pods
//     without a node). What the scheduler would have checked beyond that
//     term, fitting resources and host ports, is left to the node agent,
//     which fails a pod it cannot admit; failed pods are deleted and
//     replaced, backing off per node from 1s to 15 min;
//   - pods carry the controller-revision-hash label (the template's hash)
//     and pod-template-generation (the DaemonSet's template generation,
//     which the registry keeps in deprecated.daemonset.template.generation);
//     a pod matching either is up to date;
//   - RollingUpdate replaces old pods within maxUnavailable (delete, then
//     create) or maxSurge (create, then delete the old pod once the new one
//     is available); OnDelete creates new pods only where pods are gone;
//   - the status counts the oldest pod of each node (desired, current,
//     ready, available, up to date, misscheduled, unavailable) with
//     observedGeneration, as `kubectl get ds` and `kubectl rollout status`
//     read them.
//
// The DaemonSet's history is its ControllerRevisions (package history),
// named by the template hash its pods carry, so that `kubectl rollout
// history ds` and `kubectl rollout undo ds` work.
type Controller struct {
	store *registry.Store
	log   *slog.Logger
	// now is the clock of availability (minReadySeconds) and of the failed
	// pod backoff. Nil means time.Now.
	now func() time.Time
	// events records the Events of Kubernetes' daemonset-controller; nil
	// records none.
	events kit.EventRecorder
	// synced, if set, is called after each sync with the DaemonSet's key
	// and the store revision when the sync began (for tests).
	synced func(key string, rev int64)
}

// New returns the DaemonSet controller, recording its Events with rec.
func New(store *registry.Store, log *slog.Logger, rec kit.EventRecorder) *Controller {
	return &Controller{store: store, log: log, events: rec}
}

// Name is the controller's name in the table.
func (c *Controller) Name() string { return "daemonset" }

const (
	dsResync    = 30 * time.Second
	dsWorkers   = 2
	dsRetryBase = 20 * time.Millisecond
	dsRetryMax  = time.Minute
	// dsBurst caps the pods created or deleted in one sync, as Kubernetes'
	// BurstReplicas for DaemonSets.
	dsBurst = 250
	// A node whose daemon pod keeps failing gets a new one after a backoff
	// doubling from dsFailedBackoffBase to dsFailedBackoffMax.
	dsFailedBackoffBase = time.Second
	dsFailedBackoffMax  = 15 * time.Minute
	// dsRevisionsAnnotation held a DaemonSet's revision history before
	// ControllerRevisions: it is removed where found.
	dsRevisionsAnnotation = "isle.dev/daemonset-revisions"
	// dsPodGenerationLabel is Kubernetes' DaemonSetTemplateGenerationKey.
	dsPodGenerationLabel = "pod-template-generation"
	dsMsgSelectingAll    = "This daemon set is selecting all pods. A non-empty selector is required."
)

var dsKind = appsv1.SchemeGroupVersion.WithKind("DaemonSet")

// dsTolerations are the tolerations Kubernetes adds to every daemon pod:
// it keeps running on nodes that are not ready or unreachable, and is
// placed on nodes under pressure or cordoned.
var dsTolerations = []corev1.Toleration{
	{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
}

// dsHostNetworkToleration is added for pods on the host network, which do
// not need the node's pod network.
var dsHostNetworkToleration = corev1.Toleration{Key: corev1.TaintNodeNetworkUnavailable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}

// dsRun is the state of one Run (one term of leadership).
type dsRun struct {
	*Controller
	now     func() time.Time
	helpLog logr.Logger // for component-helpers, into the same slog handler
	dsRes   *registry.Resource
	podRes  *registry.Resource
	nodeRes *registry.Resource
	revRes  *registry.Resource
	queue   *kit.Queue

	mu      sync.Mutex
	backoff map[string]dsBackoff // failed pods, by DaemonSet key and node
}

type dsBackoff struct {
	delay time.Duration
	at    time.Time
}

// Run reconciles until ctx ends (when this member stops leading).
func (c *Controller) Run(ctx context.Context) {
	r := &dsRun{Controller: c, now: c.now, helpLog: logr.FromSlogHandler(c.log.Handler()),
		dsRes:   kit.MustLookup(c.store, appsv1.SchemeGroupVersion.WithResource("daemonsets")),
		podRes:  kit.MustLookup(c.store, corev1.SchemeGroupVersion.WithResource("pods")),
		nodeRes: kit.MustLookup(c.store, corev1.SchemeGroupVersion.WithResource("nodes")),
		revRes:  kit.MustLookup(c.store, appsv1.SchemeGroupVersion.WithResource("controllerrevisions")),
		queue:   kit.NewQueue(dsRetryBase, dsRetryMax),
		backoff: map[string]dsBackoff{}}
	if r.now == nil {
		r.now = time.Now
	}
	var wg sync.WaitGroup
	wg.Go(func() { r.watch(ctx) })
	kit.RunWorkers(ctx, dsWorkers, r.queue, func(key string) { r.work(ctx, key) })
	wg.Wait()
}

// watch follows DaemonSets, nodes and pods and queues the DaemonSets they
// concern, until ctx ends. A watch that ends is opened again.
func (r *dsRun) watch(ctx context.Context) {
	sets := kit.NewCache[*appsv1.DaemonSet]()
	nodes := kit.NewCache[*corev1.Node]()
	queueAll := func() {
		for _, key := range sets.Keys() {
			r.queue.Add(key)
		}
	}
	loop := kit.Loop{Store: r.store, Log: r.log, Name: "daemonset controller", Resync: queueAll, ResyncEvery: dsResync}
	loop.Run(ctx,
		sets.Watch(r.dsRes, nil, func(typ watch.EventType, _, ds *appsv1.DaemonSet) {
			key := kit.Key(ds)
			if typ == watch.Deleted {
				r.forgetBackoff(key)
				return
			}
			r.queue.Add(key)
		}),
		// Nodes deleted while the watch was away are noticed by a sync of
		// every DaemonSet.
		nodes.Watch(r.nodeRes, queueAll, func(typ watch.EventType, old, node *corev1.Node) {
			// Status heartbeats change nothing of placement; labels and
			// taints do, and so do nodes that come and go.
			if typ == watch.Deleted || old == nil || dsNodeFingerprint(old) != dsNodeFingerprint(node) {
				queueAll()
			}
		}),
		kit.WatchOf(r.podRes, queueAll, func(typ watch.EventType, pod *corev1.Pod) {
			if ref := metav1.GetControllerOf(pod); ref != nil {
				if key, ok := sets.KeyOfUID(ref.UID); ok {
					r.queue.Add(key)
				}
				return
			}
			if typ == watch.Deleted {
				return
			}
			// An orphan: every DaemonSet it matches may adopt it.
			set := labels.Set(pod.Labels)
			for _, ds := range sets.List(pod.Namespace) {
				if sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector); err == nil && sel.Matches(set) {
					r.queue.Add(kit.Key(ds))
				}
			}
		}))
}

// dsNodeFingerprint is what of a node decides whether daemon pods run on
// it: its labels and its taints.
func dsNodeFingerprint(node *corev1.Node) string {
	b, _ := json.Marshal(struct {
		L map[string]string
		T []corev1.Taint
	}{node.Labels, node.Spec.Taints})
	return string(b)
}

// work reconciles one queued DaemonSet.
func (r *dsRun) work(ctx context.Context, key string) {
	rev := r.store.Revision()
	if err := r.sync(ctx, key); err != nil && ctx.Err() == nil {
		r.log.Warn("daemonset controller: reconcile failed; will retry", "daemonset", key, "err", err)
		r.queue.Retry(key)
	} else {
		r.queue.Forget(key)
	}
	if r.synced != nil {
		r.synced(key, rev)
	}
}

// errDSSkip aborts a Mutate whose object is no longer what was decided on.
var errDSSkip = errors.New("daemonset controller: object changed; skipped")

// dsSync is one reconcile of one DaemonSet.
type dsSync struct {
	*dsRun
	ctx  context.Context
	key  string
	ds   *appsv1.DaemonSet
	sel  labels.Selector
	hash string
	gen  *int64
	// nodes are all nodes; byNode the DaemonSet's pods by the node they are
	// bound to (pods both deleted and finished left out).
	nodes  []*corev1.Node
	byNode map[string][]*corev1.Pod
	// recheck is when to look again for time-based changes (0: none).
	recheck time.Duration
}

func (r *dsRun) sync(ctx context.Context, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	obj, err := r.store.Get(ctx, r.dsRes, ns, name, metav1.GetOptions{ResourceVersion: "0"})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get daemonset: %w", err)
	}
	ds := obj.(*appsv1.DaemonSet)
	if ds.DeletionTimestamp != nil {
		return nil // the garbage collector deletes its pods
	}
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil || sel.Empty() {
		r.log.Warn("daemonset controller: "+dsMsgSelectingAll, "daemonset", key)
		kit.Record(r.events, ds, corev1.EventTypeWarning, "SelectingAll", dsMsgSelectingAll)
		return nil
	}
	s := &dsSync{dsRun: r, ctx: ctx, key: key, ds: ds, sel: sel,
		hash: kit.TemplateHash(&ds.Spec.Template, ds.Status.CollisionCount)}
	if g, err := strconv.ParseInt(ds.Annotations[appsv1.DeprecatedTemplateGeneration], 10, 64); err == nil {
		s.gen = &g
	}
	if current, err := s.recordRevision(); err != nil || !current {
		return err // not current: the DaemonSet changed, and its event queues it again
	}
	if err := s.load(); err != nil {
		return err
	}
	changed, err := s.manage()
	// Like Kubernetes (which waits for the expectations of manage's
	// creations and deletions), the rolling update looks at the pods
	// only once manage has nothing left to do.
	if err == nil && !changed && ds.Spec.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		changed, err = s.rollingUpdate()
	}
	if changed {
		if lerr := s.load(); lerr != nil {
			return errors.Join(err, lerr)
		}
	}
	if serr := s.writeStatus(); serr != nil {
		return errors.Join(err, serr)
	}
	if s.recheck > 0 {
		r.queue.AddAfter(key, s.recheck)
	}
	return err
}

// load reads the nodes and the DaemonSet's pods (adopting and releasing).
func (s *dsSync) load() error {
	list, err := s.store.List(s.ctx, s.nodeRes, "", metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	s.nodes = s.nodes[:0]
	for i := range list.(*corev1.NodeList).Items {
		s.nodes = append(s.nodes, &list.(*corev1.NodeList).Items[i])
	}
	podList, err := s.store.List(s.ctx, s.podRes, s.ds.Namespace, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	var all []*corev1.Pod
	for i := range podList.(*corev1.PodList).Items {
		all = append(all, &podList.(*corev1.PodList).Items[i])
	}
	owned, err := kit.ClaimPods(s.ctx, s.store, s.podRes, s.ds, dsKind, s.sel, all, "")
	if err != nil {
		return err
	}
	s.byNode = map[string][]*corev1.Pod{}
	for _, pod := range owned {
		if pod.DeletionTimestamp != nil && kit.PodFinished(pod) {
			continue
		}
		node := dsTargetNode(pod)
		s.byNode[node] = append(s.byNode[node], pod)
	}
	return nil
}

// dsTargetNode is the node a daemon pod is for: its nodeName, or the node
// its matchFields affinity names (pods Kubernetes' controller made).
func dsTargetNode(pod *corev1.Pod) string {
	if pod.Spec.NodeName != "" {
		return pod.Spec.NodeName
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range t.MatchFields {
			if f.Key == metav1.ObjectNameField && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// shouldRun reports whether ds's pod should be placed on node, and whether
// one already there may keep running (Kubernetes' NodeShouldRunDaemonPod).
func (s *dsSync) shouldRun(node *corev1.Node) (run, keep bool) {
	spec := &s.ds.Spec.Template.Spec
	if spec.NodeName != "" && spec.NodeName != node.Name {
		return false, false
	}
	pod := &corev1.Pod{Spec: *spec.DeepCopy()}
	dsAddTolerations(&pod.Spec)
	if fits, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); err != nil || !fits {
		return false, false
	}
	if _, untolerated := schedulinghelper.FindMatchingUntoleratedTaint(s.helpLog, node.Spec.Taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false); !untolerated {
		return true, true
	}
	_, untolerated := schedulinghelper.FindMatchingUntoleratedTaint(s.helpLog, node.Spec.Taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoExecute
	}, false)
	return false, !untolerated
}

// dsAddTolerations adds dsTolerations to a pod spec, replacing a toleration
// of the same key, operator, value and effect.
func dsAddTolerations(spec *corev1.PodSpec) {
	add := dsTolerations
	if spec.HostNetwork {
		add = append(slices.Clone(add), dsHostNetworkToleration)
	}
	for _, t := range add {
		spec.Tolerations = slices.DeleteFunc(spec.Tolerations, func(have corev1.Toleration) bool { return t.MatchToleration(&have) })
		spec.Tolerations = append(spec.Tolerations, t)
	}
}

// updated reports whether a pod is of the current template.
func (s *dsSync) updated(pod *corev1.Pod) bool {
	return pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == s.hash ||
		s.gen != nil && pod.Labels[dsPodGenerationLabel] == strconv.FormatInt(*s.gen, 10)
}

// available reports whether a pod has been ready for minReadySeconds; a
// pod that will be gives the time until then to recheck.
func (s *dsSync) available(pod *corev1.Pod) bool {
	if !kit.PodReady(pod) {
		return false
	}
	minReady := time.Duration(s.ds.Spec.MinReadySeconds) * time.Second
	if minReady == 0 {
		return true
	}
	since := kit.ReadySince(pod)
	if since.IsZero() {
		return false
	}
	if wait := since.Add(minReady).Sub(s.now()); wait >= 0 {
		s.after(wait + 100*time.Millisecond)
		return false
	}
	return true
}

func (s *dsSync) after(d time.Duration) {
	if s.recheck == 0 || d < s.recheck {
		s.recheck = d
	}
}

// manage creates the pods missing on nodes that should run one and deletes
// those that should not be there; it reports whether it changed anything.
func (s *dsSync) manage() (bool, error) {
	var create []string
	var del []*corev1.Pod
	known := map[string]bool{}
	for _, node := range s.nodes {
		known[node.Name] = true
		run, keep := s.shouldRun(node)
		pods := s.byNode[node.Name]
		switch {
		case run && len(pods) == 0:
			create = append(create, node.Name)
		case keep:
			del = append(del, s.surplus(node.Name, pods)...)
		default:
			for _, pod := range pods {
				if pod.DeletionTimestamp == nil {
					del = append(del, pod)
				}
			}
		}
	}
	// Pods bound to nodes that are gone will never be stopped by a node
	// agent: they are removed at once, as Kubernetes' pod garbage collector
	// does (isle has none); pods for no node at all are deleted.
	var force []*corev1.Pod
	for name, pods := range s.byNode {
		if known[name] {
			continue
		}
		for _, pod := range pods {
			if pod.Spec.NodeName != "" {
				force = append(force, pod)
			} else if pod.DeletionTimestamp == nil {
				del = append(del, pod)
			}
		}
	}
	changed, err := s.syncNodes(del, create)
	for _, pod := range force {
		if ferr := s.deletePod(pod, 0); ferr != nil {
			err = errors.Join(err, ferr)
			continue
		}
		changed = true
		s.log.Info("daemonset controller: deleted pod of a node that is gone", "daemonset", s.key, "pod", pod.Name, "node", pod.Spec.NodeName)
	}
	return changed, err
}

// surplus returns the pods to delete on a node that should keep its daemon
// pod: finished ones (a failed one after the node's backoff), and all but
// one running pod (two while a surge waits for the new one to be available).
func (s *dsSync) surplus(node string, pods []*corev1.Pod) []*corev1.Pod {
	var del, running []*corev1.Pod
	for _, pod := range pods {
		switch {
		case pod.DeletionTimestamp != nil:
		case pod.Status.Phase == corev1.PodFailed:
			if wait := s.failedBackoff(node); wait > 0 {
				s.after(wait)
				continue
			}
			msg := fmt.Sprintf("Found failed daemon pod %s/%s on node %s, will try to kill it", pod.Namespace, pod.Name, node)
			s.log.Warn("daemonset controller: "+msg, "daemonset", s.key)
			kit.Record(s.events, s.ds, corev1.EventTypeWarning, "FailedDaemonPod", "%s", msg)
			del = append(del, pod)
		case pod.Status.Phase == corev1.PodSucceeded:
			msg := fmt.Sprintf("Found succeeded daemon pod %s/%s on node %s, will try to delete it", pod.Namespace, pod.Name, node)
			s.log.Info("daemonset controller: "+msg, "daemonset", s.key)
			kit.Record(s.events, s.ds, corev1.EventTypeNormal, "SucceededDaemonPod", "%s", msg)
			del = append(del, pod)
		default:
			running = append(running, pod)
		}
	}
	if len(running) <= 1 {
		return del
	}
	slices.SortStableFunc(running, kit.OldestFirst)
	if !dsAllowsSurge(s.ds) {
		return append(del, running[1:]...)
	}
	// While surging a node may have the oldest new pod and the oldest old
	// pod; the old one goes once it is not ready or the new one is
	// available.
	var oldestNew, oldestOld *corev1.Pod
	for _, pod := range running {
		switch {
		case s.updated(pod) && oldestNew == nil:
			oldestNew = pod
		case !s.updated(pod) && oldestOld == nil:
			oldestOld = pod
		default:
			del = append(del, pod)
		}
	}
	if oldestNew != nil && oldestOld != nil && (!kit.PodReady(oldestOld) || s.available(oldestNew)) {
		del = append(del, oldestOld)
	}
	return del
}

// failedBackoff returns how long the node must wait before its failed
// daemon pod is replaced, and when it need not, starts the next backoff.
func (s *dsSync) failedBackoff(node string) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.key + "/" + node
	now := s.now()
	b, ok := s.backoff[k]
	if ok {
		if wait := b.at.Add(b.delay).Sub(now); wait > 0 {
			return wait
		}
	}
	switch {
	case !ok || now.Sub(b.at) > 2*dsFailedBackoffMax:
		b.delay = dsFailedBackoffBase
	default:
		b.delay = min(2*b.delay, dsFailedBackoffMax)
	}
	b.at = now
	s.backoff[k] = b
	return 0
}

func (r *dsRun) forgetBackoff(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	maps.DeleteFunc(r.backoff, func(k string, _ dsBackoff) bool { return strings.HasPrefix(k, key+"/") })
}

// syncNodes deletes pods and creates pods on nodes, at most dsBurst of
// each; it reports whether it changed anything.
func (s *dsSync) syncNodes(del []*corev1.Pod, create []string) (bool, error) {
	del = del[:min(len(del), dsBurst)]
	create = create[:min(len(create), dsBurst)]
	errs := make([]error, len(del))
	var wg sync.WaitGroup
	for i, pod := range del {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.deletePod(pod, -1)
		}()
	}
	wg.Wait()
	changed := false
	for i, err := range errs {
		if err == nil {
			changed = true
			s.log.Info("daemonset controller: deleted pod", "daemonset", s.key, "pod", del[i].Name, "node", del[i].Spec.NodeName)
		}
	}
	template := s.podTemplate()
	next := 0
	var mu sync.Mutex
	created, createErr := kit.SlowStart(len(create), func() error {
		mu.Lock()
		node := create[next]
		next++
		mu.Unlock()
		return s.createPod(template, node)
	})
	if created > 0 {
		changed = true
		s.log.Info("daemonset controller: created pods", "daemonset", s.key, "count", created)
	}
	return changed, errors.Join(append(errs, createErr)...)
}

// podTemplate is the template of ds's pods: its own, with the revision
// labels and the daemon tolerations.
func (s *dsSync) podTemplate() *corev1.PodTemplateSpec {
	t := s.ds.Spec.Template.DeepCopy()
	dsAddTolerations(&t.Spec)
	t.Labels = kit.WithLabel(t.Labels, appsv1.DefaultDaemonSetUniqueLabelKey, s.hash)
	if s.gen != nil {
		t.Labels[dsPodGenerationLabel] = strconv.FormatInt(*s.gen, 10)
	}
	return t
}

// createPod creates ds's pod on a node, bound to it.
func (s *dsSync) createPod(t *corev1.PodTemplateSpec, node string) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    s.ds.Name + "-",
			Labels:          maps.Clone(t.Labels),
			Annotations:     maps.Clone(t.Annotations),
			Finalizers:      slices.Clone(t.Finalizers),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(s.ds, dsKind)},
		},
		Spec: *t.Spec.DeepCopy(),
	}
	pod.Spec.Affinity = dsBindAffinity(pod.Spec.Affinity, node)
	pod.Spec.NodeName = node
	return kit.CreateOwnedPod(s.ctx, s.store, s.podRes, s.events, s.ds, pod)
}

// deletePod deletes one of the DaemonSet's pods.
func (s *dsSync) deletePod(pod *corev1.Pod, grace int64) error {
	return kit.DeleteOwnedPod(s.ctx, s.store, s.podRes, s.events, s.ds, pod, grace)
}

// dsBindAffinity replaces the required node affinity of a daemon pod with
// the one term Kubernetes gives it: metadata.name is the node's.
func dsBindAffinity(a *corev1.Affinity, node string) *corev1.Affinity {
	sel := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
		{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}
	if a == nil {
		a = &corev1.Affinity{}
	}
	if a.NodeAffinity == nil {
		a.NodeAffinity = &corev1.NodeAffinity{}
	}
	a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = sel
	return a
}
