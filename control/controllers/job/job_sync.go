package job

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/registry"
)

// jobSync is one reconcile of one Job; job is the working copy whose
// status is written.
type jobSync struct {
	*jobRun
	ctx context.Context
	key string
	job *batchv1.Job

	pods        []*corev1.Pod // all its pods
	active      []*corev1.Pod // not finished, not being deleted
	ready       int32
	terminating int32
	succeeded   int32
	failed      int32
	// uncSucceeded and uncFailed are the UIDs recorded, not yet counted.
	uncSucceeded, uncFailed sets.Set[types.UID]
	// prevIndexes are the completed indexes of the status; indexes those
	// plus the ones that succeeded since (Indexed Jobs).
	prevIndexes, indexes sets.Set[int]
	// failedIndexes are the indexes that failed, and delayed by index the
	// failed pods kept until their replacement is made (Indexed Jobs with
	// backoffLimitPerIndex; nil otherwise).
	failedIndexes sets.Set[int]
	delayed       map[int]*corev1.Pod
	// finished is the condition the Job is heading for: FailureTarget or
	// SuccessCriteriaMet, then Failed or Complete.
	finished   *batchv1.JobCondition
	newBackoff jobBackoff
}

func (s *jobSync) run() error {
	job := s.job
	if job.Status.UncountedTerminatedPods == nil {
		job.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	}
	if err := s.loadPods(); err != nil {
		return err
	}
	unc := job.Status.UncountedTerminatedPods
	s.uncSucceeded, s.uncFailed = sets.New(unc.Succeeded...), sets.New(unc.Failed...)
	newSucceeded, newFailed := s.newlyFinished()
	s.succeeded = job.Status.Succeeded + int32(len(newSucceeded)+len(unc.Succeeded))
	// Failures the pod failure policy ignores do not count.
	s.failed = job.Status.Failed + int32(s.countedFailures(newFailed)+len(unc.Failed))
	now := s.now()
	if job.Status.StartTime == nil && !jobSuspended(job) {
		job.Status.StartTime = jobTime(now)
	}
	s.newBackoff = s.nextBackoff(newSucceeded, newFailed)

	if c := jobCondition(job, batchv1.JobSuccessCriteriaMet); c != nil {
		s.finished = c.DeepCopy()
	} else if c := jobCondition(job, batchv1.JobFailureTarget); c != nil {
		s.finished = s.newCondition(batchv1.JobFailed, c.Reason, c.Message)
	} else if msg := s.failJobMessage(); msg != "" {
		s.finished = s.newCondition(batchv1.JobFailureTarget, batchv1.JobReasonPodFailurePolicy, msg)
	}
	if s.finished == nil {
		switch {
		case s.failed > *job.Spec.BackoffLimit || s.pastBackoffLimitOnFailure():
			s.finished = s.newCondition(batchv1.JobFailureTarget, batchv1.JobReasonBackoffLimitExceeded, jobMsgBackoffLimit)
		case s.pastActiveDeadline():
			s.finished = s.newCondition(batchv1.JobFailureTarget, batchv1.JobReasonDeadlineExceeded, jobMsgDeadline)
		case job.Spec.ActiveDeadlineSeconds != nil && !jobSuspended(job):
			deadline := job.Status.StartTime.Add(time.Duration(*job.Spec.ActiveDeadlineSeconds) * time.Second)
			s.queue.AddAfter(s.key, deadline.Sub(now))
		}
	}
	if jobIndexed(job) {
		s.prevIndexes = jobParseIndexes(job.Status.CompletedIndexes, int(*job.Spec.Completions))
		s.indexes = s.prevIndexes.Clone()
		for _, pod := range s.pods {
			if ix := jobIndex(pod); pod.Status.Phase == corev1.PodSucceeded && ix >= 0 && ix < int(*job.Spec.Completions) && jobHasFinalizer(pod) {
				s.indexes.Insert(ix)
			}
		}
		s.succeeded = int32(s.indexes.Len())
		s.judgeIndexes()
	}

	active := int32(len(s.active))
	suspendChanged := false
	var manageErr error
	if s.finished != nil {
		readyGone, gone, err := s.deletePods(s.active, false)
		if gone != active {
			s.finished = nil // not finished while pods it did not delete may run
		}
		active -= gone
		s.terminating += gone
		s.ready -= readyGone
		manageErr = err
	} else {
		managed := job.DeletionTimestamp == nil
		if managed {
			active, manageErr = s.manage()
		}
		var complete bool
		if job.Spec.Completions == nil {
			// Any success means the work is done, once no pod runs.
			complete = s.succeeded > 0 && active == 0
		} else {
			complete = s.succeeded >= *job.Spec.Completions && active == 0
		}
		switch {
		case complete:
			s.finished = s.newCondition(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached, jobMsgCompletions)
		case managed && jobSuspended(job):
			suspendChanged = s.ensureCondition(batchv1.JobSuspended, corev1.ConditionTrue, jobReasonSuspended, jobMsgSuspended)
			if suspendChanged {
				s.log.Info("job controller: "+jobMsgSuspended, "job", s.key)
				kit.Record(s.events, job, corev1.EventTypeNormal, "Suspended", jobMsgSuspended)
			}
		case managed:
			suspendChanged = s.ensureCondition(batchv1.JobSuspended, corev1.ConditionFalse, jobReasonResumed, jobMsgResumed)
			if suspendChanged {
				// activeDeadlineSeconds counts the time a Job is
				// continuously active: resuming starts it again.
				job.Status.StartTime = jobTime(now)
				s.log.Info("job controller: "+jobMsgResumed, "job", s.key)
				kit.Record(s.events, job, corev1.EventTypeNormal, "Resumed", jobMsgResumed)
			}
		}
	}
	needsFlush := suspendChanged || active != job.Status.Active ||
		job.Status.Ready == nil || *job.Status.Ready != s.ready ||
		job.Status.Terminating == nil || *job.Status.Terminating != s.terminating
	job.Status.Active = active
	job.Status.Ready = &s.ready
	job.Status.Terminating = &s.terminating
	if err := s.track(needsFlush); err != nil {
		return fmt.Errorf("tracking status: %w", err)
	}
	return manageErr
}

