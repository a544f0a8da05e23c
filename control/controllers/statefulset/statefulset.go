// Package statefulset is the StatefulSet controller.
package statefulset

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

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/controllers/history"
	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/events"
	"github.com/isle-cluster/isle/control/registry"
)

// Controller keeps the pods of every apps/v1 StatefulSet, as upstream's:
//   - pod N (ordinals from spec.ordinals.start) is named <set>-N, has the
//     hostname <set>-N and the subdomain spec.serviceName (so that
//     <set>-N.<service> resolves), the labels pod-name, pod-index and
//     controller-revision-hash, and one PersistentVolumeClaim
//     <template>-<set>-N per volumeClaimTemplate, made before the pod;
//   - OrderedReady creates pods in order, each once the ones before are
//     Running and Ready, and removes surplus pods from the highest
//     ordinal down, one at a time; Parallel does both at once;
//   - failed pods are deleted to be made again;
//   - the template's history is kept in ControllerRevisions (package
//     history); RollingUpdate replaces the pods not of the update
//     revision from the highest ordinal down to the partition, a pod at a
//     time (maxUnavailable at a time) once the others are healthy;
//     OnDelete waits for pods to be deleted by someone else; pods below
//     the partition are made from the current revision;
//   - claims are kept when pods go, unless the retention policy says
//     Delete: then the set (whenDeleted) or the surplus pod (whenScaled)
//     owns them and the garbage collector deletes them;
//   - the status (replicas, ready, available, current and updated
//     replicas, the revisions, the collision count, observedGeneration)
//     is written only when it changes.
type Controller struct {
	store  *registry.Store
	log    *slog.Logger
	events *events.Recorder
	now    func() time.Time // nil: time.Now
	// synced, if set, is called after each sync with the set's key and
	// the store revision when the sync began (for tests).
	synced func(key string, rev int64)
}

// New returns the StatefulSet controller, recording its Events with rec.
func New(store *registry.Store, log *slog.Logger, rec *events.Recorder) *Controller {
	return &Controller{store: store, log: log, events: rec}
}

// Name is the controller's name in the table.
func (c *Controller) Name() string { return "statefulset" }

const (
	resync    = 30 * time.Second
	workers   = 2
	retryBase = 20 * time.Millisecond
	retryMax  = time.Minute

	podNameLabel  = "statefulset.kubernetes.io/pod-name"
	podIndexLabel = "apps.kubernetes.io/pod-index"
)

var setKind = appsv1.SchemeGroupVersion.WithKind("StatefulSet")

type run struct {
	*Controller
	now                            func() time.Time
	sets, pods, claimRes, revision *registry.Resource
	queue                          *kit.Queue
}

