package job

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// The Job features that act on single pods and indexes: the pod failure
// policy, the per-index backoff limit and the success policy.

// Condition messages of the policies, as Kubernetes words them.
const (
	jobMsgMaxFailedIndexes = "Job has exceeded the specified maximal number of failed indexes"
	jobMsgFailedIndexes    = "Job has failed indexes"
)

// jobPolicyVerdict is what a Job's pod failure policy makes of a failed
// pod: the action of the first rule that matched ("" if none did) and,
// for FailJob, the message of the Job's failure.
type jobPolicyVerdict struct {
	action  batchv1.PodFailurePolicyAction
	message string
}

// counts: the failure counts towards backoffLimit (and
// backoffLimitPerIndex); only an Ignore rule says otherwise.
func (v jobPolicyVerdict) counts() bool { return v.action != batchv1.PodFailurePolicyActionIgnore }

// jobJudgeFailure matches a failed pod against the Job's pod failure
// policy, rule by rule; a rule with an action this controller does not
// know is passed over.
func jobJudgeFailure(job *batchv1.Job, pod *corev1.Pod) jobPolicyVerdict {
	policy := job.Spec.PodFailurePolicy
	if policy == nil {
		return jobPolicyVerdict{}
	}
	for i, rule := range policy.Rules {
		var message string
		switch {
		case rule.OnExitCodes != nil:
			cs := jobExitCodeMatch(&pod.Status, rule.OnExitCodes)
			if cs == nil {
				continue
			}
			message = fmt.Sprintf("Container %s for pod %s/%s failed with exit code %d matching %s rule at index %d",
				cs.Name, pod.Namespace, pod.Name, cs.State.Terminated.ExitCode, rule.Action, i)
		case rule.OnPodConditions != nil:
			cond := jobPodConditionMatch(&pod.Status, rule.OnPodConditions)
			if cond == "" {
				continue
			}
			message = fmt.Sprintf("Pod %s/%s has condition %s matching %s rule at index %d", pod.Namespace, pod.Name, cond, rule.Action, i)
		default:
			continue
		}
		switch rule.Action {
		case batchv1.PodFailurePolicyActionFailJob:
			return jobPolicyVerdict{action: rule.Action, message: message}
		case batchv1.PodFailurePolicyActionIgnore, batchv1.PodFailurePolicyActionCount, batchv1.PodFailurePolicyActionFailIndex:
			return jobPolicyVerdict{action: rule.Action}
		}
	}
	return jobPolicyVerdict{}
}

// jobExitCodeMatch returns the first terminated container (regular
// containers before init containers) whose non-zero exit code meets the
// requirement, or nil.
func jobExitCodeMatch(st *corev1.PodStatus, req *batchv1.PodFailurePolicyOnExitCodesRequirement) *corev1.ContainerStatus {
	for _, list := range [][]corev1.ContainerStatus{st.ContainerStatuses, st.InitContainerStatuses} {
		for i := range list {
			cs := &list[i]
			t := cs.State.Terminated
			if t == nil || t.ExitCode == 0 || (req.ContainerName != nil && *req.ContainerName != cs.Name) {
				continue
			}
			listed := slices.Contains(req.Values, t.ExitCode)
			switch req.Operator {
			case batchv1.PodFailurePolicyOnExitCodesOpIn:
				if listed {
					return cs
				}
			case batchv1.PodFailurePolicyOnExitCodesOpNotIn:
				if !listed {
					return cs
				}
			}
		}
	}
	return nil
}

// jobPodConditionMatch returns the type of the first of the pod's
// conditions that one of the patterns describes, or "".
func jobPodConditionMatch(st *corev1.PodStatus, patterns []batchv1.PodFailurePolicyOnPodConditionsPattern) corev1.PodConditionType {
	for _, c := range st.Conditions {
		for _, p := range patterns {
			if c.Type == p.Type && c.Status == p.Status {
				return c.Type
			}
		}
	}
	return ""
}

// jobCountsFailure: a failure of the pod counts towards the Job's limits.
func jobCountsFailure(job *batchv1.Job, pod *corev1.Pod) bool {
	return jobJudgeFailure(job, pod).counts()
}

// failJobMessage is the message of the first failed pod that a FailJob
// rule matches, or "".
func (s *jobSync) failJobMessage() string {
	if s.job.Spec.PodFailurePolicy == nil {
		return ""
	}
	for _, pod := range s.pods {
		if !jobPodFailed(pod, s.job) {
			continue
		}
		if v := jobJudgeFailure(s.job, pod); v.action == batchv1.PodFailurePolicyActionFailJob {
			return v.message
		}
	}
	return ""
}

// countedFailures is how many of the failed pods count (are not ignored
// by the pod failure policy).
func (s *jobSync) countedFailures(failed []*corev1.Pod) int {
	n := 0
	for _, pod := range failed {
		if jobCountsFailure(s.job, pod) {
			n++
		}
	}
	return n
}

// jobPerIndex: the Job limits failures per index (backoffLimitPerIndex).
func jobPerIndex(job *batchv1.Job) bool {
	return jobIndexed(job) && job.Spec.BackoffLimitPerIndex != nil
}

// jobAnnotationCount reads a failure count annotation of a pod; a missing,
// unreadable or out of range value is 0.
func jobAnnotationCount(pod *corev1.Pod, key string) int32 {
	v, ok := pod.Annotations[key]
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt32 {
		return 0
	}
	return int32(n)
}

// jobIndexFailures is the number of counted failures of the pod's index
// before the pod, and jobIndexAllFailures that number with the ignored ones.
func jobIndexFailures(pod *corev1.Pod) int32 {
	return jobAnnotationCount(pod, batchv1.JobIndexFailureCountAnnotation)
}

