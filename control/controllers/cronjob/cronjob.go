// Package cronjob is the CronJob controller.
package cronjob

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/events"
	"github.com/isle-cluster/isle/control/registry"
)

// Controller runs the Jobs of every batch/v1 CronJob, as upstream's
// (the v2 controller):
//   - at each time of the schedule (standard cron and its macros, in
//     spec.timeZone) it creates the Job <name>-<minutes since the
//     epoch> from the job template, owned by the CronJob and annotated with
//     the scheduled time; a time is only run once (status.lastScheduleTime);
//   - after an outage (the control plane down, the CronJob suspended) only
//     the most recent missed time is run, and only within
//     startingDeadlineSeconds of it; more than 100 missed times are
//     reported (TooManyMissedTimes);
//   - Forbid skips a time while a Job runs, Replace deletes the running
//     ones first, Allow runs them side by side;
//   - status.active follows the Jobs, lastSuccessfulTime their success;
//     finished Jobs beyond the history limits are deleted, oldest first.
type Controller struct {
	store  *registry.Store
	log    *slog.Logger
	events *events.Recorder
	now    func() time.Time // nil: time.Now
	// synced, if set, is called after each sync (for tests).
	synced func(key string, rev int64)
}

// New returns the CronJob controller, recording its Events with rec.
func New(store *registry.Store, log *slog.Logger, rec *events.Recorder) *Controller {
	return &Controller{store: store, log: log, events: rec}
}

// Name is the controller's name in the table.
func (c *Controller) Name() string { return "cronjob" }

const (
	resync    = 5 * time.Minute
	workers   = 2
	retryBase = 100 * time.Millisecond
	retryMax  = time.Minute
	// nextDelta is added to a requeue for the next time, so that the sync
	// runs once it has passed (upstream's nextScheduleDelta).
	nextDelta = 100 * time.Millisecond
	// tooMany missed times are reported instead of run through.
	tooMany = 100
)

var cronJobKind = batchv1.SchemeGroupVersion.WithKind("CronJob")

type run struct {
	*Controller
	now      func() time.Time
	cronJobs *registry.Resource
	jobs     *registry.Resource
	queue    *kit.Queue
}

// Run reconciles until ctx ends (when this member stops leading).
func (c *Controller) Run(ctx context.Context) {
	r := &run{Controller: c, now: c.now,
		cronJobs: kit.MustLookup(c.store, batchv1.SchemeGroupVersion.WithResource("cronjobs")),
		jobs:     kit.MustLookup(c.store, batchv1.SchemeGroupVersion.WithResource("jobs")),
		queue:    kit.NewQueue(retryBase, retryMax)}
	if r.now == nil {
		r.now = time.Now
	}
	var wg sync.WaitGroup
	wg.Go(func() { r.watch(ctx) })
	kit.RunWorkers(ctx, workers, r.queue, func(key string) { r.work(ctx, key) })
	wg.Wait()
}

// watch follows CronJobs and Jobs and queues the CronJobs they concern.
func (r *run) watch(ctx context.Context) {
	cronJobs := kit.NewCache[*batchv1.CronJob]()
	jobs := kit.NewMetaCache()
	queueAll := func() {
		for _, key := range cronJobs.Keys() {
			r.queue.Add(key)
		}
	}
	loop := kit.Loop{Store: r.store, Log: r.log, Name: "cronjob controller", Resync: queueAll, ResyncEvery: resync}
	loop.Run(ctx,
		cronJobs.Watch(r.cronJobs, nil, func(typ watch.EventType, _, cj *batchv1.CronJob) {
			if typ != watch.Deleted {
				r.queue.Add(kit.Key(cj))
			}
		}),
		kit.WatchMeta(jobs, r.jobs, queueAll, func(_ watch.EventType, _, job *metav1.PartialObjectMetadata) {
			if ref := metav1.GetControllerOf(job); ref != nil && ref.Kind == cronJobKind.Kind {
				if key, ok := cronJobs.KeyOfUID(ref.UID); ok {
					r.queue.Add(key)
				}
			}
		}))
}

func (r *run) work(ctx context.Context, key string) {
	rev := r.store.Revision()
	next, err := r.sync(ctx, key)
	switch {
	case err != nil && ctx.Err() == nil:
		r.log.Warn("cronjob controller: reconcile failed; will retry", "cronjob", key, "err", err)
		r.queue.Retry(key)
	default:
		r.queue.Forget(key)
		if next > 0 {
			r.queue.AddAfter(key, next)
		}
	}
	if r.synced != nil {
		r.synced(key, rev)
	}
}