// Run reconciles until ctx ends (when this member stops leading).
func (c *Controller) Run(ctx context.Context) {
	r := &run{Controller: c, now: c.now,
		sets:     kit.MustLookup(c.store, appsv1.SchemeGroupVersion.WithResource("statefulsets")),
		pods:     kit.MustLookup(c.store, corev1.SchemeGroupVersion.WithResource("pods")),
		claimRes: kit.MustLookup(c.store, corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")),
		revision: kit.MustLookup(c.store, appsv1.SchemeGroupVersion.WithResource("controllerrevisions")),
		queue:    kit.NewQueue(retryBase, retryMax)}
	if r.now == nil {
		r.now = time.Now
	}
	var wg sync.WaitGroup
	wg.Go(func() { r.watch(ctx) })
	kit.RunWorkers(ctx, workers, r.queue, func(key string) { r.work(ctx, key) })
	wg.Wait()
}

// watch follows StatefulSets and pods and queues the sets they concern.
func (r *run) watch(ctx context.Context) {
	sets := kit.NewCache[*appsv1.StatefulSet]()
	pods := kit.NewMetaCache()
	queueAll := func() {
		for _, key := range sets.Keys() {
			r.queue.Add(key)
		}
	}
	queueUID := func(uid types.UID) {
		if key, ok := sets.KeyOfUID(uid); ok {
			r.queue.Add(key)
		}
	}
	loop := kit.Loop{Store: r.store, Log: r.log, Name: "statefulset controller", Resync: queueAll, ResyncEvery: resync}
	loop.Run(ctx,
		sets.Watch(r.sets, nil, func(typ watch.EventType, _, s *appsv1.StatefulSet) {
			if typ != watch.Deleted {
				r.queue.Add(kit.Key(s))
			}
		}),
		kit.WatchMeta(pods, r.pods, queueAll, func(typ watch.EventType, old, pod *metav1.PartialObjectMetadata) {
			cur := controllerUID(pod)
			if old != nil {
				if prev := controllerUID(old); prev != "" && prev != cur {
					queueUID(prev)
				}
			}
			switch {
			case cur != "":
				queueUID(cur)
			case metav1.GetControllerOf(pod) == nil && typ != watch.Deleted:
				for _, s := range sets.List(pod.Namespace) {
					if sel, err := metav1.LabelSelectorAsSelector(s.Spec.Selector); err == nil && sel.Matches(labels.Set(pod.Labels)) {
						r.queue.Add(kit.Key(s))
					}
				}
			}
		}))
}

func controllerUID(pod metav1.Object) types.UID {
	if ref := metav1.GetControllerOf(pod); ref != nil && ref.Kind == setKind.Kind && strings.HasPrefix(ref.APIVersion, setKind.Group+"/") {
		return ref.UID
	}
	return ""
}

func (r *run) work(ctx context.Context, key string) {
	rev := r.store.Revision()
	if err := r.sync(ctx, key); err != nil && ctx.Err() == nil {
		r.log.Warn("statefulset controller: reconcile failed; will retry", "statefulset", key, "err", err)
		r.queue.Retry(key)
	} else {
		r.queue.Forget(key)
	}
	if r.synced != nil {
		r.synced(key, rev)
	}
}

// errSkip aborts a Mutate of an object that changed meanwhile.
var errSkip = errors.New("statefulset controller: object changed; skipped")

// setSync is one reconcile of one set.
type setSync struct {
	*run
	ctx              context.Context
	set              *appsv1.StatefulSet
	current, update  *appsv1.ControllerRevision
	currentTemplate  *corev1.PodTemplateSpec
	claims           map[string]*corev1.PersistentVolumeClaim
	start, partition int
	recheck          time.Duration // when a ready pod becomes available
	collision        *int32
	revisions        []*appsv1.ControllerRevision
	replicas         []*corev1.Pod // by ordinal-start; nil: missing
	condemned        []*corev1.Pod // beyond the replicas, highest ordinal first
	monotonic        bool
}

func (r *run) sync(ctx context.Context, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	obj, err := r.store.Get(ctx, r.sets, ns, name, metav1.GetOptions{ResourceVersion: "0"})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	set := obj.(*appsv1.StatefulSet)
	if set.DeletionTimestamp != nil {
		return nil // the garbage collector takes its pods
	}
	selector, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil {
		r.log.Warn("statefulset controller: invalid selector", "statefulset", key, "err", err)
		return nil
	}
	s := &setSync{run: r, ctx: ctx, set: set, monotonic: set.Spec.PodManagementPolicy != appsv1.ParallelPodManagement}
	if set.Status.CollisionCount != nil {
		s.collision = new(int32)
		*s.collision = *set.Status.CollisionCount
	}
	if err := s.history(); err != nil {
		return err
	}
	if err := s.listClaims(); err != nil {
		return err
	}
	if err := s.listPods(selector); err != nil {
		return err
	}
	manageErr := s.manage()
	if err := s.writeStatus(); err != nil {
		return err
	}
	if s.recheck > 0 {
		r.queue.AddAfter(key, s.recheck)
	}
	live := map[string]bool{s.current.Name: true, s.update.Name: true}
	for _, p := range s.replicas {
		if p != nil {
			live[p.Labels[appsv1.ControllerRevisionHashLabelKey]] = true
		}
	}
	h := s.hist()
	return errors.Join(manageErr, h.Truncate(ctx, s.revisions, live, kit.Deref(set.Spec.RevisionHistoryLimit)))
}

func (s *setSync) hist() *history.History {
	return &history.History{Store: s.store, Res: s.revision, Owner: s.set, Kind: setKind, Labels: s.set.Spec.Template.Labels, Annotations: s.set.Annotations}
}

// history finds the current and update revisions, recording the
// template as the newest revision.
func (s *setSync) history() error {
	h := s.hist()
	revs, err := h.List(s.ctx)
	if err != nil {
		return err
	}
	data, err := history.Patch(&s.set.Spec.Template)
	if err != nil {
		return err
	}
	if s.update, err = h.Record(s.ctx, revs, data, s.collision); err != nil {
		return err
	}
	revs = slices.DeleteFunc(revs, func(r *appsv1.ControllerRevision) bool { return r.Name == s.update.Name })
	s.revisions = append(revs, s.update)
	s.current, s.currentTemplate = s.update, &s.set.Spec.Template
	for _, r := range s.revisions {
		if r.Name == s.set.Status.CurrentRevision && r.Name != s.update.Name {
			t, err := history.Template(r)
			if err != nil {
				s.log.Warn("statefulset controller: unreadable revision; the update revision stands for it", "revision", r.Name, "err", err)
				break
			}
			s.current, s.currentTemplate = r, t
		}
	}
	return nil
}

func (s *setSync) listClaims() error {
	s.claims = map[string]*corev1.PersistentVolumeClaim{}
	if len(s.set.Spec.VolumeClaimTemplates) == 0 {
		return nil
	}
	list, err := s.store.List(s.ctx, s.claimRes, s.set.Namespace, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return err
	}
	for i := range list.(*corev1.PersistentVolumeClaimList).Items {
		c := &list.(*corev1.PersistentVolumeClaimList).Items[i]
		s.claims[c.Name] = c
	}
	return nil
}

// ordinal is the ordinal of a pod named <set>-N; false for other names.
func ordinal(set, pod string) (int, bool) {
	rest, ok := strings.CutPrefix(pod, set+"-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || strconv.Itoa(n) != rest {
		return 0, false
	}
	return n, true
}

// listPods claims the set's pods and places them by ordinal.
func (s *setSync) listPods(selector labels.Selector) error {
	list, err := s.store.List(s.ctx, s.pods, s.set.Namespace, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return err
	}
	var members []*corev1.Pod
	for i := range list.(*corev1.PodList).Items {
		p := &list.(*corev1.PodList).Items[i]
		if _, ok := ordinal(s.set.Name, p.Name); ok {
			members = append(members, p)
		}
	}
	owned, err := kit.ClaimPods(s.ctx, s.store, s.pods, s.set, setKind, selector, members, "")
	if err != nil {
		return err
	}
	if ord := s.set.Spec.Ordinals; ord != nil {
		s.start = int(ord.Start)
	}
	n := int(kit.Deref(s.set.Spec.Replicas))
	s.replicas = make([]*corev1.Pod, n)
	if ru := s.set.Spec.UpdateStrategy.RollingUpdate; s.set.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType && ru != nil {
		s.partition = int(kit.Deref(ru.Partition))
	}
	for _, p := range owned {
		o, _ := ordinal(s.set.Name, p.Name)
		if i := o - s.start; i >= 0 && i < n {
			s.replicas[i] = p
		} else {
			s.condemned = append(s.condemned, p)
		}
	}
	slices.SortFunc(s.condemned, func(a, b *corev1.Pod) int {
		x, _ := ordinal(s.set.Name, a.Name)
		y, _ := ordinal(s.set.Name, b.Name)
		return y - x
	})
	return nil
}

func runningAndReady(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && kit.PodReady(p)
}

// healthy: running, ready for minReadySeconds, not terminating.
func (s *setSync) healthy(p *corev1.Pod) bool {
	return p != nil && p.DeletionTimestamp == nil && runningAndReady(p) && s.available(p)
}

func (s *setSync) available(p *corev1.Pod) bool {
	minReady := time.Duration(s.set.Spec.MinReadySeconds) * time.Second
	if minReady == 0 {
		return true
	}
	since := kit.ReadySince(p)
	if since.IsZero() {
		return false
	}
	if left := since.Add(minReady).Sub(s.now()); left > 0 {
		if s.recheck == 0 || left < s.recheck {
			s.recheck = left + 100*time.Millisecond
		}
		return false
	}
	return true
}

// manage makes the pods what the set asks for: one step at a time in
// OrderedReady, every step in Parallel.
func (s *setSync) manage() error {
	var errs []error
	for i, p := range s.replicas {
		ord := s.start + i
		switch {
		case p == nil:
			if err := s.createPod(ord); err != nil {
				return err
			}
			if s.monotonic {
				return nil
			}
			continue
		case p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded:
			if p.DeletionTimestamp == nil {
				errs = append(errs, s.deletePod(p, "it has "+strings.ToLower(string(p.Status.Phase))))
			}
			if s.monotonic {
				return errors.Join(errs...)
			}
			continue
		}
		errs = append(errs, s.keepClaims(p, ord))
		if s.monotonic && (p.DeletionTimestamp != nil || !runningAndReady(p)) {
			return errors.Join(errs...) // wait for it
		}
	}
	// In OrderedReady, an unhealthy condemned pod waits unless it is the
	// first unhealthy pod (the replicas are healthy by now, so the
	// unhealthy condemned pod of the lowest ordinal), as kube-controller-
	// manager: a scale-down halts while pods above that one are unhealthy.
	var firstUnhealthy *corev1.Pod
	for _, p := range slices.Backward(s.condemned) {
		if p.DeletionTimestamp != nil || !runningAndReady(p) {
			firstUnhealthy = p
			break
		}
	}
	for _, p := range s.condemned {
		if p.DeletionTimestamp != nil {
			if s.monotonic {
				return errors.Join(errs...)
			}
			continue
		}
		if s.monotonic && p != firstUnhealthy && (!runningAndReady(p) || !s.available(p)) {
			return errors.Join(errs...)
		}
		if err := s.releaseClaims(p); err != nil {
			return errors.Join(append(errs, err)...)
		}
		errs = append(errs, s.deletePod(p, ""))
		if s.monotonic {
			return errors.Join(errs...)
		}
	}
	if err := errors.Join(errs...); err != nil || s.set.Spec.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType {
		return err
	}
	return s.rollOut()
}

// rollOut deletes, from the highest ordinal down to the partition, the
// pods not of the update revision, as many at once as maxUnavailable
// allows, waiting for the unhealthy ones.
func (s *setSync) rollOut() error {
	maxUnavailable := 1
	if ru := s.set.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.MaxUnavailable != nil {
		if v, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, len(s.replicas), false); err == nil {
			maxUnavailable = max(v, 1)
		}
	}
	unavailable := 0
	for _, p := range s.replicas {
		if !s.healthy(p) {
			unavailable++
		}
	}
	for i := len(s.replicas) - 1; i >= s.partition && unavailable < maxUnavailable; i-- {
		p := s.replicas[i]
		if p == nil || p.DeletionTimestamp != nil || p.Labels[appsv1.ControllerRevisionHashLabelKey] == s.update.Name {
			continue
		}
		if err := s.deletePod(p, "for update to revision "+s.update.Name); err != nil {
			return err
		}
		unavailable++
		if maxUnavailable == 1 {
			return nil
		}
	}
	return nil
}