// judgeIndexes finds the failed indexes of a Job with backoffLimitPerIndex
// and fails the Job when too many failed, or when every index is done and
// some failed; otherwise it completes the Job if its success policy is met.
func (s *jobSync) judgeIndexes() {
	job := s.job
	completions := int(*job.Spec.Completions)
	if jobPerIndex(job) {
		s.failedIndexes = s.findFailedIndexes()
		failed := s.failedIndexes.Len()
		if s.finished == nil {
			switch {
			case job.Spec.MaxFailedIndexes != nil && failed > int(*job.Spec.MaxFailedIndexes):
				s.finished = s.newCondition(batchv1.JobFailureTarget, batchv1.JobReasonMaxFailedIndexesExceeded, jobMsgMaxFailedIndexes)
			case failed > 0 && failed+s.indexes.Len() >= completions:
				s.finished = s.newCondition(batchv1.JobFailureTarget, batchv1.JobReasonFailedIndexes, jobMsgFailedIndexes)
			}
		}
		s.delayed = s.findDelayed()
	}
	if s.finished == nil {
		if msg, met := jobMeetsSuccessPolicy(job.Spec.SuccessPolicy, completions, s.indexes); met {
			s.finished = s.newCondition(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonSuccessPolicy, msg)
		}
	}
}

func jobTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t.UTC().Truncate(time.Second))
	return &mt
}

func (s *jobSync) newCondition(t batchv1.JobConditionType, reason, message string) *batchv1.JobCondition {
	at := *jobTime(s.now())
	return &batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: message, LastProbeTime: at, LastTransitionTime: at}
}

