// Package job is the Job controller.
package job

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/registry"
)

// Controller runs the pods of batch/v1 Jobs to completion, as Kubernetes' Job
// controller does in 1.33 with its default features:
//   - pods are made from the template with a controller reference and the
//     batch.kubernetes.io/job-tracking finalizer, named <job>-<random>;
//     Indexed Jobs give each pod a completion index (annotation and label
//     batch.kubernetes.io/job-completion-index, hostname <job>-<index>,
//     name <job>-<index>-<random>, and JOB_COMPLETION_INDEX in every
//     container's environment, read from the label);
//   - up to parallelism pods are active, and no more than the completions
//     still missing; a pod that failed (or, with podReplacementPolicy
//     TerminatingOrFailed, is being deleted) is replaced after a backoff
//     that starts at backoffBase and doubles with each failure since the
//     last success, up to jobBackoffMax;
//   - finished pods are counted exactly once, with the finalizer: a
//     finished pod's UID is first recorded in
//     status.uncountedTerminatedPods, then its finalizer is removed, then
//     it moves from that list to the succeeded or failed count in one
//     status write; a pod without the finalizer is never counted again;
//   - more failures than backoffLimit (or, with restartPolicy OnFailure,
//     as many container restarts), or running longer than
//     activeDeadlineSeconds, fails the Job: the FailureTarget condition,
//     then the active pods are deleted, then the Failed condition (reasons
//     BackoffLimitExceeded, DeadlineExceeded); enough completions complete
//     it: SuccessCriteriaMet, then Complete (reason CompletionsReached) and
//     completionTime once no pod is left running or uncounted;
//   - a podFailurePolicy judges each failed pod (phase Failed; a pod being
//     deleted is replaced only once it failed) by its first rule that
//     matches its containers' exit codes or its conditions: FailJob fails
//     the Job (reason PodFailurePolicy), Ignore leaves the failure
//     uncounted, FailIndex fails the pod's index, Count (or no match)
//     counts it;
//   - with backoffLimitPerIndex (Indexed Jobs) each index has its own
//     failure count, carried from pod to replacement in the annotation
//     batch.kubernetes.io/job-index-failure-count (a failed pod keeps its
//     finalizer until its replacement exists), and its own backoff; an
//     index that fails once more than the limit is failed for good and
//     listed in status.failedIndexes; more failed indexes than
//     maxFailedIndexes fail the Job (MaxFailedIndexesExceeded), and so
//     does any failed index once every index is done (FailedIndexes);
//   - a successPolicy (Indexed Jobs) completes the Job once one of its
//     rules is met by the succeeded indexes: SuccessCriteriaMet, the
//     other pods deleted (not counted), then Complete (reason
//     SuccessPolicy);
//   - a suspended Job's active pods are deleted (not counted as failures),
//     with the Suspended condition; resuming restarts startTime;
//   - a finished Job with ttlSecondsAfterFinished is deleted (foreground)
//     that long after it finished, as Kubernetes' TTL-after-finished
//     controller does;
//   - pods that still carry the finalizer when their Job is gone or
//     finished, or that no Job controls, lose it.
//
// Jobs with spec.managedBy naming another controller are left to it.
type Controller struct {
	store *registry.Store
	log   *slog.Logger
	// now is the clock of startTime, conditions, activeDeadlineSeconds, the
	// pod failure backoff and ttlSecondsAfterFinished. Nil means time.Now.
	now func() time.Time
	// backoffBase is the first delay before the pods of a Job whose pod
	// failed are replaced. Zero means jobBackoffBase.
	backoffBase time.Duration
	// events records the Events of Kubernetes' job-controller; nil records
	// none.
	events kit.EventRecorder
	// synced, if set, is called after each sync of a Job with its key and
	// the store revision when the sync began (for tests).
	synced func(key string, rev int64)
}

// New returns the Job controller, recording its Events with rec.
func New(store *registry.Store, log *slog.Logger, rec kit.EventRecorder) *Controller {
	return &Controller{store: store, log: log, events: rec}
}

// Name is the controller's name in the table.
func (c *Controller) Name() string { return "job" }