// claimName is the claim of template t for the pod of ordinal ord.
func (s *setSync) claimName(t *corev1.PersistentVolumeClaim, ord int) string {
	return t.Name + "-" + s.set.Name + "-" + strconv.Itoa(ord)
}

// createPod makes pod ord and its missing claims.
func (s *setSync) createPod(ord int) error {
	rev, tmpl := s.update, &s.set.Spec.Template
	if s.set.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType && ord < s.start+s.partition {
		rev, tmpl = s.current, s.currentTemplate
	}
	name := s.set.Name + "-" + strconv.Itoa(ord)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.set.Namespace, Labels: maps.Clone(tmpl.Labels),
			Annotations: maps.Clone(tmpl.Annotations), Finalizers: slices.Clone(tmpl.Finalizers),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(s.set, setKind)}},
		Spec: *tmpl.Spec.DeepCopy(),
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[podNameLabel] = name
	pod.Labels[podIndexLabel] = strconv.Itoa(ord)
	pod.Labels[appsv1.ControllerRevisionHashLabelKey] = rev.Name
	pod.Spec.Hostname, pod.Spec.Subdomain = name, s.set.Spec.ServiceName
	for i := range s.set.Spec.VolumeClaimTemplates {
		t := &s.set.Spec.VolumeClaimTemplates[i]
		if err := s.createClaim(t, ord, name); err != nil {
			return err
		}
		v := corev1.Volume{Name: t.Name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: s.claimName(t, ord)}}}
		if j := slices.IndexFunc(pod.Spec.Volumes, func(x corev1.Volume) bool { return x.Name == t.Name }); j >= 0 {
			pod.Spec.Volumes[j] = v
		} else {
			pod.Spec.Volumes = append(pod.Spec.Volumes, v)
		}
	}
	_, err := s.store.Create(s.ctx, s.pods, s.set.Namespace, pod, registry.WriteOptions{})
	switch {
	case err == nil:
		s.events.Eventf(s.set, corev1.EventTypeNormal, "SuccessfulCreate", "create Pod %s in StatefulSet %s successful", name, s.set.Name)
		s.log.Info("statefulset controller: created pod", "statefulset", kit.Key(s.set), "pod", name, "revision", rev.Name)
		return nil
	case apierrors.IsAlreadyExists(err):
		return nil // a pod of the name not yet seen, or someone else's: the watch brings it
	case kit.NamespaceTerminating(err):
		return nil
	}
	s.events.Eventf(s.set, corev1.EventTypeWarning, "FailedCreate", "create Pod %s in StatefulSet %s failed error: %v", name, s.set.Name, err)
	return err
}

