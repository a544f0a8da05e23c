package controllers

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/isle-cluster/isle/control/printers"
	"github.com/isle-cluster/isle/control/registry"
)

// The Job tests run without nodes: the test plays the node agent by
// setting the phase of the pods.

// newJobEnv is a wlEnv whose Job controller backs off failed pods from
// backoff.
func newJobEnv(t *testing.T, backoff time.Duration) *wlEnv {
	return newWLEnv(t, func(c Controller) {
		if j, ok := c.(*jobs); ok {
			j.backoffBase = backoff
		}
	})
}

func jobTestJob(name string, change func(*batchv1.Job)) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: batchv1.JobSpec{
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "work", Image: "busybox"}}}}}}
	if change != nil {
		change(j)
	}
	return j
}

func (e *wlEnv) createJob(j *batchv1.Job) *batchv1.Job {
	e.t.Helper()
	out, err := e.s.Create(e.ctx, e.jobRes, "default", j, registry.WriteOptions{})
	if err != nil {
		e.t.Fatalf("create Job %s: %v", j.Name, err)
	}
	return out.(*batchv1.Job)
}

func (e *wlEnv) getJob(name string) (*batchv1.Job, bool) {
	e.t.Helper()
	obj, err := e.s.Get(e.ctx, e.jobRes, "default", name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		e.t.Fatalf("get Job %s: %v", name, err)
	}
	return obj.(*batchv1.Job), true
}

func (e *wlEnv) job(name string) *batchv1.Job {
	e.t.Helper()
	j, ok := e.getJob(name)
	if !ok {
		e.t.Fatalf("Job %s is gone", name)
	}
	return j
}

func (e *wlEnv) mutateJob(name string, change func(*batchv1.Job)) {
	e.t.Helper()
	if _, err := e.s.Mutate(e.ctx, e.jobRes, "default", name, "", func(o runtime.Object) error {
		change(o.(*batchv1.Job))
		return nil
	}); err != nil {
		e.t.Fatalf("update Job %s: %v", name, err)
	}
}

func (e *wlEnv) settleJob(name string) {
	e.t.Helper()
	e.settle(e.jbSynced, "default/"+name, e.poke(e.jobRes, name))
}

// jobPods returns the pods j controls: all, and the active ones, oldest
// first.
func (e *wlEnv) jobPods(j *batchv1.Job) (all, active []*corev1.Pod) {
	e.t.Helper()
	for _, p := range e.podList() {
		if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != j.UID {
			continue
		}
		all = append(all, p)
		if !rsPodFinished(p) && p.DeletionTimestamp == nil {
			active = append(active, p)
		}
	}
	slices.SortStableFunc(active, dsOldestFirst)
	return all, active
}

// finish ends a pod as its node agent would: phase, not ready since now.
func (e *wlEnv) finish(p *corev1.Pod, phase corev1.PodPhase) {
	e.t.Helper()
	e.podStatus(p, func(p *corev1.Pod) {
		p.Status.Phase = phase
		setReady(p, false, time.Now())
	})
}