// ensureCondition sets a condition's status, reason and message (a False
// condition is not added where there is none) and reports a change.
func (s *jobSync) ensureCondition(t batchv1.JobConditionType, status corev1.ConditionStatus, reason, message string) bool {
	at := *jobTime(s.now())
	c := batchv1.JobCondition{Type: t, Status: status, Reason: reason, Message: message, LastProbeTime: at, LastTransitionTime: at}
	for i := range s.job.Status.Conditions {
		cur := &s.job.Status.Conditions[i]
		if cur.Type != t {
			continue
		}
		if cur.Status == status && cur.Reason == reason && cur.Message == message {
			return false
		}
		*cur = c
		return true
	}
	if status == corev1.ConditionFalse {
		return false
	}
	s.job.Status.Conditions = append(s.job.Status.Conditions, c)
	return true
}

// loadPods reads the Job's pods (adopting and releasing), its active
// pods, and how many are ready and terminating.
func (s *jobSync) loadPods() error {
	sel, err := metav1.LabelSelectorAsSelector(s.job.Spec.Selector)
	if err != nil {
		return fmt.Errorf("job selector: %w", err)
	}
	list, err := s.store.List(s.ctx, s.podRes, s.job.Namespace, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	var all []*corev1.Pod
	for i := range list.(*corev1.PodList).Items {
		all = append(all, &list.(*corev1.PodList).Items[i])
	}
	if s.pods, err = kit.ClaimPods(s.ctx, s.store, s.podRes, s.job, jobKind, sel, all, batchv1.JobTrackingFinalizer); err != nil {
		return err
	}
	for _, pod := range s.pods {
		switch {
		case kit.PodFinished(pod):
		case pod.DeletionTimestamp != nil:
			s.terminating++
		default:
			s.active = append(s.active, pod)
			if kit.PodReady(pod) {
				s.ready++
			}
		}
	}
	return nil
}

// newlyFinished returns the finished pods not counted nor recorded yet.
func (s *jobSync) newlyFinished() (succeeded, failed []*corev1.Pod) {
	for _, pod := range s.pods {
		if !jobHasFinalizer(pod) || s.uncSucceeded.Has(pod.UID) || s.uncFailed.Has(pod.UID) {
			continue
		}
		if jobIndexed(s.job) {
			if ix := jobIndex(pod); ix < 0 || ix >= int(*s.job.Spec.Completions) {
				continue
			}
		}
		switch {
		case pod.Status.Phase == corev1.PodSucceeded:
			succeeded = append(succeeded, pod)
		case jobPodFailed(pod, s.job):
			failed = append(failed, pod)
		}
	}
	return succeeded, failed
}

// pastBackoffLimitOnFailure: with restartPolicy OnFailure, the restarts of
// the containers of running and pending pods reach backoffLimit.
func (s *jobSync) pastBackoffLimitOnFailure() bool {
	if s.job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		return false
	}
	var restarts int32
	for _, pod := range s.pods {
		if pod.Status.Phase != corev1.PodRunning && pod.Status.Phase != corev1.PodPending {
			continue
		}
		for _, st := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
			for _, c := range st {
				restarts += c.RestartCount
			}
		}
	}
	if limit := *s.job.Spec.BackoffLimit; limit > 0 {
		return restarts >= limit
	}
	return restarts > 0
}

func (s *jobSync) pastActiveDeadline() bool {
	ads := s.job.Spec.ActiveDeadlineSeconds
	if ads == nil || s.job.Status.StartTime == nil || jobSuspended(s.job) {
		return false
	}
	return s.now().Sub(s.job.Status.StartTime.Time) >= time.Duration(*ads)*time.Second
}

