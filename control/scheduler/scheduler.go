package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/events"
	"github.com/isle-cluster/isle/control/registry"
)

// Name is the scheduler's name: it places the pods whose
// spec.schedulerName is Name, and reports as Name in Events.
const Name = corev1.DefaultSchedulerName

// Config configures a Scheduler. Zero values take the defaults.
type Config struct {
	// Store is the registry the scheduler reads and binds through. Required.
	Store *registry.Store
	// Events records Scheduled and FailedScheduling Events; nil records none.
	Events *events.Recorder
	// Logger reports failures. Default slog.Default().
	Logger *slog.Logger
	// Binders is how many binds and pod status writes may be under way at
	// once; decisions do not wait for them. Default 32.
	Binders int
	// InitialBackoff and MaxBackoff bound how long a pod that failed waits
	// before it is tried again. Defaults 1s and 10s (kube-scheduler's).
	InitialBackoff, MaxBackoff time.Duration
	// MaxUnschedulable is how long an unschedulable pod waits for a change
	// of the cluster before it is tried again anyway. Default 5 minutes
	// (kube-scheduler's).
	MaxUnschedulable time.Duration
	// Now is the clock of the pods' PodScheduled conditions and of the
	// queue. Default time.Now.
	Now func() time.Time
}

func (c *Config) validate() error {
	if c.Store == nil {
		return errors.New("scheduler: Config.Store is required")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Binders <= 0 {
		c.Binders = 32
	}
	if c.InitialBackoff <= 0 {
		c.InitialBackoff = time.Second
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 10 * time.Second
	}
	if c.MaxUnschedulable <= 0 {
		c.MaxUnschedulable = 5 * time.Minute
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Scheduler places pending pods on nodes. It is a controller: Run it on
// the leader. See the package documentation.
type Scheduler struct {
	cfg Config
}

// New returns a Scheduler; it panics on an invalid Config (a missing Store
// is a programming error).
func New(cfg Config) *Scheduler {
	if err := cfg.validate(); err != nil {
		panic(err)
	}
	return &Scheduler{cfg: cfg}
}

// Name is the scheduler's name in the controllers' table.
func (s *Scheduler) Name() string { return "scheduler" }

// Run schedules pods until ctx ends, then waits for the binds under way.
func (s *Scheduler) Run(ctx context.Context) {
	r := s.newRun()
	r.loop(ctx)
	r.binders.Wait()
	pending.Reset()
}

// run is the state of one Run (one term of leadership). Everything but
// the binders' results is owned by the loop's goroutine.
type run struct {
	cfg                             Config
	store                           *registry.Store
	log                             *slog.Logger
	pods, nodes, pvcs, pvs, classes *registry.Resource
	namespaces, pdbs, services      *registry.Resource
	podFeed, nodeFeed               *feed
	pvcFeed, pvFeed, classFeed      *feed
	nsFeed, pdbFeed, svcFeed        *feed
	// budgetsByKey are the PodDisruptionBudgets, which preemption spares.
	budgetsByKey map[string]*policyv1.PodDisruptionBudget
	cache        *cache
	queue        *queue
	selecting    map[string]string // claim key → node being written to its annotation
	slots        chan struct{}     // free binders
	binders      sync.WaitGroup
	mu           sync.Mutex
	results      []bindResult // binds finished, for the loop
	resultsReady chan struct{}
	alwaysReady  chan struct{} // closed: a case that is always ready
}

func (s *Scheduler) newRun() *run {
	lookup := func(gvr schema.GroupVersionResource) *registry.Resource {
		r, ok := s.cfg.Store.Resources().Lookup(gvr)
		if !ok {
			panic("scheduler: " + gvr.String() + " is not served")
		}
		return r
	}
	r := &run{cfg: s.cfg, store: s.cfg.Store, log: s.cfg.Logger,
		pods: lookup(corev1.SchemeGroupVersion.WithResource("pods")), nodes: lookup(corev1.SchemeGroupVersion.WithResource("nodes")),
		pvcs:         lookup(corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")),
		pvs:          lookup(corev1.SchemeGroupVersion.WithResource("persistentvolumes")),
		classes:      lookup(storagev1.SchemeGroupVersion.WithResource("storageclasses")),
		namespaces:   lookup(corev1.SchemeGroupVersion.WithResource("namespaces")),
		pdbs:         lookup(policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets")),
		services:     lookup(corev1.SchemeGroupVersion.WithResource("services")),
		budgetsByKey: map[string]*policyv1.PodDisruptionBudget{},
		cache:        newCache(),
		queue:        newQueue(s.cfg.InitialBackoff, s.cfg.MaxBackoff, s.cfg.MaxUnschedulable),
		selecting:    map[string]string{},
		slots:        make(chan struct{}, s.cfg.Binders),
		resultsReady: make(chan struct{}, 1),
		alwaysReady:  make(chan struct{}),
	}
	close(r.alwaysReady)
	// Pods, nodes, namespaces, budgets and Services are followed from
	// their current state (and swept of what went while no watch was
	// open); claims, volumes and classes only wake unschedulable pods.
	r.podFeed = &feed{res: r.pods, full: true}
	r.nodeFeed = &feed{res: r.nodes, full: true}
	r.pvcFeed = &feed{res: r.pvcs}
	r.pvFeed = &feed{res: r.pvs}
	r.classFeed = &feed{res: r.classes}
	r.nsFeed = &feed{res: r.namespaces, full: true}
	r.pdbFeed = &feed{res: r.pdbs, full: true}
	r.svcFeed = &feed{res: r.services, full: true}
	return r
}

// feed is one watch the loop follows.
type feed struct {
	res  *registry.Resource
	full bool // starts with the current objects, then an initial-events-end bookmark
	ch   <-chan registry.WatchEvent
	// seen collects the objects of a full watch's initial events; nil
	// once they are over.
	seen map[string]bool
}

// synced reports whether a full feed's initial events are over.
func (f *feed) synced() bool { return f.ch != nil && f.seen == nil }

// open watches f's resource; false if the store refused (the loop tries
// again a second later).
func (r *run) open(ctx context.Context, f *feed) bool {
	opts := metav1.ListOptions{ResourceVersion: strconv.FormatInt(r.store.Revision(), 10)}
	if f.full {
		yes := true
		opts = metav1.ListOptions{SendInitialEvents: &yes, AllowWatchBookmarks: true}
	}
	ch, err := r.store.Watch(ctx, f.res, "", opts, registry.WithoutManagedFields())
	if err != nil {
		r.log.Warn("scheduler: watch failed; retrying", "resource", f.res.String(), "err", err)
		return false
	}
	f.ch = ch
	if f.full {
		f.seen = map[string]bool{}
	} else {
		// Changes may have been missed while no watch was open.
		r.queue.moveAll(r.cfg.Now())
	}
	return true
}

// loop follows the cluster and schedules one pod at a time, until ctx
// ends. Decisions are taken here, in one goroutine, against the cache;
// binds and status writes run beside it.
func (r *run) loop(ctx context.Context) {
	// Backoffs end on the flush's ticks: kube-scheduler's second, or
	// sooner for shorter backoffs.
	flush := time.NewTicker(min(time.Second, r.cfg.InitialBackoff))
	defer flush.Stop()
	for ctx.Err() == nil {
		opened := true
		for _, f := range []*feed{r.podFeed, r.nodeFeed, r.nsFeed, r.pdbFeed, r.svcFeed, r.pvcFeed, r.pvFeed, r.classFeed} {
			if f.ch == nil && !r.open(ctx, f) {
				opened = false
			}
		}
		var retry <-chan time.Time
		if !opened {
			retry = time.After(time.Second)
		}
		// Decisions wait for the current pods and nodes (as kube-scheduler
		// waits for its informers to sync): a new leader places nothing on
		// the first nodes it hears of only. Then decisions and events take
		// turns: a pending decision does not wait for a quiet cluster, an
		// event does not wait for the queue.
		var ready <-chan struct{}
		if r.queue.hasActive() && r.podFeed.synced() && r.nodeFeed.synced() && r.nsFeed.synced() {
			ready = r.alwaysReady
		}
		select {
		case <-ctx.Done():
			return
		case <-retry:
		case <-ready:
			r.scheduleOne(ctx, r.queue.pop())
		case ev, ok := <-r.podFeed.ch:
			r.receive(r.podFeed, ev, ok, r.onPod)
		case ev, ok := <-r.nodeFeed.ch:
			r.receive(r.nodeFeed, ev, ok, r.onNode)
		case ev, ok := <-r.nsFeed.ch:
			r.receive(r.nsFeed, ev, ok, r.onNamespace)
		case ev, ok := <-r.pdbFeed.ch:
			r.receive(r.pdbFeed, ev, ok, r.onBudget)
		case ev, ok := <-r.svcFeed.ch:
			r.receive(r.svcFeed, ev, ok, r.onService)
		case ev, ok := <-r.pvcFeed.ch:
			r.receive(r.pvcFeed, ev, ok, r.onClaim)
		case ev, ok := <-r.pvFeed.ch:
			r.receive(r.pvFeed, ev, ok, r.onStorage)
		case ev, ok := <-r.classFeed.ch:
			r.receive(r.classFeed, ev, ok, r.onStorage)
		case <-r.resultsReady:
			r.finishBinds(ctx)
		case <-flush.C:
			r.queue.flush(r.cfg.Now())
			setPending(r.queue)
		}
	}
}

// receive hands one watch event to handle; a closed watch is opened again
// on the next turn of the loop.
func (r *run) receive(f *feed, ev registry.WatchEvent, ok bool, handle func(*feed, registry.WatchEvent)) {
	if !ok {
		f.ch = nil
		return
	}
	handle(f, ev)
}

// initialEventsEnd reports whether ev is the bookmark that ends a full
// watch's initial events.
func initialEventsEnd(ev registry.WatchEvent) bool {
	if ev.Type != watch.Bookmark {
		return false
	}
	m, err := meta.Accessor(ev.Object)
	return err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true"
}

func (r *run) onPod(f *feed, ev registry.WatchEvent) {
	if initialEventsEnd(ev) {
		r.sweepPods(f.seen)
		f.seen = nil
		return
	}
	pod, ok := ev.Object.(*corev1.Pod)
	if !ok || ev.Type == watch.Bookmark {
		return // an ERROR event: the watch closes next
	}
	key := podKey(pod)
	if f.seen != nil {
		f.seen[key] = true
	}
	now := r.cfg.Now()
	switch {
	case ev.Type == watch.Deleted || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		r.queue.remove(key)
		r.cache.unnominate(key)
		if r.cache.removePod(key) {
			r.queue.moveAll(now) // what it took is free
		}
	case pod.Spec.NodeName != "":
		r.queue.remove(key)
		r.cache.unnominate(key)
		if _, known := r.cache.pods[key]; !known {
			r.queue.movePodWaiters(now)
		}
		r.cache.addPod(newPodInfo(pod))
	case pod.Spec.SchedulerName != Name && pod.Spec.SchedulerName != "",
		pod.DeletionTimestamp != nil,
		len(pod.Spec.SchedulingGates) > 0:
		r.queue.remove(key)
		r.cache.unnominate(key)
	case r.cache.assumed(key):
		// Placed, its binding under way: it comes back with its node.
	default:
		r.queue.add(pod, now)
		if node := pod.Status.NominatedNodeName; node != "" && r.cache.nominations[key] != node {
			r.cache.nominate(newPodInfo(pod), node)
		}
	}
}

// sweepPods forgets the pods a new watch did not list: they went while no
// watch was open. Pods whose binding is under way stay.
func (r *run) sweepPods(seen map[string]bool) {
	if seen == nil {
		return
	}
	freed := false
	for key, p := range r.cache.pods {
		if !seen[key] && !p.binding {
			freed = r.cache.removePod(key) || freed
		}
	}
	for key := range r.queue.pods {
		if !seen[key] {
			r.queue.remove(key)
		}
	}
	for key := range r.cache.nominations {
		if !seen[key] {
			r.cache.unnominate(key)
		}
	}
	if freed {
		r.queue.moveAll(r.cfg.Now())
	}
}

func (r *run) onNode(f *feed, ev registry.WatchEvent) {
	if initialEventsEnd(ev) {
		for _, n := range slices.Clone(r.cache.list) {
			if !f.seen[n.name] {
				r.cache.removeNode(n.name)
			}
		}
		f.seen = nil
		return
	}
	node, ok := ev.Object.(*corev1.Node)
	if !ok || ev.Type == watch.Bookmark {
		return
	}
	if ev.Type == watch.Deleted {
		r.cache.removeNode(node.Name)
		return
	}
	if f.seen != nil {
		f.seen[node.Name] = true
	}
	if r.cache.setNode(node) {
		r.queue.moveAll(r.cfg.Now())
	}
}

// onService keeps the Services' selectors, which choose the pods the
// default spread constraints count.
func (r *run) onService(f *feed, ev registry.WatchEvent) {
	if initialEventsEnd(ev) {
		for ns, names := range r.cache.services {
			for name := range names {
				if !f.seen[ns+"/"+name] {
					r.cache.setService(ns, name, nil)
				}
			}
		}
		f.seen = nil
		return
	}
	svc, ok := ev.Object.(*corev1.Service)
	if !ok || ev.Type == watch.Bookmark {
		return
	}
	if f.seen != nil {
		f.seen[svc.Namespace+"/"+svc.Name] = true
	}
	var sel labels.Set
	if ev.Type != watch.Deleted && len(svc.Spec.Selector) > 0 {
		sel = labels.Set(svc.Spec.Selector)
	}
	r.cache.setService(svc.Namespace, svc.Name, sel)
}

// onNamespace keeps the namespaces' labels, which inter-pod affinity's
// namespace selectors select: a change may let pods fit.
func (r *run) onNamespace(f *feed, ev registry.WatchEvent) {
	if initialEventsEnd(ev) {
		for name := range r.cache.namespaces {
			if !f.seen[name] {
				delete(r.cache.namespaces, name)
			}
		}
		f.seen = nil
		return
	}
	ns, ok := ev.Object.(*corev1.Namespace)
	if !ok || ev.Type == watch.Bookmark {
		return
	}
	if f.seen != nil {
		f.seen[ns.Name] = true
	}
	if ev.Type == watch.Deleted {
		delete(r.cache.namespaces, ns.Name)
		return
	}
	if old, ok := r.cache.namespaces[ns.Name]; !ok || !maps.Equal(old, labels.Set(ns.Labels)) {
		r.cache.namespaces[ns.Name] = labels.Set(ns.Labels)
		r.queue.moveAll(r.cfg.Now())
	}
}

// onBudget keeps the PodDisruptionBudgets for preemption.
func (r *run) onBudget(f *feed, ev registry.WatchEvent) {
	if initialEventsEnd(ev) {
		for key := range r.budgetsByKey {
			if !f.seen[key] {
				delete(r.budgetsByKey, key)
			}
		}
		f.seen = nil
		return
	}
	pdb, ok := ev.Object.(*policyv1.PodDisruptionBudget)
	if !ok || ev.Type == watch.Bookmark {
		return
	}
	key := pdb.Namespace + "/" + pdb.Name
	if f.seen != nil {
		f.seen[key] = true
	}
	if ev.Type == watch.Deleted {
		delete(r.budgetsByKey, key)
	} else {
		r.budgetsByKey[key] = pdb
	}
}

// budgets lists the PodDisruptionBudgets.
func (r *run) budgets() []*policyv1.PodDisruptionBudget {
	return slices.Collect(maps.Values(r.budgetsByKey))
}

// onClaim: a claim's change may let pods waiting for it fit; a claim that
// shows its selected node no longer needs this scheduler's memory of it.
func (r *run) onClaim(f *feed, ev registry.WatchEvent) {
	pvc, ok := ev.Object.(*corev1.PersistentVolumeClaim)
	if !ok || ev.Type == watch.Bookmark {
		return
	}
	key := pvc.Namespace + "/" + pvc.Name
	if _, selected := pvc.Annotations[selectedNodeAnnotation]; selected || ev.Type == watch.Deleted {
		delete(r.selecting, key)
	}
	r.queue.moveAll(r.cfg.Now())
}

// onStorage: a new or changed volume or class may let pods fit.
func (r *run) onStorage(f *feed, ev registry.WatchEvent) {
	if ev.Type != watch.Bookmark {
		r.queue.moveAll(r.cfg.Now())
	}
}

var errNoNodes = errors.New(msgNoNodes)

// scheduleOne decides where a pod goes: it is assumed there at once and
// bound beside the loop, or reported unschedulable and queued again.
func (r *run) scheduleOne(ctx context.Context, qp *queuedPod) {
	start := time.Now()
	info := newPodInfo(qp.pod)
	n, a, err := r.decide(ctx, info)
	var fit *fitError
	switch {
	case errors.As(err, &fit):
		// What preemption may do: nominate the pod to a node where it took
		// pods of lower priority.
		p := r.preempt(ctx, qp.pod, a, fit)
		fit.preemption = p.message
		qp.waitsForPods = fit.waitsForPods()
		r.queue.requeue(qp, true, r.cfg.Now())
		if p.node != "" {
			r.cache.nominate(info, p.node)
		} else {
			r.cache.unnominate(qp.key)
		}
		r.failed(ctx, qp.pod, corev1.PodReasonUnschedulable, fit.Error(), p.node)
		observeAttempt(resultUnschedulable, start)
	case errors.Is(err, errNoNodes):
		r.queue.requeue(qp, true, r.cfg.Now())
		r.failed(ctx, qp.pod, corev1.PodReasonUnschedulable, err.Error(), qp.pod.Status.NominatedNodeName)
		observeAttempt(resultUnschedulable, start)
	case err != nil:
		r.log.Warn("scheduler: cannot schedule pod; will retry", "pod", qp.key, "err", err)
		r.queue.requeue(qp, false, r.cfg.Now())
		r.failed(ctx, qp.pod, corev1.PodReasonSchedulerError, err.Error(), qp.pod.Status.NominatedNodeName)
		observeAttempt(resultError, start)
	default:
		r.assume(ctx, qp, info, n, a.volumes.claimsToSelect(), start)
	}
}

// decide returns the node for the pod: among the nodes that pass every
// filter, the highest score; or why there is none.
func (r *run) decide(ctx context.Context, info *podInfo) (*nodeInfo, *attempt, error) {
	if len(r.cache.list) == 0 {
		return nil, nil, errNoNodes
	}
	volumes, unschedulable, err := r.podVolumes(ctx, info.pod)
	if err != nil {
		return nil, nil, err
	}
	if unschedulable != "" {
		return nil, nil, &fitError{nodes: len(r.cache.list), preFilter: unschedulable}
	}
	a := newAttempt(info, volumes)
	a.prepare(r.cache)
	feasible := make([]*nodeInfo, 0, len(r.cache.list))
	var fit *fitError
	for _, n := range r.cache.list {
		why := a.filter(n)
		if len(why) == 0 {
			feasible = append(feasible, n)
			continue
		}
		if fit == nil {
			fit = &fitError{nodes: len(r.cache.list), reasons: map[string]int{}}
		}
		for _, reason := range why {
			fit.reasons[reason]++
		}
		if resolvable(why) {
			fit.potential = append(fit.potential, n)
		}
	}
	switch len(feasible) {
	case 0:
		return nil, a, fit
	case 1:
		return feasible[0], a, nil
	}
	return feasible[pick(a.score(r.cache, feasible))], a, nil
}

// bindResult is a bind's outcome, for the loop.
type bindResult struct {
	qp     *queuedPod
	info   *podInfo
	claims []string
	start  time.Time
	err    error
}

// assume counts the pod on its node at once, so that the next decision
// sees it, and binds it beside the loop.
func (r *run) assume(ctx context.Context, qp *queuedPod, info *podInfo, n *nodeInfo, claims []string, start time.Time) {
	info.node, info.assumed, info.binding = n.name, true, true
	r.cache.addPod(info)
	r.queue.movePodWaiters(r.cfg.Now())
	for _, c := range claims {
		r.selecting[c] = n.name
	}
	pod, node := qp.pod, n.name
	r.async(ctx, func(ctx context.Context) {
		err := r.bind(ctx, pod, node, claims)
		r.mu.Lock()
		r.results = append(r.results, bindResult{qp: qp, info: info, claims: claims, start: start, err: err})
		r.mu.Unlock()
		select {
		case r.resultsReady <- struct{}{}:
		default:
		}
	})
}

// async runs f on a free binder, waiting for one if all are busy.
func (r *run) async(ctx context.Context, f func(context.Context)) {
	select {
	case r.slots <- struct{}{}:
	case <-ctx.Done():
		return
	}
	r.binders.Add(1)
	go func() {
		defer func() {
			<-r.slots
			r.binders.Done()
		}()
		f(ctx)
	}()
}

// bind selects the pod's node for its WaitForFirstConsumer claims that
// have none, then binds the pod (pods/binding).
func (r *run) bind(ctx context.Context, pod *corev1.Pod, node string, claims []string) error {
	for _, key := range claims {
		ns, name, _ := strings.Cut(key, "/")
		_, err := r.store.Mutate(ctx, r.pvcs, ns, name, "", func(obj runtime.Object) error {
			pvc := obj.(*corev1.PersistentVolumeClaim)
			if sel, ok := pvc.Annotations[selectedNodeAnnotation]; ok && sel != node {
				return fmt.Errorf("node %q was selected for it meanwhile", sel)
			}
			metav1.SetMetaDataAnnotation(&pvc.ObjectMeta, selectedNodeAnnotation, node)
			return nil
		})
		if err != nil {
			return fmt.Errorf("select node for persistentvolumeclaim %q: %w", name, err)
		}
	}
	return r.store.Bind(ctx, pod.Namespace, pod.Name, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	})
}

// finishBinds takes the binders' results: a bound pod gets its Scheduled
// Event (it stays assumed until the watch shows it bound); a pod that
// could not be bound is forgotten on its node and tried again.
func (r *run) finishBinds(ctx context.Context) {
	r.mu.Lock()
	results := r.results
	r.results = nil
	r.mu.Unlock()
	now := r.cfg.Now()
	for _, res := range results {
		pod, key := res.qp.pod, res.qp.key
		res.info.binding = false
		if res.err == nil {
			r.cfg.Events.Eventf(pod, corev1.EventTypeNormal, "Scheduled", "Successfully assigned %v/%v to %v", pod.Namespace, pod.Name, res.info.node)
			observeAttempt(resultScheduled, res.start)
			continue
		}
		observeAttempt(resultError, res.start)
		for _, c := range res.claims {
			if r.selecting[c] == res.info.node {
				delete(r.selecting, c)
			}
		}
		// Still this scheduler's assumption: neither deleted nor seen
		// bound (by someone else) meanwhile.
		if r.cache.pods[key] != res.info {
			continue
		}
		r.cache.removePod(key)
		r.queue.moveAll(now)
		if apierrors.IsNotFound(res.err) {
			continue
		}
		r.log.Warn("scheduler: binding failed; will retry", "pod", key, "node", res.info.node, "err", res.err)
		r.queue.requeue(res.qp, false, now)
		r.failed(ctx, pod, corev1.PodReasonSchedulerError, fmt.Sprintf("Binding rejected: %v", res.err), pod.Status.NominatedNodeName)
	}
}

// errUnchanged aborts a status write that no longer applies.
var errUnchanged = errors.New("scheduler: pod changed; status left alone")

// failed reports a pod that could not be scheduled, as kube-scheduler
// does: a FailedScheduling Event, and the PodScheduled condition False
// with reason and message and the node the pod is nominated to, written
// only when they change.
func (r *run) failed(ctx context.Context, pod *corev1.Pod, reason, message, nominated string) {
	r.cfg.Events.Eventf(pod, corev1.EventTypeWarning, "FailedScheduling", "%s", message)
	if c := podScheduled(&pod.Status); c != nil && c.Status == corev1.ConditionFalse && c.Reason == reason && c.Message == message &&
		pod.Status.NominatedNodeName == nominated {
		return
	}
	now := metav1.NewTime(r.cfg.Now().UTC().Truncate(time.Second))
	r.async(ctx, func(ctx context.Context) {
		_, err := r.store.Mutate(ctx, r.pods, pod.Namespace, pod.Name, "status", func(obj runtime.Object) error {
			cur := obj.(*corev1.Pod)
			if cur.UID != pod.UID || cur.Spec.NodeName != "" {
				return errUnchanged // replaced, or bound meanwhile
			}
			setCondition(&cur.Status, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: reason, Message: message,
				LastTransitionTime: now})
			cur.Status.NominatedNodeName = nominated
			return nil
		})
		if err != nil && !errors.Is(err, errUnchanged) && !apierrors.IsNotFound(err) && ctx.Err() == nil {
			r.log.Warn("scheduler: write pod status failed", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		}
	})
}

func podScheduled(st *corev1.PodStatus) *corev1.PodCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == corev1.PodScheduled {
			return &st.Conditions[i]
		}
	}
	return nil
}