func jobConditions(j *batchv1.Job) []string {
	var out []string
	for _, c := range j.Status.Conditions {
		out = append(out, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	return out
}

// jobRow is the COMPLETIONS and STATUS of `kubectl get jobs`.
func jobRow(t *testing.T, j *batchv1.Job) (completions, status string) {
	t.Helper()
	rows, err := printers.Rows(j, time.Now())
	if err != nil || len(rows) != 1 {
		t.Fatalf("table row of Job %s: %v", j.Name, err)
	}
	return rows[0].Cells[2].(string), rows[0].Cells[1].(string)
}

// jobCounted checks what must hold of a Job once it is finished and
// settled: nothing left uncounted nor active, no pod with the finalizer,
// and the counters equal to the pods that finished (when they are all
// still stored).
func (e *wlEnv) jobCounted(j *batchv1.Job, succeeded, failed int32) {
	e.t.Helper()
	st := j.Status
	if u := st.UncountedTerminatedPods; u == nil || len(u.Succeeded)+len(u.Failed) > 0 {
		e.t.Errorf("uncountedTerminatedPods %+v, want empty", u)
	}
	if st.Succeeded != succeeded || st.Failed != failed || st.Active != 0 || st.Ready == nil || *st.Ready != 0 ||
		st.Terminating == nil || *st.Terminating != 0 {
		e.t.Errorf("status succeeded %d failed %d active %d ready %v terminating %v; want %d, %d, 0, 0, 0",
			st.Succeeded, st.Failed, st.Active, st.Ready, st.Terminating, succeeded, failed)
	}
	all, _ := e.jobPods(j)
	for _, p := range all {
		if jobHasFinalizer(p) {
			e.t.Errorf("pod %s still has the tracking finalizer", p.Name)
		}
	}
}

func TestJobRunsToCompletion(t *testing.T) {
	cases := []struct {
		name        string
		change      func(*batchv1.Job)
		created     int    // pods the Job makes in all
		running     []int  // pods active before each success
		completions string // the COMPLETIONS column at the end
	}{
		{"completions 3, parallelism 2", func(j *batchv1.Job) { j.Spec.Completions, j.Spec.Parallelism = wlPtr(int32(3)), wlPtr(int32(2)) },
			3, []int{2, 2, 1}, "3/3"},
		{"Indexed, completions 3, parallelism 2", func(j *batchv1.Job) {
			j.Spec.Completions, j.Spec.Parallelism = wlPtr(int32(3)), wlPtr(int32(2))
			j.Spec.CompletionMode = wlPtr(batchv1.IndexedCompletion)
		}, 3, []int{2, 2, 1}, "3/3"},
		{"work queue: parallelism 2, no completions", func(j *batchv1.Job) { j.Spec.Parallelism = wlPtr(int32(2)) },
			2, []int{2, 1}, "2/1 of 2"},
		{"defaults: one pod", nil, 1, []int{1}, "1/1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newJobEnv(t, 10*time.Millisecond)
			j := e.createJob(jobTestJob("work", tc.change))
			for i, n := range tc.running {
				var active []*corev1.Pod
				e.eventually(fmt.Sprintf("step %d: %d active pods counted", i, n), func() bool {
					_, active = e.jobPods(j)
					cur := e.job("work")
					return len(active) == n && cur.Status.Active == int32(n) && cur.Status.StartTime != nil
				})
				e.settleJob("work")
				if _, again := e.jobPods(j); len(again) != n {
					t.Fatalf("step %d: %d active pods, want %d", i, len(again), n)
				}
				if i == 0 {
					e.podStatus(active[0], func(p *corev1.Pod) {
						p.Status.Phase = corev1.PodRunning
						setReady(p, true, time.Now())
					})
					e.eventually("the ready pod is counted", func() bool {
						r := e.job("work").Status.Ready
						return r != nil && *r == 1
					})
				}
				e.finish(active[0], corev1.PodSucceeded)
			}
			e.eventually("Complete", func() bool { return jobCondition(e.job("work"), batchv1.JobComplete) != nil })
			e.settleJob("work")
			cur := e.job("work")
			want := []string{"SuccessCriteriaMet=True/CompletionsReached", "Complete=True/CompletionsReached"}
			if got := jobConditions(cur); !slices.Equal(got, want) {
				t.Errorf("conditions %v, want %v", got, want)
			}
			for _, c := range cur.Status.Conditions {
				if c.Message != "Reached expected number of succeeded pods" {
					t.Errorf("condition %s message %q", c.Type, c.Message)
				}
			}
			if ct := cur.Status.CompletionTime; ct == nil || ct.Before(cur.Status.StartTime) {
				t.Errorf("completionTime %v, startTime %v", ct, cur.Status.StartTime)
			}
			e.jobCounted(cur, int32(len(tc.running)), 0)
			e.eventually("Event Completed", func() bool { return e.hasEvent("Job", "work", corev1.EventTypeNormal, "Completed", "Job completed") })
			all, _ := e.jobPods(j)
			if len(all) != tc.created {
				t.Errorf("%d pods made, want %d", len(all), tc.created)
			}
			if completions, status := jobRow(t, cur); completions != tc.completions || status != "Complete" {
				t.Errorf("kubectl get jobs: COMPLETIONS %q STATUS %q, want %q and Complete", completions, status, tc.completions)
			}
			for _, p := range all {
				if !strings.HasPrefix(p.Name, "work-") || p.Labels[batchv1.JobNameLabel] != "work" || p.Labels[batchv1.ControllerUidLabel] != string(j.UID) {
					t.Errorf("pod %s labels %v", p.Name, p.Labels)
				}
			}
			if jobIndexed(j) {
				if cur.Status.CompletedIndexes != "0-2" {
					t.Errorf("completedIndexes %q, want 0-2", cur.Status.CompletedIndexes)
				}
				var indexes []string
				for _, p := range all {
					ix := p.Annotations[batchv1.JobCompletionIndexAnnotation]
					indexes = append(indexes, ix)
					env := p.Spec.Containers[0].Env
					if p.Labels[batchv1.JobCompletionIndexAnnotation] != ix || p.Spec.Hostname != "work-"+ix || !strings.HasPrefix(p.Name, "work-"+ix+"-") ||
						len(env) != 1 || env[0].Name != "JOB_COMPLETION_INDEX" || env[0].ValueFrom.FieldRef.FieldPath != "metadata.labels['batch.kubernetes.io/job-completion-index']" {
						t.Errorf("pod %s of index %s: label %q hostname %q env %+v", p.Name, ix, p.Labels[batchv1.JobCompletionIndexAnnotation], p.Spec.Hostname, env)
					}
				}
				if slices.Sort(indexes); !slices.Equal(indexes, []string{"0", "1", "2"}) {
					t.Errorf("pods of indexes %v", indexes)
				}
			}
		})
	}
}

func TestJobFails(t *testing.T) {
	cases := []struct {
		name   string
		change func(*batchv1.Job)
		// act makes the Job fail, given its active pods.
		act          func(e *wlEnv, active []*corev1.Pod)
		reason       string
		failed       int32
		minStartTime time.Duration // the failure is at least this long after startTime
	}{
		{"backoffLimit 1: the second failed pod", func(j *batchv1.Job) { j.Spec.BackoffLimit = wlPtr(int32(1)) },
			func(e *wlEnv, active []*corev1.Pod) {
				e.finish(active[0], corev1.PodFailed)
				var next []*corev1.Pod
				e.eventually("a replacement", func() bool {
					_, next = e.jobPods(e.job("work"))
					return len(next) == 1 && next[0].UID != active[0].UID
				})
				e.finish(next[0], corev1.PodFailed)
			}, batchv1.JobReasonBackoffLimitExceeded, 2, 0},
		{"backoffLimit 0: a pod deleted before it finished counts as failed", func(j *batchv1.Job) { j.Spec.BackoffLimit = wlPtr(int32(0)) },
			func(e *wlEnv, active []*corev1.Pod) {
				if _, _, err := e.s.Delete(e.ctx, e.pods, "default", active[0].Name, metav1.DeleteOptions{}); err != nil {
					e.t.Fatal(err)
				}
			}, batchv1.JobReasonBackoffLimitExceeded, 1, 0},
		{"restartPolicy OnFailure: container restarts reach backoffLimit 2", func(j *batchv1.Job) {
			j.Spec.BackoffLimit = wlPtr(int32(2))
			j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
		}, func(e *wlEnv, active []*corev1.Pod) {
			e.podStatus(active[0], func(p *corev1.Pod) {
				p.Status.Phase = corev1.PodRunning
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "work", Image: "busybox", RestartCount: 2}}
			})
		}, batchv1.JobReasonBackoffLimitExceeded, 1, 0},
		{"activeDeadlineSeconds 1: both running pods fail", func(j *batchv1.Job) {
			j.Spec.ActiveDeadlineSeconds = wlPtr(int64(1))
			j.Spec.Parallelism, j.Spec.Completions = wlPtr(int32(2)), wlPtr(int32(4))
		}, func(*wlEnv, []*corev1.Pod) {}, batchv1.JobReasonDeadlineExceeded, 2, time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newJobEnv(t, 10*time.Millisecond)
			j := e.createJob(jobTestJob("work", tc.change))
			var active []*corev1.Pod
			e.eventually("pods run", func() bool {
				_, active = e.jobPods(j)
				return len(active) == int(*j.Spec.Parallelism)
			})
			tc.act(e, active)
			e.eventually("Failed", func() bool { return jobCondition(e.job("work"), batchv1.JobFailed) != nil })
			e.settleJob("work")
			cur := e.job("work")
			want := []string{"FailureTarget=True/" + tc.reason, "Failed=True/" + tc.reason}
			if got := jobConditions(cur); !slices.Equal(got, want) {
				t.Errorf("conditions %v, want %v", got, want)
			}
			failed := cur.Status.Conditions[1]
			msg := map[string]string{batchv1.JobReasonBackoffLimitExceeded: "Job has reached the specified backoff limit",
				batchv1.JobReasonDeadlineExceeded: "Job was active longer than specified deadline"}[tc.reason]
			if failed.Message != msg {
				t.Errorf("Failed message %q, want %q", failed.Message, msg)
			}
			e.eventually("Event "+tc.reason, func() bool { return e.hasEvent("Job", "work", corev1.EventTypeWarning, tc.reason, msg) })
			if d := failed.LastTransitionTime.Sub(cur.Status.StartTime.Time); d < tc.minStartTime {
				t.Errorf("failed %v after it started, want at least %v", d, tc.minStartTime)
			}
			if cur.Status.CompletionTime != nil {
				t.Errorf("a failed Job has completionTime %v", cur.Status.CompletionTime)
			}
			e.jobCounted(cur, 0, tc.failed)
			if _, act := e.jobPods(j); len(act) != 0 {
				t.Errorf("%d pods still active", len(act))
			}
			if _, status := jobRow(t, cur); status != "Failed" {
				t.Errorf("kubectl get jobs STATUS %q, want Failed", status)
			}
		})
	}
}