const (
	jobResync    = 30 * time.Second
	jobWorkers   = 2
	jobRetryBase = 20 * time.Millisecond
	jobRetryMax  = time.Minute
	// Kubernetes' pod failure backoff: 10s, doubling, at most 6 minutes.
	jobBackoffBase = 10 * time.Second
	jobBackoffMax  = 6 * time.Minute
	// jobMaxUncounted bounds status.uncountedTerminatedPods (Kubernetes'
	// MaxUncountedPods); jobBurst the pods created or deleted in one sync.
	jobMaxUncounted = 500
	jobBurst        = 500
	// jobManagedBy is the spec.managedBy of Jobs this controller runs.
	jobManagedBy = "kubernetes.io/job-controller"
	jobIndexEnv  = "JOB_COMPLETION_INDEX"
	// jobMaxGenerateName leaves room for the five random characters of a
	// generated name within a DNS label (Kubernetes' MaxGeneratedNameLength).
	jobMaxGenerateName = 58
)

// Condition reasons and messages, as Kubernetes words them.
const (
	jobMsgBackoffLimit   = "Job has reached the specified backoff limit"
	jobMsgDeadline       = "Job was active longer than specified deadline"
	jobMsgCompletions    = "Reached expected number of succeeded pods"
	jobReasonSuspended   = "JobSuspended"
	jobMsgSuspended      = "Job suspended"
	jobReasonResumed     = "JobResumed"
	jobMsgResumed        = "Job resumed"
	jobMsgTooManySuccess = "Too many succeeded pods running after completion count reached"
	jobMsgUnknownMode    = "Skipped Job sync because completion mode is unknown"
)

var jobKind = batchv1.SchemeGroupVersion.WithKind("Job")

// jobRun is the state of one Run (one term of leadership).
type jobRun struct {
	*Controller
	now         func() time.Time
	backoffBase time.Duration
	jobRes      *registry.Resource
	podRes      *registry.Resource
	queue       *kit.Queue // Jobs
	orphans     *kit.Queue // pods whose finalizer may have to go

	mu      sync.Mutex
	backoff map[string]jobBackoff // by Job key
}

// jobBackoff is a Job's record of pod failures since its last success.
type jobBackoff struct {
	failures int32
	last     time.Time
}

// Run reconciles until ctx ends (when this member stops leading).
func (c *Controller) Run(ctx context.Context) {
	r := &jobRun{Controller: c, now: c.now, backoffBase: c.backoffBase,
		jobRes:  kit.MustLookup(c.store, batchv1.SchemeGroupVersion.WithResource("jobs")),
		podRes:  kit.MustLookup(c.store, corev1.SchemeGroupVersion.WithResource("pods")),
		queue:   kit.NewQueue(jobRetryBase, jobRetryMax),
		orphans: kit.NewQueue(jobRetryBase, jobRetryMax),
		backoff: map[string]jobBackoff{}}
	if r.now == nil {
		r.now = time.Now
	}
	if r.backoffBase <= 0 {
		r.backoffBase = jobBackoffBase
	}
	var wg sync.WaitGroup
	wg.Go(func() { r.watch(ctx) })
	wg.Go(func() {
		kit.RunWorkers(ctx, 1, r.orphans, func(key string) { r.work(ctx, r.orphans, "pod", key, r.syncOrphan, nil) })
	})
	kit.RunWorkers(ctx, jobWorkers, r.queue, func(key string) { r.work(ctx, r.queue, "job", key, r.sync, c.synced) })
	wg.Wait()
}

// work syncs one key of q (a Job, or, with what "pod", a pod).
func (r *jobRun) work(ctx context.Context, q *kit.Queue, what, key string, sync func(context.Context, string) error, synced func(string, int64)) {
	rev := r.store.Revision()
	if err := sync(ctx, key); err != nil && ctx.Err() == nil {
		level := slog.LevelWarn
		if apierrors.IsConflict(err) {
			level = slog.LevelDebug // lost a race with another writer; the retry reads afresh
		}
		r.log.Log(ctx, level, "job controller: reconcile failed; will retry", what, key, "err", err)
		q.Retry(key)
	} else {
		q.Forget(key)
	}
	if synced != nil {
		synced(key, rev)
	}
}