var errSkip = errors.New("cronjob controller: CronJob changed; skipped")

// finished reports whether a Job is over, and how.
func finished(j *batchv1.Job) (batchv1.JobConditionType, bool) {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.Type, true
		}
	}
	return "", false
}

// sync reconciles one CronJob; it returns when to look again (0: at the
// next event).
func (r *run) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name, _ := strings.Cut(key, "/")
	obj, err := r.store.Get(ctx, r.cronJobs, ns, name, metav1.GetOptions{ResourceVersion: "0"})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	cj := obj.(*batchv1.CronJob)
	list, err := r.store.List(ctx, r.jobs, ns, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return 0, err
	}
	var jobs []*batchv1.Job
	for i := range list.(*batchv1.JobList).Items {
		j := &list.(*batchv1.JobList).Items[i]
		if metav1.IsControlledBy(j, cj) {
			jobs = append(jobs, j)
		}
	}
	st := cj.Status.DeepCopy()
	s := &cronSync{run: r, ctx: ctx, cj: cj, st: st}
	s.follow(jobs)
	cleanErr := s.cleanUp(jobs)
	next, syncErr := s.schedule()
	return next, errors.Join(cleanErr, syncErr, s.writeStatus())
}

// cronSync is one reconcile of one CronJob.
type cronSync struct {
	*run
	ctx context.Context
	cj  *batchv1.CronJob
	st  *batchv1.CronJobStatus // as it will be written
}

func (s *cronSync) event(typ, reason, format string, args ...any) {
	s.events.Eventf(s.cj, typ, reason, format, args...)
}

// follow brings status.active and lastSuccessfulTime up to date with the
// CronJob's Jobs.
func (s *cronSync) follow(jobs []*batchv1.Job) {
	listed := map[types.UID]bool{}
	for _, j := range jobs {
		listed[j.UID] = true
		active := slices.ContainsFunc(s.st.Active, func(ref corev1.ObjectReference) bool { return ref.UID == j.UID })
		how, done := finished(j)
		switch {
		case !done && !active:
			s.event(corev1.EventTypeWarning, "UnexpectedJob", "Saw a job that the controller did not create or forgot: %s", j.Name)
		case done && active:
			s.removeActive(j.UID)
			s.event(corev1.EventTypeNormal, "SawCompletedJob", "Saw completed job: %s, condition: %v", j.Name, how)
		}
		if how == batchv1.JobComplete && j.Status.CompletionTime != nil &&
			(s.st.LastSuccessfulTime == nil || j.Status.CompletionTime.After(s.st.LastSuccessfulTime.Time)) {
			s.st.LastSuccessfulTime = j.Status.CompletionTime.DeepCopy()
		}
	}
	for _, ref := range slices.Clone(s.st.Active) {
		if !listed[ref.UID] {
			s.removeActive(ref.UID)
			s.event(corev1.EventTypeNormal, "MissingJob", "Active job went missing: %v", ref.Name)
		}
	}
}

func (s *cronSync) removeActive(uid types.UID) {
	s.st.Active = slices.DeleteFunc(s.st.Active, func(ref corev1.ObjectReference) bool { return ref.UID == uid })
	if len(s.st.Active) == 0 {
		s.st.Active = nil
	}
}

// cleanUp deletes the finished Jobs beyond the history limits, oldest
// first.
func (s *cronSync) cleanUp(jobs []*batchv1.Job) error {
	var ok, failed []*batchv1.Job
	for _, j := range jobs {
		switch how, _ := finished(j); how {
		case batchv1.JobComplete:
			ok = append(ok, j)
		case batchv1.JobFailed:
			failed = append(failed, j)
		}
	}
	var errs []error
	for _, c := range []struct {
		jobs  []*batchv1.Job
		limit *int32
	}{{ok, s.cj.Spec.SuccessfulJobsHistoryLimit}, {failed, s.cj.Spec.FailedJobsHistoryLimit}} {
		if c.limit == nil || len(c.jobs) <= int(*c.limit) {
			continue
		}
		slices.SortFunc(c.jobs, func(a, b *batchv1.Job) int {
			return startOf(a).Compare(startOf(b))
		})
		for _, j := range c.jobs[:len(c.jobs)-int(max(*c.limit, 0))] {
			errs = append(errs, s.deleteJob(j))
		}
	}
	return errors.Join(errs...)
}