// A failed pod is replaced only after the backoff, from the time it
// failed.
func TestJobPodFailureBackoff(t *testing.T) {
	e := newJobEnv(t, 2*time.Second)
	j := e.createJob(jobTestJob("work", nil))
	var active []*corev1.Pod
	e.eventually("a pod", func() bool { _, active = e.jobPods(j); return len(active) == 1 })
	e.finish(active[0], corev1.PodFailed)
	failedAt := rsReadyCondition(e.podByUID(active[0].UID)).LastTransitionTime
	var next []*corev1.Pod
	e.eventually("a replacement", func() bool { _, next = e.jobPods(j); return len(next) == 1 })
	if d := next[0].CreationTimestamp.Sub(failedAt.Time); d < 2*time.Second {
		t.Errorf("replaced %v after the failure, want at least the 2s backoff", d)
	}
	e.eventually("the failure is counted", func() bool { return e.job("work").Status.Failed == 1 })
}

func (e *wlEnv) podByUID(uid types.UID) *corev1.Pod {
	e.t.Helper()
	for _, p := range e.podList() {
		if p.UID == uid {
			return p
		}
	}
	e.t.Fatalf("no pod %s", uid)
	return nil
}

func TestJobSuspend(t *testing.T) {
	e := newJobEnv(t, 10*time.Millisecond)
	j := e.createJob(jobTestJob("work", func(j *batchv1.Job) {
		j.Spec.Suspend = wlPtr(true)
		j.Spec.Parallelism, j.Spec.Completions = wlPtr(int32(2)), wlPtr(int32(2))
	}))
	suspended := func(status corev1.ConditionStatus, reason, msg string) func() bool {
		return func() bool {
			for _, c := range e.job("work").Status.Conditions {
				if c.Type == batchv1.JobSuspended {
					return c.Status == status && c.Reason == reason && c.Message == msg
				}
			}
			return false
		}
	}
	e.eventually("Suspended", suspended(corev1.ConditionTrue, "JobSuspended", "Job suspended"))
	e.settleJob("work")
	if all, _ := e.jobPods(j); len(all) != 0 {
		t.Fatalf("a suspended Job made %d pods", len(all))
	}
	if st := e.job("work").Status.StartTime; st != nil {
		t.Fatalf("a Job suspended from the start has startTime %v", st)
	}
	if _, status := jobRow(t, e.job("work")); status != "Suspended" {
		t.Errorf("kubectl get jobs STATUS %q, want Suspended", status)
	}

	e.mutateJob("work", func(j *batchv1.Job) { j.Spec.Suspend = wlPtr(false) })
	e.eventually("resumed with 2 pods", func() bool {
		_, active := e.jobPods(j)
		return len(active) == 2 && suspended(corev1.ConditionFalse, "JobResumed", "Job resumed")() && e.job("work").Status.StartTime != nil
	})

	e.mutateJob("work", func(j *batchv1.Job) { j.Spec.Suspend = wlPtr(true) })
	e.eventually("suspended again, its pods gone", func() bool {
		all, _ := e.jobPods(j)
		cur := e.job("work")
		return len(all) == 0 && suspended(corev1.ConditionTrue, "JobSuspended", "Job suspended")() && cur.Status.Active == 0
	})
	e.settleJob("work")
	if st := e.job("work").Status; st.Failed != 0 || st.Succeeded != 0 {
		t.Errorf("pods removed by suspension were counted: succeeded %d failed %d", st.Succeeded, st.Failed)
	}
}

