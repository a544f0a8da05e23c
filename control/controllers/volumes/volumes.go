// Package volumes is the PersistentVolume controller with the local-path
// provisioner built in.
package volumes

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/events"
	"github.com/isle-cluster/isle/control/registry"
)

// Controller binds PersistentVolumeClaims to PersistentVolumes and
// looks after both until they are gone, as Kubernetes' persistentvolume
// binder, pvc-protection and pv-protection controllers together, with the
// isle.dev/local-path provisioner built in (localpath.go):
//   - binding: an unbound claim is bound to the volume pvFindMatch picks
//     (pre-binding either way: pvc.spec.volumeName or pv.spec.claimRef);
//     the volume first (claimRef, phase Bound), then the claim
//     (volumeName, the bind-completed and bound-by-controller annotations,
//     phase Bound with the volume's capacity and access modes). A claim
//     without a class gets the default class once one exists;
//   - a claim of a WaitForFirstConsumer class stays Pending
//     (WaitForFirstConsumer, or WaitForPodScheduled while a pod using it
//     waits) until the scheduler names its node in the selected-node
//     annotation; then it takes a volume that fits that node, or its
//     class's provisioner makes one. Provisioners other than
//     isle.dev/local-path are left to run outside (ExternalProvisioning);
//   - a volume whose claim is gone is Released and reclaimed by its
//     policy: Retain keeps it; Delete deletes it (a local-path volume's
//     directory is then removed by its node, see localpath.go; volumes
//     provisioned by others are left to their provisioner; others fail,
//     VolumeFailedDelete); Recycle is refused (Failed,
//     VolumeFailedRecycle), as Kubernetes without a recycler;
//   - a bound claim whose volume is gone, unbound or bound elsewhere is
//     Lost;
//   - protection: the registry gives every claim the pvc-protection and
//     every volume the pv-protection finalizer; a deleted claim keeps its
//     finalizer while a pod on a node uses it (whatever the pod's phase,
//     as Kubernetes), a deleted volume while it is Bound; objects that lost
//     the finalizer before being deleted get it back.
//
// It watches claims, volumes, StorageClasses and pods and syncs claims and
// volumes from two work queues, one worker each (two claims never race
// for a volume), and everything again every pvResync.
type Controller struct {
	store *registry.Store
	log   *slog.Logger
	// binderEvents and provisionerEvents record the Events of the binder
	// (persistentvolume-controller) and of the local-path provisioner;
	// nil records none.
	binderEvents, provisionerEvents *events.Recorder
	// now is the clock of phase transitions.
	now func() time.Time
}

// New returns the PersistentVolume controller, recording its Events
// through ev.
func New(store *registry.Store, log *slog.Logger, ev *events.Broadcaster) *Controller {
	return &Controller{store: store, log: log, now: time.Now,
		binderEvents: ev.Recorder(pvBinderComponent), provisionerEvents: ev.Recorder(LocalPathProvisioner)}
}

// Name is the controller's name in the table.
func (c *Controller) Name() string { return "persistentvolume" }

const (
	// pvResync is how often every claim and volume is synced again.
	pvResync = time.Minute
	// pvRetryBase and pvRetryMax bound the backoff of a failed sync.
	pvRetryBase = 20 * time.Millisecond
	pvRetryMax  = time.Minute
	// pvBinderComponent is the source of the binder's Events, as Kubernetes
	// names it.
	pvBinderComponent = "persistentvolume-controller"
)

// pvRun is the state of one Run (one term of leadership).
type pvRun struct {
	*Controller
	pvs, pvcs, classes, pods, nodes *registry.Resource
	claims, volumes                 *kit.Queue
}