// startOf is when a Job started (its creation if it never did).
func startOf(j *batchv1.Job) time.Time {
	if j.Status.StartTime != nil {
		return j.Status.StartTime.Time
	}
	return j.CreationTimestamp.Time
}

func (s *cronSync) deleteJob(j *batchv1.Job) error {
	background, uid := metav1.DeletePropagationBackground, j.UID
	_, _, err := s.store.Delete(s.ctx, s.jobs, j.Namespace, j.Name, metav1.DeleteOptions{PropagationPolicy: &background,
		Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case err == nil:
		s.removeActive(uid)
		s.event(corev1.EventTypeNormal, "SuccessfulDelete", "Deleted job %v", j.Name)
		return nil
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return nil
	}
	s.event(corev1.EventTypeWarning, "FailedDelete", "Deleted job: %v", err)
	return err
}

// schedule runs the Job of the most recent time due, if any and if the
// policies allow; it returns how long until the next time.
func (s *cronSync) schedule() (time.Duration, error) {
	cj := s.cj
	if cj.DeletionTimestamp != nil || kit.Deref(cj.Spec.Suspend) {
		return 0, nil
	}
	// Without a time zone, the server's own, as upstream's controller
	// manager's (the scheduled-time annotation is then in UTC).
	loc, stamp := time.Local, time.UTC
	if tz := cj.Spec.TimeZone; tz != nil {
		l, err := time.LoadLocation(*tz)
		if err != nil {
			s.event(corev1.EventTypeWarning, "UnknownTimeZone", "invalid timeZone: %q: %s", *tz, err)
			return 0, nil
		}
		loc, stamp = l, l
	}
	sched, err := cron.ParseStandard(cj.Spec.Schedule)
	if err != nil {
		s.event(corev1.EventTypeWarning, "UnparseableSchedule", "unparseable schedule: %q : %s", cj.Spec.Schedule, err)
		return 0, nil
	}
	now := s.now()
	if strings.Contains(cj.Spec.Schedule, "TZ") {
		s.event(corev1.EventTypeWarning, "UnsupportedSchedule", "CRON_TZ or TZ used in schedule %q is not officially supported", cj.Spec.Schedule)
	} else {
		sched = inZone{sched, loc}
	}
	due, missed, err := s.mostRecent(now, sched, true)
	if err != nil {
		s.event(corev1.EventTypeWarning, "InvalidSchedule", "invalid schedule: %s : %s", cj.Spec.Schedule, err)
		return 0, nil
	}
	if missed > tooMany {
		s.event(corev1.EventTypeWarning, "TooManyMissedTimes", "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew")
	}
	next := s.untilNext(now, sched)
	if due == nil {
		return next, nil
	}
	if d := cj.Spec.StartingDeadlineSeconds; d != nil && due.Add(time.Duration(*d)*time.Second).Before(now) {
		s.event(corev1.EventTypeWarning, "MissSchedule", "Missed scheduled time to start a job: %s", due.UTC().Format(time.RFC1123Z))
		return next, nil
	}
	name := fmt.Sprintf("%s-%d", cj.Name, due.Unix()/60)
	if slices.ContainsFunc(s.st.Active, func(ref corev1.ObjectReference) bool { return ref.Name == name }) ||
		s.st.LastScheduleTime != nil && s.st.LastScheduleTime.Time.Equal(*due) {
		return next, nil
	}
	switch cj.Spec.ConcurrencyPolicy {
	case batchv1.ForbidConcurrent:
		if len(s.st.Active) > 0 {
			s.event(corev1.EventTypeNormal, "JobAlreadyActive", "Not starting job because prior execution is running and concurrency policy is Forbid")
			return next, nil
		}
	case batchv1.ReplaceConcurrent:
		for _, ref := range slices.Clone(s.st.Active) {
			obj, err := s.store.Get(s.ctx, s.jobs, ref.Namespace, ref.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				s.removeActive(ref.UID)
				continue
			}
			if err != nil {
				return 0, err
			}
			if err := s.deleteJob(obj.(*batchv1.Job)); err != nil {
				return 0, fmt.Errorf("could not replace job %s/%s: %w", ref.Namespace, ref.Name, err)
			}
		}
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cj.Namespace,
			Labels: maps.Clone(cj.Spec.JobTemplate.Labels), Annotations: maps.Clone(cj.Spec.JobTemplate.Annotations),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, cronJobKind)}},
		Spec: *cj.Spec.JobTemplate.Spec.DeepCopy(),
	}
	if job.Annotations == nil {
		job.Annotations = map[string]string{}
	}
	job.Annotations[batchv1.CronJobScheduledTimestampAnnotation] = due.In(stamp).Format(time.RFC3339)
	out, err := s.store.Create(s.ctx, s.jobs, cj.Namespace, job, registry.WriteOptions{})
	switch {
	case err == nil:
		s.event(corev1.EventTypeNormal, "SuccessfulCreate", "Created job %v", name)
		s.log.Info("cronjob controller: created job", "cronjob", kit.Key(cj), "job", name, "scheduled", due.UTC())
	case apierrors.IsAlreadyExists(err):
		got, gerr := s.store.Get(s.ctx, s.jobs, cj.Namespace, name, metav1.GetOptions{})
		if gerr != nil {
			return 0, gerr
		}
		if !metav1.IsControlledBy(got.(metav1.Object), cj) {
			return next, nil
		}
		out = got
	case kit.NamespaceTerminating(err):
		return 0, nil
	default:
		s.event(corev1.EventTypeWarning, "FailedCreate", "Error creating job: %v", err)
		return 0, err
	}
	j := out.(*batchv1.Job)
	if !slices.ContainsFunc(s.st.Active, func(ref corev1.ObjectReference) bool { return ref.UID == j.UID }) {
		s.st.Active = append(s.st.Active, corev1.ObjectReference{Kind: "Job", APIVersion: "batch/v1", Namespace: j.Namespace, Name: j.Name,
			UID: j.UID, ResourceVersion: j.ResourceVersion})
	}
	s.st.LastScheduleTime = &metav1.Time{Time: *due}
	return s.untilNext(now, sched), nil
}