// watch follows Jobs and pods and queues the Jobs, and the pods whose
// finalizer may have to go, that they concern, until ctx ends.
func (r *jobRun) watch(ctx context.Context) {
	jobs := kit.NewCache[*batchv1.Job]()
	pods := kit.NewMetaCache()
	queueAll := func() {
		for _, key := range jobs.Keys() {
			r.queue.Add(key)
		}
	}
	// orphanPodsOf queues the pods of a Job that is gone or finished.
	orphanPodsOf := func(uid types.UID) {
		for _, pod := range pods.Controlled(uid) {
			if jobControllerUID(pod) == uid && jobHasFinalizer(pod) {
				r.orphans.Add(kit.Key(pod))
			}
		}
	}
	loop := kit.Loop{Store: r.store, Log: r.log, Name: "job controller", Resync: queueAll, ResyncEvery: jobResync}
	loop.Run(ctx,
		jobs.Watch(r.jobRes, nil, func(typ watch.EventType, _, job *batchv1.Job) {
			r.queue.Add(kit.Key(job))
			// A finished Job's pods may have kept their finalizer.
			if typ == watch.Deleted || jobFinished(job) {
				orphanPodsOf(job.UID)
			}
		}),
		kit.WatchMeta(pods, r.podRes, queueAll, func(typ watch.EventType, old, pod *metav1.PartialObjectMetadata) {
			key := kit.Key(pod)
			gone := typ == watch.Deleted
			cur := jobControllerUID(pod)
			// A Job that controlled the pod before this change hears of it.
			if old != nil {
				if prev := jobControllerUID(old); prev != "" && prev != cur {
					if k, ok := jobs.KeyOfUID(prev); ok {
						r.queue.Add(k)
					}
				}
			}
			tracked := !gone && jobHasFinalizer(pod)
			switch {
			case cur != "":
				job, ok := jobs.ByUID(cur)
				if ok {
					r.queue.Add(kit.Key(job))
				}
				if tracked && (!ok || jobFinished(job)) {
					r.orphans.Add(key)
				}
			case metav1.GetControllerOf(pod) == nil && !gone:
				if tracked {
					r.orphans.Add(key)
				}
				// An orphan: every Job it matches may adopt it.
				set := labels.Set(pod.Labels)
				for _, job := range jobs.List(pod.Namespace) {
					if sel, err := metav1.LabelSelectorAsSelector(job.Spec.Selector); err == nil && sel.Matches(set) {
						r.queue.Add(kit.Key(job))
					}
				}
			}
		}))
}

// jobControllerUID is the UID of the Job controlling a pod, if any.
func jobControllerUID(pod metav1.Object) types.UID {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != jobKind.Kind || ref.APIVersion != jobKind.GroupVersion().String() {
		return ""
	}
	return ref.UID
}

func jobHasFinalizer(pod metav1.Object) bool {
	return slices.Contains(pod.GetFinalizers(), batchv1.JobTrackingFinalizer)
}

func jobCondition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		if c := &job.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// jobFinished: the Job is Complete or Failed.
func jobFinished(job *batchv1.Job) bool {
	return jobCondition(job, batchv1.JobComplete) != nil || jobCondition(job, batchv1.JobFailed) != nil
}

func jobSuspended(job *batchv1.Job) bool { return job.Spec.Suspend != nil && *job.Spec.Suspend }

func jobIndexed(job *batchv1.Job) bool {
	return job.Spec.CompletionMode != nil && *job.Spec.CompletionMode == batchv1.IndexedCompletion
}

// jobOnlyReplaceFailed: a pod being deleted is replaced only once it has
// failed (podReplacementPolicy Failed, the only one with a
// podFailurePolicy).
func jobOnlyReplaceFailed(job *batchv1.Job) bool {
	return job.Spec.PodFailurePolicy != nil ||
		job.Spec.PodReplacementPolicy != nil && *job.Spec.PodReplacementPolicy == batchv1.Failed
}

// jobPodFailed: the pod failed, or (unless only failed pods are replaced)
// was deleted before it succeeded, which counts as a failure.
func jobPodFailed(pod *corev1.Pod, job *batchv1.Job) bool {
	if pod.Status.Phase == corev1.PodFailed {
		return true
	}
	return !jobOnlyReplaceFailed(job) && pod.DeletionTimestamp != nil && pod.Status.Phase != corev1.PodSucceeded
}

// jobIndex is a pod's completion index, or -1.
func jobIndex(pod *corev1.Pod) int {
	i, err := strconv.Atoi(pod.Annotations[batchv1.JobCompletionIndexAnnotation])
	if err != nil || i < 0 {
		return -1
	}
	return i
}