// manage creates and deletes pods towards the number that should be
// active, and returns the number active.
func (s *jobSync) manage() (int32, error) {
	job := s.job
	active := int32(len(s.active))
	if jobSuspended(job) {
		readyGone, gone, err := s.deletePods(s.forRemoval(len(s.active)), true)
		s.terminating += gone
		s.ready -= readyGone
		return active - gone, err
	}
	want := *job.Spec.Parallelism
	switch {
	case job.Spec.Completions == nil && s.succeeded > 0:
		want = active // after a success, what runs may finish; nothing new starts
	case job.Spec.Completions != nil:
		want = max(min(*job.Spec.Completions-s.succeeded, want), 0)
	}
	if victims := s.forRemoval(int(max(active-want, 0))); len(victims) > 0 {
		readyGone, gone, err := s.deletePods(victims[:min(len(victims), jobBurst)], true)
		s.terminating += gone
		s.ready -= readyGone
		return active - gone, err
	}
	var terminating int32
	if jobOnlyReplaceFailed(job) {
		terminating = s.terminating
	}
	diff := want - terminating - active
	if diff <= 0 {
		return active, nil
	}
	if !jobPerIndex(job) {
		// With backoffLimitPerIndex each index backs off on its own.
		if wait := s.backoffRemaining(); wait > 0 {
			s.queue.AddAfter(s.key, wait)
			return active, nil
		}
	}
	diff = min(diff, jobBurst)
	var indexes []int
	if jobIndexed(job) {
		indexes = s.pendingIndexes(int(diff))
		if jobPerIndex(job) {
			var wait time.Duration
			if indexes, wait = s.indexesPastBackoff(indexes); wait > 0 {
				s.queue.AddAfter(s.key, wait) // for the indexes still backing off
			}
			if len(indexes) == 0 {
				return active, nil
			}
		}
		diff = int32(len(indexes))
	}
	template := job.Spec.Template.DeepCopy()
	if jobIndexed(job) {
		for _, cs := range [][]corev1.Container{template.Spec.InitContainers, template.Spec.Containers} {
			for i := range cs {
				jobAddIndexEnv(&cs[i])
			}
		}
	}
	if !slices.Contains(template.Finalizers, batchv1.JobTrackingFinalizer) {
		template.Finalizers = append(template.Finalizers, batchv1.JobTrackingFinalizer)
	}
	var next atomic.Int32
	created, err := kit.SlowStart(int(diff), func() error {
		ix := -1
		if indexes != nil {
			ix = indexes[next.Add(1)-1]
		}
		return s.createPod(template, ix)
	})
	if created > 0 {
		s.log.Info("job controller: created pods", "job", s.key, "count", created)
	}
	return active + int32(created), err
}

// jobAddIndexEnv gives a container JOB_COMPLETION_INDEX from the pod's
// completion index label, unless it sets the variable itself.
func jobAddIndexEnv(c *corev1.Container) {
	for _, e := range c.Env {
		if e.Name == jobIndexEnv {
			return
		}
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: jobIndexEnv, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
		FieldPath: fmt.Sprintf("metadata.labels['%s']", batchv1.JobCompletionIndexAnnotation)}}})
}

// createPod creates one pod of the Job (ix is its completion index, or -1).
func (s *jobSync) createPod(t *corev1.PodTemplateSpec, ix int) error {
	job := s.job
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    job.Name + "-",
			Labels:          maps.Clone(t.Labels),
			Annotations:     maps.Clone(t.Annotations),
			Finalizers:      slices.Clone(t.Finalizers),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, jobKind)},
		},
		Spec: *t.Spec.DeepCopy(),
	}
	if ix >= 0 {
		v := strconv.Itoa(ix)
		pod.Annotations = kit.WithLabel(pod.Annotations, batchv1.JobCompletionIndexAnnotation, v)
		pod.Labels = kit.WithLabel(pod.Labels, batchv1.JobCompletionIndexAnnotation, v)
		pod.Spec.Hostname = job.Name + "-" + v
		if jobPerIndex(job) {
			counted, ignored := s.indexFailureCounts(ix)
			pod.Annotations[batchv1.JobIndexFailureCountAnnotation] = strconv.Itoa(int(counted))
			if ignored > 0 {
				pod.Annotations[batchv1.JobIndexIgnoredFailureCountAnnotation] = strconv.Itoa(int(ignored))
			}
		}
		suffix := "-" + v + "-"
		prefix := job.Name
		if len(prefix)+len(suffix) > jobMaxGenerateName {
			prefix = prefix[:max(jobMaxGenerateName-len(suffix), 0)]
		}
		pod.GenerateName = prefix + suffix
	}
	return kit.CreateOwnedPod(s.ctx, s.store, s.podRes, s.events, job, pod)
}