func TestJobTTLAfterFinished(t *testing.T) {
	for _, ttl := range []int32{0, 2} {
		t.Run(fmt.Sprintf("ttl %ds", ttl), func(t *testing.T) {
			e := newJobEnv(t, 10*time.Millisecond)
			j := e.createJob(jobTestJob("work", func(j *batchv1.Job) { j.Spec.TTLSecondsAfterFinished = wlPtr(ttl) }))
			var active []*corev1.Pod
			e.eventually("a pod", func() bool { _, active = e.jobPods(j); return len(active) == 1 })
			e.finish(active[0], corev1.PodSucceeded)
			var done *batchv1.Job
			e.eventually("Complete", func() bool {
				cur, ok := e.getJob("work")
				if ok && jobFinished(cur) {
					done = cur
				}
				return done != nil
			})
			e.eventually("the Job is deleted", func() bool { _, ok := e.getJob("work"); return !ok })
			if d := time.Since(jobCondition(done, batchv1.JobComplete).LastTransitionTime.Time); d < time.Duration(ttl)*time.Second {
				t.Errorf("deleted %v after it finished, before its TTL of %ds", d, ttl)
			}
			e.eventually("its pods are gone", func() bool { all, _ := e.jobPods(j); return len(all) == 0 })
		})
	}
}