// wantSetOwner: the set owns its claims (the whenDeleted policy is
// Delete), so that they go with it.
func (s *setSync) wantSetOwner() bool {
	p := s.set.Spec.PersistentVolumeClaimRetentionPolicy
	return p != nil && p.WhenDeleted == appsv1.DeletePersistentVolumeClaimRetentionPolicyType
}

func (s *setSync) setOwnerRef() metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: setKind.GroupVersion().String(), Kind: setKind.Kind, Name: s.set.Name, UID: s.set.UID}
}

// createClaim makes the claim of template t for pod ord if it is missing.
func (s *setSync) createClaim(t *corev1.PersistentVolumeClaim, ord int, pod string) error {
	name := s.claimName(t, ord)
	if c, ok := s.claims[name]; ok {
		if c.DeletionTimestamp != nil {
			return fmt.Errorf("claim %s is being deleted: pod %s waits for it to go", name, pod)
		}
		return nil
	}
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.set.Namespace, Labels: maps.Clone(t.Labels), Annotations: maps.Clone(t.Annotations)},
		Spec:       *t.Spec.DeepCopy(),
	}
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	maps.Copy(c.Labels, s.set.Spec.Selector.MatchLabels)
	if s.wantSetOwner() {
		c.OwnerReferences = []metav1.OwnerReference{s.setOwnerRef()}
	}
	out, err := s.store.Create(s.ctx, s.claimRes, s.set.Namespace, c, registry.WriteOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		s.events.Eventf(s.set, corev1.EventTypeWarning, "FailedCreate", "create Claim %s for Pod %s in StatefulSet %s failed error: %v", name, pod, s.set.Name, err)
		return err
	}
	if err == nil {
		s.claims[name] = out.(*corev1.PersistentVolumeClaim)
		s.events.Eventf(s.set, corev1.EventTypeNormal, "SuccessfulCreate", "create Claim %s Pod %s in StatefulSet %s success", name, pod, s.set.Name)
	}
	return nil
}