// pendingIndexes returns up to n indexes that neither succeeded nor
// failed nor have an active pod (or, when only failed pods are replaced,
// a terminating one), lowest first.
func (s *jobSync) pendingIndexes(n int) []int {
	taken := s.indexes.Union(s.failedIndexes)
	onlyFailed := jobOnlyReplaceFailed(s.job)
	for _, pod := range s.pods {
		live := !kit.PodFinished(pod) && (pod.DeletionTimestamp == nil || onlyFailed)
		if ix := jobIndex(pod); ix >= 0 && live {
			taken.Insert(ix)
		}
	}
	var out []int
	for ix := 0; ix < int(*s.job.Spec.Completions) && len(out) < n; ix++ {
		if !taken.Has(ix) {
			out = append(out, ix)
		}
	}
	return out
}

// forRemoval returns at least n active pods to delete, the least advanced
// first; for Indexed Jobs first the pods without a valid index and all but
// one pod of an index.
func (s *jobSync) forRemoval(n int) []*corev1.Pod {
	left := slices.Clone(s.active)
	var rm []*corev1.Pod
	if jobIndexed(s.job) {
		byIndex := map[int][]*corev1.Pod{}
		for _, pod := range left {
			ix := jobIndex(pod)
			if ix < 0 || ix >= int(*s.job.Spec.Completions) {
				rm = append(rm, pod)
				continue
			}
			byIndex[ix] = append(byIndex[ix], pod)
		}
		left = left[:0]
		for _, ix := range slices.Sorted(maps.Keys(byIndex)) {
			pods := byIndex[ix]
			// Keep the most advanced pod of the index.
			slices.SortStableFunc(pods, func(a, b *corev1.Pod) int { return kit.DeleteFirst(a, b, 0, 0) })
			rm = append(rm, pods[:len(pods)-1]...)
			left = append(left, pods[len(pods)-1])
		}
	}
	if len(rm) < n {
		slices.SortStableFunc(left, func(a, b *corev1.Pod) int { return kit.DeleteFirst(a, b, 0, 0) })
		rm = append(rm, left[:min(n-len(rm), len(left))]...)
	}
	return rm
}

// deletePods deletes pods, first removing their finalizer (dropFinalizer:
// pods removed on purpose, not counted) or keeping it (the Job is failing:
// they are counted as failed once gone). It returns how many ready pods
// and how many pods it deleted.
func (s *jobSync) deletePods(pods []*corev1.Pod, dropFinalizer bool) (readyGone, gone int32, err error) {
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, pod := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if dropFinalizer && jobHasFinalizer(pod) {
				if errs[i] = jobDropFinalizer(s.ctx, s.store, s.podRes, pod); errs[i] != nil {
					return
				}
			}
			errs[i] = kit.DeleteOwnedPod(s.ctx, s.store, s.podRes, s.events, s.job, pod, -1)
		}()
	}
	wg.Wait()
	for i, pod := range pods {
		if errs[i] != nil {
			continue
		}
		gone++
		if kit.PodReady(pod) {
			readyGone++
		}
	}
	if gone > 0 {
		s.log.Info("job controller: deleted pods", "job", s.key, "count", gone)
	}
	return readyGone, gone, errors.Join(errs...)
}