// Run reconciles until ctx ends (when this member stops leading).
func (c *Controller) Run(ctx context.Context) {
	r := &pvRun{Controller: c,
		pvs:     kit.MustLookup(c.store, corev1.SchemeGroupVersion.WithResource("persistentvolumes")),
		pvcs:    kit.MustLookup(c.store, corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")),
		classes: kit.MustLookup(c.store, storagev1.SchemeGroupVersion.WithResource("storageclasses")),
		pods:    kit.MustLookup(c.store, corev1.SchemeGroupVersion.WithResource("pods")),
		nodes:   kit.MustLookup(c.store, corev1.SchemeGroupVersion.WithResource("nodes")),
		claims:  kit.NewQueue(pvRetryBase, pvRetryMax),
		volumes: kit.NewQueue(pvRetryBase, pvRetryMax)}
	var wg sync.WaitGroup
	wg.Go(func() { r.watch(ctx) })
	wg.Go(func() {
		kit.RunWorkers(ctx, 1, r.claims, func(key string) { r.work(ctx, r.claims, "claim", key, r.syncClaim) })
	})
	kit.RunWorkers(ctx, 1, r.volumes, func(key string) { r.work(ctx, r.volumes, "volume", key, r.syncVolume) })
	wg.Wait()
}

// watch follows claims, volumes, classes and pods and queues the claims
// and volumes they concern, until ctx ends.
func (r *pvRun) watch(ctx context.Context) {
	claims := kit.NewCache[*corev1.PersistentVolumeClaim]()
	volumes := kit.NewCache[*corev1.PersistentVolume]()
	// queueWaiting queues the claims that are unbound, waiting for a
	// volume.
	queueWaiting := func() {
		for _, c := range claims.All() {
			if c.DeletionTimestamp == nil && !metav1.HasAnnotation(c.ObjectMeta, annBindCompleted) {
				r.claims.Add(kit.Key(c))
			}
		}
	}
	loop := kit.Loop{Store: r.store, Log: r.log, Name: "persistentvolume controller", ResyncEvery: pvResync, Resync: func() {
		for _, key := range claims.Keys() {
			r.claims.Add(key)
		}
		for _, name := range volumes.Keys() {
			r.volumes.Add(name)
		}
	}}
	loop.Run(ctx,
		claims.Watch(r.pvcs, nil, func(typ watch.EventType, _, c *corev1.PersistentVolumeClaim) {
			if typ == watch.Deleted {
				// Its volume is released: the one it was bound to, or the
				// one provisioned for it and not bound yet.
				if c.Spec.VolumeName != "" {
					r.volumes.Add(c.Spec.VolumeName)
				}
				r.volumes.Add(pvProvisionedName(c))
				return
			}
			r.claims.Add(kit.Key(c))
		}),
		volumes.Watch(r.pvs, nil, func(typ watch.EventType, _, v *corev1.PersistentVolume) {
			if ref := v.Spec.ClaimRef; ref != nil {
				r.claims.Add(pvcKey(ref.Namespace, ref.Name))
			}
			if typ == watch.Deleted {
				return
			}
			r.volumes.Add(v.Name)
			if v.Spec.ClaimRef == nil && v.Status.Phase == corev1.VolumeAvailable {
				queueWaiting() // a volume to be had
			}
		}),
		kit.WatchOf(r.classes, nil, func(watch.EventType, *storagev1.StorageClass) {
			queueWaiting() // a class, maybe the default, to provision with
		}),
		kit.WatchOf(r.pods, nil, func(typ watch.EventType, pod *corev1.Pod) {
			// As Kubernetes' pvc-protection controller: only a pod that
			// goes, ends or is not on a node may free a claim; one not on
			// a node may also be what a claim waits for.
			if typ != watch.Deleted && !pvPodTerminated(pod) && pod.Spec.NodeName != "" {
				return
			}
			for _, name := range pvPodClaims(pod) {
				r.claims.Add(pvcKey(pod.Namespace, name))
			}
		}))
}

// pvPodClaims lists the claims a pod's volumes name.
func pvPodClaims(pod *corev1.Pod) []string {
	var names []string
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			names = append(names, v.PersistentVolumeClaim.ClaimName)
		}
	}
	return names
}

// pvPodTerminated reports whether a pod has ended, or is being deleted
// with no container running, as Kubernetes' IsPodTerminated.
func pvPodTerminated(pod *corev1.Pod) bool {
	if kit.PodFinished(pod) {
		return true
	}
	if pod.DeletionTimestamp == nil {
		return false
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.State.Terminated == nil && s.State.Waiting == nil {
			return false
		}
	}
	return true
}

// errPVGone stops a sync whose object was deleted or replaced meanwhile:
// the watch brings what replaced it.
var errPVGone = errors.New("persistentvolume controller: object gone or replaced")

// work syncs one queued claim or volume (what).
func (r *pvRun) work(ctx context.Context, q *kit.Queue, what, key string, sync func(context.Context, string) error) {
	err := sync(ctx, key)
	switch {
	case err == nil, errors.Is(err, errPVGone), apierrors.IsNotFound(err), ctx.Err() != nil:
		q.Forget(key)
	default:
		delay := q.Retry(key)
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			r.log.Debug("persistentvolume controller: sync; retrying", what, key, "err", err, "after", delay)
		} else {
			r.log.Warn("persistentvolume controller: sync failed; retrying", what, key, "err", err, "after", delay)
		}
	}
}

// getClaim reads a claim; nil if there is none. A fresh read (not the
// local copy) matters where a missing claim leads to releasing a volume.
func (r *pvRun) getClaim(ctx context.Context, ns, name string, fresh bool) (*corev1.PersistentVolumeClaim, error) {
	opts := metav1.GetOptions{ResourceVersion: "0"}
	if fresh {
		opts.ResourceVersion = ""
	}
	return pvGet[*corev1.PersistentVolumeClaim](ctx, r.store, r.pvcs, ns, name, opts)
}