// keepClaims makes the claims of a live pod exist and carry the owner
// reference to the set that the whenDeleted policy asks for.
func (s *setSync) keepClaims(p *corev1.Pod, ord int) error {
	var errs []error
	for i := range s.set.Spec.VolumeClaimTemplates {
		t := &s.set.Spec.VolumeClaimTemplates[i]
		c, ok := s.claims[s.claimName(t, ord)]
		if !ok {
			if p.DeletionTimestamp == nil {
				errs = append(errs, s.createClaim(t, ord, p.Name))
			}
			continue
		}
		errs = append(errs, s.ownClaim(c, s.setOwnerRef(), s.wantSetOwner()))
	}
	return errors.Join(errs...)
}

// ownClaim adds or removes an owner reference of a claim.
func (s *setSync) ownClaim(c *corev1.PersistentVolumeClaim, ref metav1.OwnerReference, want bool) error {
	has := slices.ContainsFunc(c.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == ref.UID })
	if has == want {
		return nil
	}
	_, err := s.store.Mutate(s.ctx, s.claimRes, c.Namespace, c.Name, "", func(obj runtime.Object) error {
		cur := obj.(*corev1.PersistentVolumeClaim)
		if cur.UID != c.UID {
			return errSkip
		}
		cur.OwnerReferences = slices.DeleteFunc(cur.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == ref.UID })
		if want {
			cur.OwnerReferences = append(cur.OwnerReferences, ref)
		}
		return nil
	})
	if errors.Is(err, errSkip) || apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// releaseClaims gives a surplus pod its claims when the whenScaled