// Pods keep the tracking finalizer only while a Job counts them.
func TestJobFinalizerOfOrphans(t *testing.T) {
	e := newJobEnv(t, 10*time.Millisecond)
	j := e.createJob(jobTestJob("work", func(j *batchv1.Job) { j.Spec.Parallelism = wlPtr(int32(2)) }))
	e.eventually("2 pods with the finalizer", func() bool {
		_, active := e.jobPods(j)
		return len(active) == 2 && jobHasFinalizer(active[0]) && jobHasFinalizer(active[1])
	})
	// A pod with the finalizer that no Job controls loses it (and stays).
	if _, err := e.s.Create(e.ctx, e.pods, "default", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stray", Finalizers: []string{batchv1.JobTrackingFinalizer}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The Job is deleted: the garbage collector deletes its pods, which
	// then lose the finalizer and go.
	if _, _, err := e.s.Delete(e.ctx, e.jobRes, "default", "work", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the Job's pods are gone", func() bool { all, _ := e.jobPods(j); return len(all) == 0 })
	e.eventually("the stray pod loses the finalizer", func() bool {
		for _, p := range e.podList() {
			if p.Name == "stray" {
				return len(p.Finalizers) == 0 && p.DeletionTimestamp == nil
			}
		}
		t.Fatal("the stray pod was deleted")
		return false
	})
}

func TestJobBackoffRemaining(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	base, limit := 10*time.Second, 6*time.Minute
	cases := []struct {
		name     string
		failures int32
		ago      time.Duration
		want     time.Duration
	}{
		{"no failure", 0, 0, 0},
		{"one failure, just now", 1, 0, 10 * time.Second},
		{"one failure, 4s ago", 1, 4 * time.Second, 6 * time.Second},
		{"three failures: 40s", 3, 0, 40 * time.Second},
		{"six failures: 320s", 6, 0, 320 * time.Second},
		{"seven failures: capped at 6 min", 7, 0, 6 * time.Minute},
		{"a hundred failures: capped", 100, time.Minute, 5 * time.Minute},
		{"backoff passed", 2, 21 * time.Second, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := jobBackoffRemaining(jobBackoff{failures: tc.failures, last: now.Add(-tc.ago)}, base, limit, now)
			if got != tc.want {
				t.Errorf("remaining %v, want %v", got, tc.want)
			}
		})
	}
}

func TestJobNextBackoff(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(sec int) *corev1.Pod {
		p := &corev1.Pod{}
		setReady(p, false, t0.Add(time.Duration(sec)*time.Second))
		return p
	}
	cases := []struct {
		name              string
		prev              jobBackoff
		succeeded, failed []*corev1.Pod
		want              jobBackoff
	}{
		{"nothing new", jobBackoff{failures: 2, last: t0}, nil, nil, jobBackoff{failures: 2, last: t0}},
		{"failures add up", jobBackoff{failures: 1, last: t0}, nil, []*corev1.Pod{at(5), at(3)}, jobBackoff{failures: 3, last: t0.Add(5 * time.Second)}},
		{"a success resets", jobBackoff{failures: 4, last: t0}, []*corev1.Pod{at(10)}, nil, jobBackoff{}},
		{"only failures after the last success count", jobBackoff{failures: 4, last: t0},
			[]*corev1.Pod{at(10), at(2)}, []*corev1.Pod{at(1), at(12), at(11)}, jobBackoff{failures: 2, last: t0.Add(12 * time.Second)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &jobSync{jobRun: &jobRun{backoff: map[string]jobBackoff{"ns/j": tc.prev}}, key: "ns/j"}
			if got := s.nextBackoff(tc.succeeded, tc.failed); got != tc.want {
				t.Errorf("record %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestJobIndexes(t *testing.T) {
	cases := []struct {
		in          string
		completions int
		want        []int
		out         string
	}{
		{"", 5, nil, ""},
		{"0-2", 5, []int{0, 1, 2}, "0-2"},
		{"1,3", 5, []int{1, 3}, "1,3"},
		{"0,1", 5, []int{0, 1}, "0,1"},
		{"0-2,5,7-9", 10, []int{0, 1, 2, 5, 7, 8, 9}, "0-2,5,7-9"},
		{"3-4,0-1,2", 10, []int{0, 1, 2, 3, 4}, "0-4"},
		{"2-8", 5, []int{2, 3, 4}, "2-4"},
		{"x,1,2-y,4", 5, []int{1, 4}, "1,4"},
	}
	for _, tc := range cases {
		got := jobParseIndexes(tc.in, tc.completions)
		if !got.Equal(sets.New(tc.want...)) {
			t.Errorf("parse %q (completions %d): %v, want %v", tc.in, tc.completions, sets.List(got), tc.want)
		}
		if out := jobFormatIndexes(got); out != tc.out {
			t.Errorf("format %v: %q, want %q", sets.List(got), out, tc.out)
		}
	}
}