// track records finished pods in uncountedTerminatedPods, removes their
// finalizers, moves those without a finalizer to the counters, and sets
// the final condition once nothing is left running or uncounted. It
// writes the status if needsFlush or it changed.
func (s *jobSync) track(needsFlush bool) error {
	job := s.job
	indexed := jobIndexed(job)
	if indexed {
		slices.SortStableFunc(s.pods, func(a, b *corev1.Pod) int { return jobIndex(a) - jobIndex(b) })
	}
	withFinalizer := sets.New[types.UID]()
	for _, pod := range s.pods {
		if jobHasFinalizer(pod) {
			withFinalizer.Insert(pod.UID)
		}
	}
	if s.countUncounted(withFinalizer) {
		needsFlush = true
	}
	unc := job.Status.UncountedTerminatedPods
	var remove []*corev1.Pod
	var newIndexes []int
	full := false
	failing := s.finished != nil && s.finished.Type != batchv1.JobSuccessCriteriaMet
	for _, pod := range s.pods {
		if !jobHasFinalizer(pod) {
			continue // counted before
		}
		failed := jobPodFailed(pod, job)
		if job.DeletionTimestamp == nil && s.finished == nil && pod.Status.Phase != corev1.PodSucceeded && (!failed || s.isDelayed(pod)) {
			continue // still to finish, or kept for its replacement's failure count
		}
		remove = append(remove, pod)
		ix := jobIndex(pod)
		validIndex := !indexed || ix >= 0 && ix < int(*job.Spec.Completions)
		switch {
		case pod.Status.Phase == corev1.PodSucceeded && !s.uncFailed.Has(pod.UID):
			if indexed {
				if validIndex && !s.prevIndexes.Has(ix) {
					newIndexes = append(newIndexes, ix)
					needsFlush = true
				}
			} else if !s.uncSucceeded.Has(pod.UID) {
				unc.Succeeded = append(unc.Succeeded, pod.UID)
				needsFlush = true
			}
		case failed || failing:
			// A Job that fails counts every pod left unfinished as failed;
			// failures the pod failure policy ignores are not counted.
			if !s.uncFailed.Has(pod.UID) && validIndex && jobCountsFailure(job, pod) {
				unc.Failed = append(unc.Failed, pod.UID)
				needsFlush = true
			}
		}
		if len(newIndexes)+len(unc.Succeeded)+len(unc.Failed) >= jobMaxUncounted {
			// Bounded per sync; the status write queues the Job again.
			full = true
			break
		}
	}
	if indexed {
		s.indexes.Insert(newIndexes...)
		str := jobFormatIndexes(s.indexes)
		if str != job.Status.CompletedIndexes {
			needsFlush = true
		}
		job.Status.Succeeded = int32(s.indexes.Len())
		job.Status.CompletedIndexes = str
		// failedIndexes is set (maybe empty) only with backoffLimitPerIndex.
		var failedStr *string
		if s.failedIndexes != nil {
			str := jobFormatIndexes(s.failedIndexes)
			failedStr = &str
		}
		if cur := job.Status.FailedIndexes; (cur == nil) != (failedStr == nil) || cur != nil && *cur != *failedStr {
			if failedStr != nil && *failedStr != "" {
				s.log.Info("job controller: indexes failed", "job", s.key, "failedIndexes", *failedStr)
			}
			job.Status.FailedIndexes = failedStr
			needsFlush = true
		}
	}
	if s.finished != nil && s.finished.Type == batchv1.JobFailureTarget {
		job.Status.Conditions = append(job.Status.Conditions, *s.finished)
		needsFlush = true
		s.finished = s.newCondition(batchv1.JobFailed, s.finished.Reason, s.finished.Message)
	}
	if s.finished != nil && s.finished.Type == batchv1.JobSuccessCriteriaMet {
		if jobCondition(job, batchv1.JobSuccessCriteriaMet) == nil {
			job.Status.Conditions = append(job.Status.Conditions, *s.finished)
			needsFlush = true
		}
		s.finished = s.newCondition(batchv1.JobComplete, s.finished.Reason, s.finished.Message)
	}
	// The UIDs are stored before any finalizer goes, so that no pod is
	// counted twice or lost if this sync stops half way.
	if needsFlush {
		if err := s.writeStatus(); err != nil {
			return fmt.Errorf("adding uncounted pods to status: %w", err)
		}
		s.setBackoff(s.key, &s.newBackoff)
		needsFlush = false
	}
	removed, rmErr := s.dropFinalizers(remove)
	withFinalizer.Delete(removed...)
	if s.countUncounted(withFinalizer) {
		needsFlush = true
	}
	if rmErr != nil {
		if needsFlush {
			if err := s.writeStatus(); err != nil {
				return fmt.Errorf("removing uncounted pods from status: %w", err)
			}
		}
		return rmErr
	}
	finished := !full && s.enactFinished()
	if !finished && !needsFlush {
		return nil
	}
	if err := s.writeStatus(); err != nil {
		return fmt.Errorf("removing uncounted pods from status: %w", err)
	}
	if finished {
		s.logFinished()
	}
	return nil
}