// policy is Delete, so that they go with it.
func (s *setSync) releaseClaims(p *corev1.Pod) error {
	rp := s.set.Spec.PersistentVolumeClaimRetentionPolicy
	if rp == nil || rp.WhenScaled != appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
		return nil
	}
	ord, _ := ordinal(s.set.Name, p.Name)
	ref := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID}
	var errs []error
	for i := range s.set.Spec.VolumeClaimTemplates {
		if c, ok := s.claims[s.claimName(&s.set.Spec.VolumeClaimTemplates[i], ord)]; ok {
			// The pod's alone, so that the claim goes with it.
			errs = append(errs, s.ownClaim(c, s.setOwnerRef(), false), s.ownClaim(c, ref, true))
		}
	}
	return errors.Join(errs...)
}

func (s *setSync) deletePod(p *corev1.Pod, why string) error {
	uid := p.UID
	_, _, err := s.store.Delete(s.ctx, s.pods, p.Namespace, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case err == nil:
		s.events.Eventf(s.set, corev1.EventTypeNormal, "SuccessfulDelete", "delete Pod %s in StatefulSet %s successful", p.Name, s.set.Name)
		s.log.Info("statefulset controller: deleted pod", "statefulset", kit.Key(s.set), "pod", p.Name, "why", why)
		return nil
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return nil
	}
	s.events.Eventf(s.set, corev1.EventTypeWarning, "FailedDelete", "delete Pod %s in StatefulSet %s failed error: %v", p.Name, s.set.Name, err)
	return err
}

// writeStatus writes the set's status if it changed.
func (s *setSync) writeStatus() error {
	st := *s.set.Status.DeepCopy()
	st.ObservedGeneration = s.set.Generation
	st.Replicas, st.ReadyReplicas, st.AvailableReplicas, st.CurrentReplicas, st.UpdatedReplicas = 0, 0, 0, 0, 0
	for _, p := range append(slices.Clone(s.replicas), s.condemned...) {
		if p == nil {
			continue
		}
		st.Replicas++
		if runningAndReady(p) {
			st.ReadyReplicas++
			if s.available(p) {
				st.AvailableReplicas++
			}
		}
		if p.DeletionTimestamp == nil {
			switch p.Labels[appsv1.ControllerRevisionHashLabelKey] {
			case s.current.Name:
				st.CurrentReplicas++
				if s.current.Name == s.update.Name {
					st.UpdatedReplicas++
				}
			case s.update.Name:
				st.UpdatedReplicas++
			}
		}
	}
	st.CurrentRevision, st.UpdateRevision, st.CollisionCount = s.current.Name, s.update.Name, s.collision
	if s.set.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType && st.UpdatedReplicas == st.Replicas && st.ReadyReplicas == st.Replicas {
		st.CurrentRevision, st.CurrentReplicas = st.UpdateRevision, st.UpdatedReplicas
	}
	if equality.Semantic.DeepEqual(s.set.Status, st) {
		return nil
	}
	_, err := s.store.Mutate(s.ctx, s.sets, s.set.Namespace, s.set.Name, "status", func(obj runtime.Object) error {
		cur := obj.(*appsv1.StatefulSet)
		if cur.UID != s.set.UID {
			return errSkip
		}
		cur.Status = st
		return nil
	})
	if errors.Is(err, errSkip) || apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