func jobIndexAllFailures(pod *corev1.Pod) int32 {
	return jobIndexFailures(pod) + jobAnnotationCount(pod, batchv1.JobIndexIgnoredFailureCountAnnotation)
}

// jobIndexFailedBy: the pod's failure fails its index: a FailIndex rule
// matched it, or it counts and its index had backoffLimitPerIndex counted
// failures before it.
func jobIndexFailedBy(job *batchv1.Job, pod *corev1.Pod) bool {
	if !jobPodFailed(pod, job) {
		return false
	}
	v := jobJudgeFailure(job, pod)
	if v.action == batchv1.PodFailurePolicyActionFailIndex {
		return true
	}
	return v.counts() && jobIndexFailures(pod) >= *job.Spec.BackoffLimitPerIndex
}

// validIndex is the pod's completion index if it is one of the Job's,
// else -1.
func (s *jobSync) validIndex(pod *corev1.Pod) int {
	ix := jobIndex(pod)
	if ix < 0 || ix >= int(*s.job.Spec.Completions) {
		return -1
	}
	return ix
}

// findFailedIndexes returns the failed indexes of the status and those
// that pods not yet counted failed since.
func (s *jobSync) findFailedIndexes() sets.Set[int] {
	completions := int(*s.job.Spec.Completions)
	var prev string
	if s.job.Status.FailedIndexes != nil {
		prev = *s.job.Status.FailedIndexes
	}
	out := jobParseIndexes(prev, completions)
	for _, pod := range s.pods {
		if ix := s.validIndex(pod); ix >= 0 && jobHasFinalizer(pod) && jobIndexFailedBy(s.job, pod) {
			out.Insert(ix)
		}
	}
	return out
}

// findDelayed returns, for each index that neither succeeded nor failed
// nor has an active pod, its latest failed pod that still has the
// tracking finalizer. Such a pod keeps the finalizer (and so stays) until
// its replacement is made, which takes its failure counts over.
func (s *jobSync) findDelayed() map[int]*corev1.Pod {
	activeIndexes := sets.New[int]()
	for _, pod := range s.active {
		if ix := jobIndex(pod); ix >= 0 {
			activeIndexes.Insert(ix)
		}
	}
	out := map[int]*corev1.Pod{}
	for _, pod := range s.pods {
		ix := s.validIndex(pod)
		if ix < 0 || !jobHasFinalizer(pod) || !jobPodFailed(pod, s.job) ||
			s.indexes.Has(ix) || s.failedIndexes.Has(ix) || activeIndexes.Has(ix) {
			continue
		}
		cur, ok := out[ix]
		if !ok || jobIndexAllFailures(cur) <= jobIndexAllFailures(pod) && !jobFinishTime(pod).Before(jobFinishTime(cur)) {
			out[ix] = pod
		}
	}
	return out
}

// isDelayed: the pod is the one failed pod of its index that keeps its
// finalizer until the index has a replacement.
func (s *jobSync) isDelayed(pod *corev1.Pod) bool {
	if s.delayed == nil {
		return false
	}
	p, ok := s.delayed[jobIndex(pod)]
	return ok && p.UID == pod.UID
}

// indexFailureCounts are the failure count annotations of a new pod of
// index ix: those of the failed pod it replaces, plus that pod's failure.
func (s *jobSync) indexFailureCounts(ix int) (counted, ignored int32) {
	prev := s.delayed[ix]
	if prev == nil {
		return 0, 0
	}
	counted = jobIndexFailures(prev)
	ignored = jobAnnotationCount(prev, batchv1.JobIndexIgnoredFailureCountAnnotation)
	if jobCountsFailure(s.job, prev) {
		counted++
	} else {
		ignored++
	}
	return counted, ignored
}

// indexesPastBackoff returns those of indexes whose backoff (after the
// failures of the pod they replace) has passed, and how long until the
// first of the others' does (0 if none waits).
func (s *jobSync) indexesPastBackoff(indexes []int) ([]int, time.Duration) {
	var ready []int
	var wait time.Duration
	now := s.now()
	for _, ix := range indexes {
		var d time.Duration
		if prev := s.delayed[ix]; prev != nil {
			rec := jobBackoff{failures: jobIndexAllFailures(prev) + 1, last: jobFinishTime(prev)}
			d = jobBackoffRemaining(rec, s.backoffBase, jobBackoffMax, now)
		}
		switch {
		case d == 0:
			ready = append(ready, ix)
		case wait == 0 || d < wait:
			wait = d
		}
	}
	return ready, wait
}

// jobMeetsSuccessPolicy matches the succeeded indexes against the rules
// of a success policy and returns the message of the first rule met.
func jobMeetsSuccessPolicy(policy *batchv1.SuccessPolicy, completions int, succeeded sets.Set[int]) (string, bool) {
	if policy == nil || succeeded.Len() == 0 {
		return "", false
	}
	for i, rule := range policy.Rules {
		met := false
		switch {
		case rule.SucceededIndexes != nil:
			want := jobParseIndexes(*rule.SucceededIndexes, completions)
			if want.Len() == 0 {
				continue // unreadable: the rule cannot be met
			}
			have := 0
			for ix := range want {
				if succeeded.Has(ix) {
					have++
				}
			}
			met = have == want.Len() || rule.SucceededCount != nil && have >= int(*rule.SucceededCount)
		case rule.SucceededCount != nil:
			met = succeeded.Len() >= int(*rule.SucceededCount)
		}
		if met {
			return fmt.Sprintf("Matched rules at index %d", i), true
		}
	}
	return "", false
}