// countUncounted moves the recorded pods that no longer have the finalizer
// from uncountedTerminatedPods to the counters; it reports a change.
func (s *jobSync) countUncounted(withFinalizer sets.Set[types.UID]) bool {
	st := &s.job.Status
	unc := st.UncountedTerminatedPods
	keep := func(uids []types.UID) []types.UID {
		var out []types.UID
		for _, uid := range uids {
			if withFinalizer.Has(uid) {
				out = append(out, uid)
			}
		}
		return out
	}
	succeeded, failed := keep(unc.Succeeded), keep(unc.Failed)
	changed := len(succeeded) != len(unc.Succeeded) || len(failed) != len(unc.Failed)
	st.Succeeded += int32(len(unc.Succeeded) - len(succeeded))
	st.Failed += int32(len(unc.Failed) - len(failed))
	unc.Succeeded, unc.Failed = succeeded, failed
	return changed
}

// dropFinalizers removes the tracking finalizer from pods and returns the
// UIDs of those that no longer have it.
func (s *jobSync) dropFinalizers(pods []*corev1.Pod) ([]types.UID, error) {
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, pod := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = jobDropFinalizer(s.ctx, s.store, s.podRes, pod)
		}()
	}
	wg.Wait()
	var removed []types.UID
	for i, pod := range pods {
		if errs[i] == nil {
			removed = append(removed, pod.UID)
		}
	}
	return removed, errors.Join(errs...)
}

// enactFinished sets the Failed or Complete condition once no pod is left
// uncounted or terminating, and reports whether it did.
func (s *jobSync) enactFinished() bool {
	c := s.finished
	unc := s.job.Status.UncountedTerminatedPods
	if c == nil || len(unc.Succeeded)+len(unc.Failed) > 0 || s.terminating > 0 {
		return false
	}
	s.ensureCondition(c.Type, c.Status, c.Reason, c.Message)
	if c.Type == batchv1.JobComplete {
		at := jobCondition(s.job, batchv1.JobComplete).LastTransitionTime
		s.job.Status.CompletionTime = &at
	}
	return true
}

func (s *jobSync) logFinished() {
	job := s.job
	if c := s.finished; c.Type != batchv1.JobComplete {
		s.log.Warn("job controller: "+c.Message, "job", s.key, "reason", c.Reason)
		kit.Record(s.events, job, corev1.EventTypeWarning, c.Reason, "%s", c.Message)
		return
	}
	if job.Spec.Completions != nil && job.Status.Succeeded > *job.Spec.Completions {
		s.log.Warn("job controller: "+jobMsgTooManySuccess, "job", s.key)
		kit.Record(s.events, job, corev1.EventTypeWarning, "TooManySucceededPods", jobMsgTooManySuccess)
	}
	s.log.Info("job controller: Job completed", "job", s.key)
	kit.Record(s.events, job, corev1.EventTypeNormal, "Completed", "Job completed")
}

// writeStatus writes the working copy's status, on the condition that the
// Job has not changed since it was read (409 otherwise: the sync is
// retried from fresh state).
func (s *jobSync) writeStatus() error {
	out, err := s.store.Update(s.ctx, s.jobRes, s.job.Namespace, s.job.Name, "status", s.job, registry.WriteOptions{})
	if err != nil {
		return err
	}
	s.job = out.(*batchv1.Job)
	return nil
}