// getVolume reads a volume; nil if there is none.
func (r *pvRun) getVolume(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	return pvGet[*corev1.PersistentVolume](ctx, r.store, r.pvs, "", name, metav1.GetOptions{ResourceVersion: "0"})
}

// getClass reads a StorageClass; nil if there is none.
func (r *pvRun) getClass(ctx context.Context, name string) (*storagev1.StorageClass, error) {
	return pvGet[*storagev1.StorageClass](ctx, r.store, r.classes, "", name, metav1.GetOptions{ResourceVersion: "0"})
}

// getNode reads a Node; nil if there is none.
func (r *pvRun) getNode(ctx context.Context, name string) (*corev1.Node, error) {
	return pvGet[*corev1.Node](ctx, r.store, r.nodes, "", name, metav1.GetOptions{ResourceVersion: "0"})
}

// pvGet reads an object of res; nil if there is none.
func pvGet[T runtime.Object](ctx context.Context, store *registry.Store, res *registry.Resource, ns, name string, opts metav1.GetOptions) (T, error) {
	var none T
	obj, err := store.Get(ctx, res, ns, name, opts)
	if apierrors.IsNotFound(err) {
		return none, nil
	}
	if err != nil {
		return none, err
	}
	return obj.(T), nil
}

func (r *pvRun) listVolumes(ctx context.Context) ([]*corev1.PersistentVolume, error) {
	list, err := r.store.List(ctx, r.pvs, "", metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, err
	}
	items := list.(*corev1.PersistentVolumeList).Items
	out := make([]*corev1.PersistentVolume, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out, nil
}

// listPods lists a namespace's pods; fresh reads the latest state, so that
// a pod created just now counts.
func (r *pvRun) listPods(ctx context.Context, ns string, fresh bool) ([]corev1.Pod, error) {
	opts := metav1.ListOptions{ResourceVersion: "0"}
	if fresh {
		opts.ResourceVersion = ""
	}
	list, err := r.store.List(ctx, r.pods, ns, opts)
	if err != nil {
		return nil, err
	}
	return list.(*corev1.PodList).Items, nil
}

// updateClaim writes a change to a claim (sub "" or "status"). change
// reports whether it changed anything; it is tried on a copy of the claim
// as read first, and nothing is written unless it changes that. The write
// applies change to the stored claim if that is still the one read
// (errPVGone if not), retrying on conflicts. An error from change aborts.
func (r *pvRun) updateClaim(ctx context.Context, c *corev1.PersistentVolumeClaim, sub string,
	change func(*corev1.PersistentVolumeClaim) (bool, error)) (*corev1.PersistentVolumeClaim, error) {
	return pvUpdate(ctx, r.store, r.pvcs, c, sub, change)
}

// updateVolume is updateClaim for volumes.
func (r *pvRun) updateVolume(ctx context.Context, v *corev1.PersistentVolume, sub string,
	change func(*corev1.PersistentVolume) (bool, error)) (*corev1.PersistentVolume, error) {
	return pvUpdate(ctx, r.store, r.pvs, v, sub, change)
}

// pvUpdate is updateClaim and updateVolume: obj is an object of res.
func pvUpdate[T any, P interface {
	*T
	metav1.Object
	runtime.Object
	DeepCopy() *T
}](ctx context.Context, store *registry.Store, res *registry.Resource, obj P, sub string, change func(P) (bool, error)) (P, error) {
	if changed, err := change(obj.DeepCopy()); err != nil || !changed {
		if err != nil {
			return nil, err
		}
		return obj, nil
	}
	out, err := store.Mutate(ctx, res, obj.GetNamespace(), obj.GetName(), sub, func(o runtime.Object) error {
		cur := o.(P)
		if cur.GetUID() != obj.GetUID() {
			return errPVGone
		}
		_, err := change(cur)
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil, errPVGone
	}
	if err != nil {
		return nil, err
	}
	return out.(P), nil
}

// setFinalizer adds or removes a finalizer; it reports whether that
// changed the list.
func setFinalizer(m *metav1.ObjectMeta, f string, want bool) bool {
	has := slices.Contains(m.Finalizers, f)
	switch {
	case want && !has:
		m.Finalizers = append(slices.Clone(m.Finalizers), f)
	case !want && has:
		m.Finalizers = slices.DeleteFunc(slices.Clone(m.Finalizers), func(s string) bool { return s == f })
	default:
		return false
	}
	return true
}