// syncOrphan removes the tracking finalizer from a pod whose Job is gone
// or finished, or that no Job controls.
func (r *jobRun) syncOrphan(ctx context.Context, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	obj, err := r.store.Get(ctx, r.podRes, ns, name, metav1.GetOptions{ResourceVersion: "0"})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get pod: %w", err)
	}
	pod := obj.(*corev1.Pod)
	if !jobHasFinalizer(pod) {
		return nil
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		if jobControllerUID(pod) == "" {
			return nil // not a Job's pod: not ours to touch
		}
		jobObj, err := r.store.Get(ctx, r.jobRes, ns, ref.Name, metav1.GetOptions{ResourceVersion: "0"})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("get job: %w", err)
		default:
			job := jobObj.(*batchv1.Job)
			if job.UID == ref.UID && (!jobManagedHere(job) || !jobFinished(job)) {
				return nil // its Job counts it
			}
		}
	}
	return jobDropFinalizer(ctx, r.store, r.podRes, pod)
}

func jobManagedHere(job *batchv1.Job) bool {
	return job.Spec.ManagedBy == nil || *job.Spec.ManagedBy == jobManagedBy
}

// jobDropFinalizer removes the tracking finalizer from a pod; a pod
// already gone is not an error.
func jobDropFinalizer(ctx context.Context, store *registry.Store, res *registry.Resource, pod *corev1.Pod) error {
	_, err := store.Mutate(ctx, res, pod.Namespace, pod.Name, "", func(obj runtime.Object) error {
		p := obj.(*corev1.Pod)
		if p.UID != pod.UID {
			return kit.ErrClaimSkip
		}
		p.Finalizers = slices.DeleteFunc(p.Finalizers, func(f string) bool { return f == batchv1.JobTrackingFinalizer })
		return nil
	})
	if err == nil || errors.Is(err, kit.ErrClaimSkip) || apierrors.IsNotFound(err) {
		return nil
	}
	return fmt.Errorf("remove tracking finalizer of pod %s: %w", pod.Name, err)
}

func (r *jobRun) sync(ctx context.Context, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	obj, err := r.store.Get(ctx, r.jobRes, ns, name, metav1.GetOptions{ResourceVersion: "0"})
	if apierrors.IsNotFound(err) {
		r.setBackoff(key, nil)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get job: %w", err)
	}
	job := obj.(*batchv1.Job)
	if !jobManagedHere(job) {
		return nil
	}
	if jobFinished(job) {
		r.setBackoff(key, nil)
		return r.expire(ctx, key, job)
	}
	if m := job.Spec.CompletionMode; m != nil && *m != batchv1.NonIndexedCompletion && *m != batchv1.IndexedCompletion {
		r.log.Warn("job controller: "+jobMsgUnknownMode, "job", key)
		kit.Record(r.events, job, corev1.EventTypeWarning, "UnknownCompletionMode", jobMsgUnknownMode)
		return nil
	}
	s := &jobSync{jobRun: r, ctx: ctx, key: key, job: job.DeepCopy()}
	return s.run()
}

// expire deletes a finished Job ttlSecondsAfterFinished after it finished
// (foreground: its pods go first), or queues it for then.
func (r *jobRun) expire(ctx context.Context, key string, job *batchv1.Job) error {
	if job.Spec.TTLSecondsAfterFinished == nil || job.DeletionTimestamp != nil {
		return nil
	}
	c := jobCondition(job, batchv1.JobComplete)
	if c == nil {
		c = jobCondition(job, batchv1.JobFailed)
	}
	at := c.LastTransitionTime.Add(time.Duration(*job.Spec.TTLSecondsAfterFinished) * time.Second)
	if wait := at.Sub(r.now()); wait > 0 {
		r.queue.AddAfter(key, wait)
		return nil
	}
	// Read afresh: the TTL may have changed since.
	obj, err := r.store.Get(ctx, r.jobRes, job.Namespace, job.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get job: %w", err)
	}
	fresh := obj.(*batchv1.Job)
	if fresh.UID != job.UID || fresh.DeletionTimestamp != nil {
		return nil
	}
	if ttl := fresh.Spec.TTLSecondsAfterFinished; ttl == nil || *ttl != *job.Spec.TTLSecondsAfterFinished {
		r.queue.Add(key)
		return nil
	}
	policy := metav1.DeletePropagationForeground
	uid := fresh.UID
	_, _, err = r.store.Delete(ctx, r.jobRes, job.Namespace, job.Name, metav1.DeleteOptions{
		PropagationPolicy: &policy, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete finished job: %w", err)
	}
	r.log.Info("job controller: Cleaning up Job: its ttlSecondsAfterFinished passed", "job", key)
	return nil
}
