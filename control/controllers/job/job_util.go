package job

import (
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/isle-cluster/isle/control/controllers/kit"
)

// nextBackoff is the Job's failure record after the pods that finished
// since the last sync: failures after the last success, and when the last
// one failed.
func (s *jobSync) nextBackoff(succeeded, failed []*corev1.Pod) jobBackoff {
	s.mu.Lock()
	rec := s.backoff[s.key]
	s.mu.Unlock()
	byFinish := func(a, b *corev1.Pod) int { return jobFinishTime(a).Compare(jobFinishTime(b)) }
	slices.SortStableFunc(succeeded, byFinish)
	slices.SortStableFunc(failed, byFinish)
	if len(succeeded) == 0 {
		if len(failed) > 0 {
			rec.failures += int32(len(failed))
			rec.last = jobFinishTime(failed[len(failed)-1])
		}
		return rec
	}
	rec = jobBackoff{}
	lastSuccess := jobFinishTime(succeeded[len(succeeded)-1])
	for i := len(failed) - 1; i >= 0; i-- {
		t := jobFinishTime(failed[i])
		if !t.After(lastSuccess) {
			break
		}
		if rec.last.IsZero() {
			rec.last = t
		}
		rec.failures++
	}
	return rec
}

// setBackoff stores (or with nil drops) a Job's failure record.
func (r *jobRun) setBackoff(key string, rec *jobBackoff) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec == nil {
		delete(r.backoff, key)
		return
	}
	r.backoff[key] = *rec
}

func (s *jobSync) backoffRemaining() time.Duration {
	return jobBackoffRemaining(s.newBackoff, s.backoffBase, jobBackoffMax, s.now())
}

// jobBackoffRemaining is how long pod creation still waits after the
// failures of rec: base doubled for each failure after the first, at most
// limit, from the last failure.
func jobBackoffRemaining(rec jobBackoff, base, limit time.Duration, now time.Time) time.Duration {
	if rec.failures == 0 {
		return 0
	}
	d := base
	for i := int32(1); i < rec.failures && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	return max(d-now.Sub(rec.last), 0)
}

// jobFinishTime is when a pod finished: its last container's end, when it
// turned not ready, when it was deleted (less its grace period), or else
// its creation.
func jobFinishTime(pod *corev1.Pod) time.Time {
	var last time.Time
	complete := len(pod.Status.ContainerStatuses) > 0
	for _, c := range pod.Status.ContainerStatuses {
		if c.State.Terminated == nil || c.State.Terminated.FinishedAt.IsZero() {
			complete = false
			break
		}
		if t := c.State.Terminated.FinishedAt.Time; t.After(last) {
			last = t
		}
	}
	if complete {
		return last
	}
	if c := kit.ReadyCondition(pod); c != nil && c.Status == corev1.ConditionFalse && !c.LastTransitionTime.IsZero() {
		return c.LastTransitionTime.Time
	}
	if pod.DeletionTimestamp != nil {
		grace := int64(0)
		if pod.DeletionGracePeriodSeconds != nil {
			grace = *pod.DeletionGracePeriodSeconds
		}
		return pod.DeletionTimestamp.Add(-time.Duration(grace) * time.Second)
	}
	return pod.CreationTimestamp.Time
}

// jobParseIndexes reads completedIndexes ("1,3-5"), ignoring indexes not
// below completions and unreadable intervals.
func jobParseIndexes(s string, completions int) sets.Set[int] {
	out := sets.New[int]()
	if s == "" {
		return out
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		last := first
		if isRange {
			if last, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		for ix := max(first, 0); ix <= last && ix < completions; ix++ {
			out.Insert(ix)
		}
	}
	return out
}

// jobFormatIndexes writes indexes as Kubernetes does: ascending, runs of
// three or more as "a-b", pairs as "a,b".
func jobFormatIndexes(set sets.Set[int]) string {
	ixs := sets.List(set)
	var b strings.Builder
	for i := 0; i < len(ixs); {
		j := i
		for j+1 < len(ixs) && ixs[j+1] == ixs[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(ixs[i]))
		switch {
		case j == i+1:
			b.WriteString("," + strconv.Itoa(ixs[j]))
		case j > i+1:
			b.WriteString("-" + strconv.Itoa(ixs[j]))
		}
		i = j + 1
	}
	return b.String()
}