// inZone is a schedule read in a time zone.
type inZone struct {
	cron.Schedule
	loc *time.Location
}

func (z inZone) Next(t time.Time) time.Time { return z.Schedule.Next(t.In(z.loc)) }

// mostRecent is upstream's mostRecentScheduleTime: the latest time of
// the schedule after the last one run (or the creation, or the starting
// deadline) and not after now, and about how many were missed.
func (s *cronSync) mostRecent(now time.Time, sched cron.Schedule, withDeadline bool) (*time.Time, int64, error) {
	earliest := s.cj.CreationTimestamp.Time
	if t := s.st.LastScheduleTime; t != nil {
		earliest = t.Time
	}
	if d := s.cj.Spec.StartingDeadlineSeconds; withDeadline && d != nil {
		if dl := now.Add(-time.Duration(*d) * time.Second); dl.After(earliest) {
			earliest = dl
		}
	}
	t1 := sched.Next(earliest)
	t2 := sched.Next(t1)
	switch {
	case now.Before(t1):
		return nil, 0, nil
	case now.Before(t2):
		return &t1, 1, nil
	}
	between := int64(t2.Sub(t1).Round(time.Second).Seconds())
	if between < 1 {
		return nil, 0, errors.New("time difference between two schedules is less than 1 second")
	}
	missed := int64(now.Sub(t1).Seconds())/between + 1
	var recent time.Time
	for t := sched.Next(t1.Add(time.Duration((missed-2)*between) * time.Second)); !t.After(now); t = sched.Next(t) {
		recent = t
	}
	if recent.IsZero() {
		return nil, missed, nil
	}
	return &recent, missed, nil
}

// untilNext is how long from now until the time after the most recent one.
func (s *cronSync) untilNext(now time.Time, sched cron.Schedule) time.Duration {
	from := now
	if recent, missed, err := s.mostRecent(now, sched, false); err == nil && recent != nil {
		from = *recent
	} else if err == nil && missed == 0 {
		from = s.cj.CreationTimestamp.Time
		if t := s.st.LastScheduleTime; t != nil {
			from = t.Time
		}
	}
	return sched.Next(from).Add(nextDelta).Sub(now)
}

// writeStatus writes the status if it changed.
func (s *cronSync) writeStatus() error {
	if equality.Semantic.DeepEqual(&s.cj.Status, s.st) {
		return nil
	}
	_, err := s.store.Mutate(s.ctx, s.cronJobs, s.cj.Namespace, s.cj.Name, "status", func(obj runtime.Object) error {
		cur := obj.(*batchv1.CronJob)
		if cur.UID != s.cj.UID {
			return errSkip
		}
		cur.Status = *s.st
		return nil
	})
	if errors.Is(err, errSkip) || apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
