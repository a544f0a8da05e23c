package job

import (
	"fmt"
	"math"
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

	"github.com/isle-cluster/isle/control/controllers/internal/ctltest"
	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/printers"
	"github.com/isle-cluster/isle/control/registry"
)

// The Job tests run the controller on a ctltest.Workload without nodes:
// the test plays the node agent by setting the phase of the pods.

type jobEnv struct {
	*ctltest.Workload
	jobRes *registry.Resource
}

// newJobEnv starts the Job controller, reporting its syncs and backing
// off failed pods from backoff, on a Workload.
func newJobEnv(t *testing.T, backoff time.Duration) *jobEnv {
	t.Helper()
	w := ctltest.NewWorkload(t)
	e := &jobEnv{Workload: w, jobRes: kit.MustLookup(w.Store, batchv1.SchemeGroupVersion.WithResource("jobs"))}
	c := New(w.Store, w.Log, w.Events.Recorder("job-controller"))
	c.backoffBase = backoff
	c.synced = w.Synced
	w.Run(t, c)
	return e
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

func (e *jobEnv) createJob(j *batchv1.Job) *batchv1.Job {
	e.T.Helper()
	out, err := e.Store.Create(e.Ctx, e.jobRes, "default", j, registry.WriteOptions{})
	if err != nil {
		e.T.Fatalf("create Job %s: %v", j.Name, err)
	}
	return out.(*batchv1.Job)
}

func (e *jobEnv) getJob(name string) (*batchv1.Job, bool) {
	e.T.Helper()
	obj, err := e.Store.Get(e.Ctx, e.jobRes, "default", name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		e.T.Fatalf("get Job %s: %v", name, err)
	}
	return obj.(*batchv1.Job), true
}

func (e *jobEnv) job(name string) *batchv1.Job {
	e.T.Helper()
	j, ok := e.getJob(name)
	if !ok {
		e.T.Fatalf("Job %s is gone", name)
	}
	return j
}

func (e *jobEnv) mutateJob(name string, change func(*batchv1.Job)) {
	e.T.Helper()
	if _, err := e.Store.Mutate(e.Ctx, e.jobRes, "default", name, "", func(o runtime.Object) error {
		change(o.(*batchv1.Job))
		return nil
	}); err != nil {
		e.T.Fatalf("update Job %s: %v", name, err)
	}
}

func (e *jobEnv) settleJob(name string) {
	e.T.Helper()
	e.Settle("default/"+name, e.jobRes, name)
}

// jobPods returns the pods j controls: all, and the active ones, oldest
// first.
func (e *jobEnv) jobPods(j *batchv1.Job) (all, active []*corev1.Pod) {
	e.T.Helper()
	for _, p := range e.PodList() {
		if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != j.UID {
			continue
		}
		all = append(all, p)
		if !kit.PodFinished(p) && p.DeletionTimestamp == nil {
			active = append(active, p)
		}
	}
	slices.SortStableFunc(active, kit.OldestFirst)
	return all, active
}

// finish ends a pod as its node agent would: phase, not ready since now.
func (e *jobEnv) finish(p *corev1.Pod, phase corev1.PodPhase) {
	e.T.Helper()
	e.PodStatus(p, func(p *corev1.Pod) {
		p.Status.Phase = phase
		ctltest.SetReady(p, false, time.Now())
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
	rows, err := printers.Jobs.Rows(j, time.Now())
	if err != nil || len(rows) != 1 {
		t.Fatalf("table row of Job %s: %v", j.Name, err)
	}
	return rows[0].Cells[2].(string), rows[0].Cells[1].(string)
}

// jobCounted checks what must hold of a Job once it is finished and
// settled: nothing left uncounted nor active, no pod with the finalizer,
// and the counters equal to the pods that finished (when they are all
// still stored).
func (e *jobEnv) jobCounted(j *batchv1.Job, succeeded, failed int32) {
	e.T.Helper()
	st := j.Status
	if u := st.UncountedTerminatedPods; u == nil || len(u.Succeeded)+len(u.Failed) > 0 {
		e.T.Errorf("uncountedTerminatedPods %+v, want empty", u)
	}
	if st.Succeeded != succeeded || st.Failed != failed || st.Active != 0 || st.Ready == nil || *st.Ready != 0 ||
		st.Terminating == nil || *st.Terminating != 0 {
		e.T.Errorf("status succeeded %d failed %d active %d ready %v terminating %v; want %d, %d, 0, 0, 0",
			st.Succeeded, st.Failed, st.Active, st.Ready, st.Terminating, succeeded, failed)
	}
	all, _ := e.jobPods(j)
	for _, p := range all {
		if jobHasFinalizer(p) {
			e.T.Errorf("pod %s still has the tracking finalizer", p.Name)
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
		{"completions 3, parallelism 2", func(j *batchv1.Job) {
			j.Spec.Completions, j.Spec.Parallelism = ctltest.Ptr(int32(3)), ctltest.Ptr(int32(2))
		},
			3, []int{2, 2, 1}, "3/3"},
		{"Indexed, completions 3, parallelism 2", func(j *batchv1.Job) {
			j.Spec.Completions, j.Spec.Parallelism = ctltest.Ptr(int32(3)), ctltest.Ptr(int32(2))
			j.Spec.CompletionMode = ctltest.Ptr(batchv1.IndexedCompletion)
		}, 3, []int{2, 2, 1}, "3/3"},
		{"work queue: parallelism 2, no completions", func(j *batchv1.Job) { j.Spec.Parallelism = ctltest.Ptr(int32(2)) },
			2, []int{2, 1}, "2/1 of 2"},
		{"defaults: one pod", nil, 1, []int{1}, "1/1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newJobEnv(t, 10*time.Millisecond)
			j := e.createJob(jobTestJob("work", tc.change))
			for i, n := range tc.running {
				var active []*corev1.Pod
				e.Eventually(fmt.Sprintf("step %d: %d active pods counted", i, n), func() bool {
					_, active = e.jobPods(j)
					cur := e.job("work")
					return len(active) == n && cur.Status.Active == int32(n) && cur.Status.StartTime != nil
				})
				e.settleJob("work")
				if _, again := e.jobPods(j); len(again) != n {
					t.Fatalf("step %d: %d active pods, want %d", i, len(again), n)
				}
				if i == 0 {
					e.PodStatus(active[0], func(p *corev1.Pod) {
						p.Status.Phase = corev1.PodRunning
						ctltest.SetReady(p, true, time.Now())
					})
					e.Eventually("the ready pod is counted", func() bool {
						r := e.job("work").Status.Ready
						return r != nil && *r == 1
					})
				}
				e.finish(active[0], corev1.PodSucceeded)
			}
			e.Eventually("Complete", func() bool { return jobCondition(e.job("work"), batchv1.JobComplete) != nil })
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
			e.Eventually("Event Completed", func() bool { return e.HasEvent("Job", "work", corev1.EventTypeNormal, "Completed", "Job completed") })
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
		act          func(e *jobEnv, active []*corev1.Pod)
		reason       string
		failed       int32
		minStartTime time.Duration // the failure is at least this long after startTime
	}{
		{"backoffLimit 1: the second failed pod", func(j *batchv1.Job) { j.Spec.BackoffLimit = ctltest.Ptr(int32(1)) },
			func(e *jobEnv, active []*corev1.Pod) {
				e.finish(active[0], corev1.PodFailed)
				var next []*corev1.Pod
				e.Eventually("a replacement", func() bool {
					_, next = e.jobPods(e.job("work"))
					return len(next) == 1 && next[0].UID != active[0].UID
				})
				e.finish(next[0], corev1.PodFailed)
			}, batchv1.JobReasonBackoffLimitExceeded, 2, 0},
		{"backoffLimit 0: a pod deleted before it finished counts as failed", func(j *batchv1.Job) { j.Spec.BackoffLimit = ctltest.Ptr(int32(0)) },
			func(e *jobEnv, active []*corev1.Pod) {
				if _, _, err := e.Store.Delete(e.Ctx, e.Pods, "default", active[0].Name, metav1.DeleteOptions{}); err != nil {
					e.T.Fatal(err)
				}
			}, batchv1.JobReasonBackoffLimitExceeded, 1, 0},
		{"restartPolicy OnFailure: container restarts reach backoffLimit 2", func(j *batchv1.Job) {
			j.Spec.BackoffLimit = ctltest.Ptr(int32(2))
			j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
		}, func(e *jobEnv, active []*corev1.Pod) {
			e.PodStatus(active[0], func(p *corev1.Pod) {
				p.Status.Phase = corev1.PodRunning
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "work", Image: "busybox", RestartCount: 2}}
			})
		}, batchv1.JobReasonBackoffLimitExceeded, 1, 0},
		{"activeDeadlineSeconds 1: both running pods fail", func(j *batchv1.Job) {
			j.Spec.ActiveDeadlineSeconds = ctltest.Ptr(int64(1))
			j.Spec.Parallelism, j.Spec.Completions = ctltest.Ptr(int32(2)), ctltest.Ptr(int32(4))
		}, func(*jobEnv, []*corev1.Pod) {}, batchv1.JobReasonDeadlineExceeded, 2, time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newJobEnv(t, 10*time.Millisecond)
			j := e.createJob(jobTestJob("work", tc.change))
			var active []*corev1.Pod
			e.Eventually("pods run", func() bool {
				_, active = e.jobPods(j)
				return len(active) == int(*j.Spec.Parallelism)
			})
			tc.act(e, active)
			e.Eventually("Failed", func() bool { return jobCondition(e.job("work"), batchv1.JobFailed) != nil })
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
			e.Eventually("Event "+tc.reason, func() bool { return e.HasEvent("Job", "work", corev1.EventTypeWarning, tc.reason, msg) })
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
	e.Eventually("a pod", func() bool { _, active = e.jobPods(j); return len(active) == 1 })
	e.finish(active[0], corev1.PodFailed)
	failedAt := kit.ReadyCondition(e.podByUID(active[0].UID)).LastTransitionTime
	var next []*corev1.Pod
	e.Eventually("a replacement", func() bool { _, next = e.jobPods(j); return len(next) == 1 })
	if d := next[0].CreationTimestamp.Sub(failedAt.Time); d < 2*time.Second {
		t.Errorf("replaced %v after the failure, want at least the 2s backoff", d)
	}
	e.Eventually("the failure is counted", func() bool { return e.job("work").Status.Failed == 1 })
}

func (e *jobEnv) podByUID(uid types.UID) *corev1.Pod {
	e.T.Helper()
	for _, p := range e.PodList() {
		if p.UID == uid {
			return p
		}
	}
	e.T.Fatalf("no pod %s", uid)
	return nil
}

func TestJobSuspend(t *testing.T) {
	e := newJobEnv(t, 10*time.Millisecond)
	j := e.createJob(jobTestJob("work", func(j *batchv1.Job) {
		j.Spec.Suspend = ctltest.Ptr(true)
		j.Spec.Parallelism, j.Spec.Completions = ctltest.Ptr(int32(2)), ctltest.Ptr(int32(2))
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
	e.Eventually("Suspended", suspended(corev1.ConditionTrue, "JobSuspended", "Job suspended"))
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

	e.mutateJob("work", func(j *batchv1.Job) { j.Spec.Suspend = ctltest.Ptr(false) })
	e.Eventually("resumed with 2 pods", func() bool {
		_, active := e.jobPods(j)
		return len(active) == 2 && suspended(corev1.ConditionFalse, "JobResumed", "Job resumed")() && e.job("work").Status.StartTime != nil
	})

	e.mutateJob("work", func(j *batchv1.Job) { j.Spec.Suspend = ctltest.Ptr(true) })
	e.Eventually("suspended again, its pods gone", func() bool {
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
			j := e.createJob(jobTestJob("work", func(j *batchv1.Job) { j.Spec.TTLSecondsAfterFinished = ctltest.Ptr(ttl) }))
			var active []*corev1.Pod
			e.Eventually("a pod", func() bool { _, active = e.jobPods(j); return len(active) == 1 })
			e.finish(active[0], corev1.PodSucceeded)
			// With no TTL the Job may be gone before a slow poll sees it
			// Complete.
			var done *batchv1.Job
			e.Eventually("Complete", func() bool {
				cur, ok := e.getJob("work")
				if ok && jobFinished(cur) {
					done = cur
				}
				return done != nil || !ok && ttl == 0
			})
			e.Eventually("the Job is deleted", func() bool { _, ok := e.getJob("work"); return !ok })
			if done == nil {
				if ttl != 0 {
					t.Fatal("deleted before it was seen Complete")
				}
			} else if d := time.Since(jobCondition(done, batchv1.JobComplete).LastTransitionTime.Time); d < time.Duration(ttl)*time.Second {
				t.Errorf("deleted %v after it finished, before its TTL of %ds", d, ttl)
			}
			e.Eventually("its pods are gone", func() bool { all, _ := e.jobPods(j); return len(all) == 0 })
		})
	}
}

// Pods keep the tracking finalizer only while a Job counts them.
func TestJobFinalizerOfOrphans(t *testing.T) {
	e := newJobEnv(t, 10*time.Millisecond)
	j := e.createJob(jobTestJob("work", func(j *batchv1.Job) { j.Spec.Parallelism = ctltest.Ptr(int32(2)) }))
	e.Eventually("2 pods with the finalizer", func() bool {
		_, active := e.jobPods(j)
		return len(active) == 2 && jobHasFinalizer(active[0]) && jobHasFinalizer(active[1])
	})
	// A pod with the finalizer that no Job controls loses it (and stays).
	if _, err := e.Store.Create(e.Ctx, e.Pods, "default", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stray", Finalizers: []string{batchv1.JobTrackingFinalizer}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The Job is deleted: the garbage collector deletes its pods, which
	// then lose the finalizer and go.
	if _, _, err := e.Store.Delete(e.Ctx, e.jobRes, "default", "work", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually("the Job's pods are gone", func() bool { all, _ := e.jobPods(j); return len(all) == 0 })
	e.Eventually("the stray pod loses the finalizer", func() bool {
		for _, p := range e.PodList() {
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
		ctltest.SetReady(p, false, t0.Add(time.Duration(sec)*time.Second))
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

// exit ends a pod as its node agent would once its one container exited
// with code: Succeeded for 0, else Failed; conds are added to its
// conditions (a DisruptionTarget, say).
func (e *jobEnv) exit(p *corev1.Pod, code int32, conds ...corev1.PodCondition) {
	e.T.Helper()
	now := time.Now()
	e.PodStatus(p, func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodFailed
		if code == 0 {
			p.Status.Phase = corev1.PodSucceeded
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "work", Image: "busybox", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: code, FinishedAt: metav1.NewTime(now)}}}}
		p.Status.Conditions = append(p.Status.Conditions, conds...)
		ctltest.SetReady(p, false, now)
	})
}

// jobIndexPods returns the pods of j by completion index, oldest first.
func (e *jobEnv) jobIndexPods(j *batchv1.Job) map[int][]*corev1.Pod {
	e.T.Helper()
	all, _ := e.jobPods(j)
	slices.SortStableFunc(all, kit.OldestFirst)
	out := map[int][]*corev1.Pod{}
	for _, p := range all {
		out[jobIndex(p)] = append(out[jobIndex(p)], p)
	}
	return out
}

// awaitIndex waits for an active pod of index ix other than the pods of
// not, and returns it.
func (e *jobEnv) awaitIndex(j *batchv1.Job, ix int, not ...*corev1.Pod) *corev1.Pod {
	e.T.Helper()
	var found *corev1.Pod
	e.Eventually(fmt.Sprintf("an active pod of index %d", ix), func() bool {
		_, active := e.jobPods(j)
		for _, p := range active {
			if jobIndex(p) == ix && !slices.ContainsFunc(not, func(o *corev1.Pod) bool { return o.UID == p.UID }) {
				found = p
				return true
			}
		}
		return false
	})
	return found
}

func jobIndexedTest(completions, parallelism int32) func(*batchv1.Job) {
	return func(j *batchv1.Job) {
		j.Spec.Completions, j.Spec.Parallelism = ctltest.Ptr(completions), ctltest.Ptr(parallelism)
		j.Spec.CompletionMode = ctltest.Ptr(batchv1.IndexedCompletion)
	}
}

func jobExitRule(action batchv1.PodFailurePolicyAction, op batchv1.PodFailurePolicyOnExitCodesOperator, codes ...int32) batchv1.PodFailurePolicyRule {
	return batchv1.PodFailurePolicyRule{Action: action, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: op, Values: codes}}
}

// settleFinished waits for the Job to be Complete or Failed, settles it and
// returns it.
func (e *jobEnv) settleFinished(name string) *batchv1.Job {
	e.T.Helper()
	e.Eventually("Job "+name+" finished", func() bool { return jobFinished(e.job(name)) })
	e.settleJob(name)
	return e.job(name)
}

func (e *jobEnv) wantConditions(j *batchv1.Job, want ...string) {
	e.T.Helper()
	if got := jobConditions(j); !slices.Equal(got, want) {
		e.T.Errorf("conditions %v, want %v", got, want)
	}
}

// A FailJob rule fails the Job on the first pod it matches, well before
// backoffLimit; the other pods are deleted and counted as failed.
func TestJobPodFailurePolicyFailJob(t *testing.T) {
	e := newJobEnv(t, 10*time.Millisecond)
	j := e.createJob(jobTestJob("work", func(j *batchv1.Job) {
		j.Spec.Completions, j.Spec.Parallelism = ctltest.Ptr(int32(4)), ctltest.Ptr(int32(2))
		j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
			jobExitRule(batchv1.PodFailurePolicyActionIgnore, batchv1.PodFailurePolicyOnExitCodesOpIn, 7),
			jobExitRule(batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyOnExitCodesOpIn, 42),
		}}
	}))
	if p := j.Spec.PodReplacementPolicy; p == nil || *p != batchv1.Failed {
		t.Fatalf("podReplacementPolicy %v, want the default Failed", p)
	}
	var active []*corev1.Pod
	e.Eventually("2 pods", func() bool { _, active = e.jobPods(j); return len(active) == 2 })
	e.exit(active[0], 42)
	cur := e.settleFinished("work")
	e.wantConditions(cur, "FailureTarget=True/PodFailurePolicy", "Failed=True/PodFailurePolicy")
	msg := fmt.Sprintf("Container work for pod default/%s failed with exit code 42 matching FailJob rule at index 1", active[0].Name)
	for _, c := range cur.Status.Conditions {
		if c.Message != msg {
			t.Errorf("condition %s message %q, want %q", c.Type, c.Message, msg)
		}
	}
	e.Eventually("Event PodFailurePolicy", func() bool { return e.HasEvent("Job", "work", corev1.EventTypeWarning, "PodFailurePolicy", msg) })
	// The pod left running was deleted, and counted as failed.
	e.jobCounted(cur, 0, 2)
	if all, _ := e.jobPods(j); len(all) != 1 {
		t.Errorf("%d pods left, want only the failed one", len(all))
	}
}

// Failures an Ignore rule matches (by exit code, or by a DisruptionTarget
// condition) are not counted: with backoffLimit 0 the Job still completes.
// A pod being deleted is replaced only once it failed.
func TestJobPodFailurePolicyIgnore(t *testing.T) {
	disruption := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI"}
	cases := []struct {
		name string
		rule batchv1.PodFailurePolicyRule
		// fail makes the first pod fail as the rule matches.
		fail func(e *jobEnv, j *batchv1.Job, p *corev1.Pod)
	}{
		{"exit code 42", jobExitRule(batchv1.PodFailurePolicyActionIgnore, batchv1.PodFailurePolicyOnExitCodesOpIn, 42),
			func(e *jobEnv, _ *batchv1.Job, p *corev1.Pod) { e.exit(p, 42) }},
		{"DisruptionTarget, after an eviction", batchv1.PodFailurePolicyRule{Action: batchv1.PodFailurePolicyActionIgnore,
			OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget}}},
			func(e *jobEnv, j *batchv1.Job, p *corev1.Pod) {
				if _, _, err := e.Store.Delete(e.Ctx, e.Pods, "default", p.Name, metav1.DeleteOptions{}); err != nil {
					e.T.Fatal(err)
				}
				e.Eventually("the pod is terminating", func() bool {
					t := e.job("work").Status.Terminating
					return t != nil && *t == 1
				})
				e.settleJob("work")
				if all, _ := e.jobPods(j); len(all) != 1 {
					e.T.Fatalf("%d pods while the deleted one has not failed, want 1", len(all))
				}
				e.exit(p, 137, disruption)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newJobEnv(t, 10*time.Millisecond)
			j := e.createJob(jobTestJob("work", func(j *batchv1.Job) {
				j.Spec.BackoffLimit = ctltest.Ptr(int32(0))
				j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{tc.rule}}
			}))
			var active []*corev1.Pod
			e.Eventually("a pod", func() bool { _, active = e.jobPods(j); return len(active) == 1 })
			first := active[0]
			tc.fail(e, j, first)
			e.Eventually("a replacement", func() bool {
				_, active = e.jobPods(j)
				return len(active) == 1 && active[0].UID != first.UID
			})
			e.exit(active[0], 0)
			cur := e.settleFinished("work")
			e.wantConditions(cur, "SuccessCriteriaMet=True/CompletionsReached", "Complete=True/CompletionsReached")
			e.jobCounted(cur, 1, 0)
		})
	}

	// A failure no rule matches counts (Count is the default).
	t.Run("no match: counted", func(t *testing.T) {
		e := newJobEnv(t, 10*time.Millisecond)
		j := e.createJob(jobTestJob("work", func(j *batchv1.Job) {
			j.Spec.BackoffLimit = ctltest.Ptr(int32(0))
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{cases[0].rule}}
		}))
		var active []*corev1.Pod
		e.Eventually("a pod", func() bool { _, active = e.jobPods(j); return len(active) == 1 })
		e.exit(active[0], 1)
		cur := e.settleFinished("work")
		e.wantConditions(cur, "FailureTarget=True/BackoffLimitExceeded", "Failed=True/BackoffLimitExceeded")
		e.jobCounted(cur, 0, 1)
	})
}

// A FailIndex rule fails the pod's index at once, whatever
// backoffLimitPerIndex allows; the Job fails with FailedIndexes once the
// other indexes are done.
func TestJobPodFailurePolicyFailIndex(t *testing.T) {
	e := newJobEnv(t, 10*time.Millisecond)
	j := e.createJob(jobTestJob("work", func(j *batchv1.Job) {
		jobIndexedTest(3, 3)(j)
		j.Spec.BackoffLimitPerIndex = ctltest.Ptr(int32(2))
		j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
			jobExitRule(batchv1.PodFailurePolicyActionFailIndex, batchv1.PodFailurePolicyOnExitCodesOpIn, 3),
		}}
	}))
	if j.Spec.BackoffLimit == nil || *j.Spec.BackoffLimit != math.MaxInt32 {
		t.Fatalf("backoffLimit %v, want the default MaxInt32 with backoffLimitPerIndex", j.Spec.BackoffLimit)
	}
	pods := map[int]*corev1.Pod{}
	for ix := range 3 {
		pods[ix] = e.awaitIndex(j, ix)
	}
	e.exit(pods[1], 3)
	e.Eventually("index 1 failed", func() bool {
		f := e.job("work").Status.FailedIndexes
		return f != nil && *f == "1"
	})
	e.exit(pods[0], 0)
	e.exit(pods[2], 0)
	cur := e.settleFinished("work")
	e.wantConditions(cur, "FailureTarget=True/FailedIndexes", "Failed=True/FailedIndexes")
	if msg := cur.Status.Conditions[1].Message; msg != "Job has failed indexes" {
		t.Errorf("Failed message %q", msg)
	}
	if f := cur.Status.FailedIndexes; f == nil || *f != "1" || cur.Status.CompletedIndexes != "0,2" {
		t.Errorf("failedIndexes %v completedIndexes %q, want 1 and 0,2", f, cur.Status.CompletedIndexes)
	}
	e.jobCounted(cur, 2, 1)
	if n := len(e.jobIndexPods(j)[1]); n != 1 {
		t.Errorf("index 1 had %d pods, want 1: FailIndex allows no retry", n)
	}
}

// With backoffLimitPerIndex 1 an index is retried once: the replacement
// carries the index's failure count; when it fails too the index fails,
// the others still run, and the Job fails with FailedIndexes.
func TestJobBackoffLimitPerIndex(t *testing.T) {
	e := newJobEnv(t, 10*time.Millisecond)
	j := e.createJob(jobTestJob("work", func(j *batchv1.Job) {
		jobIndexedTest(3, 2)(j)
		j.Spec.BackoffLimitPerIndex = ctltest.Ptr(int32(1))
	}))
	p0, p1 := e.awaitIndex(j, 0), e.awaitIndex(j, 1)
	e.Eventually("failedIndexes set, empty", func() bool {
		f := e.job("work").Status.FailedIndexes
		return f != nil && *f == ""
	})
	e.exit(p1, 1)
	retry := e.awaitIndex(j, 1, p1)
	e.exit(p0, 0)
	p2 := e.awaitIndex(j, 2)
	e.settleJob("work")
	if f := e.job("work").Status.FailedIndexes; f == nil || *f != "" {
		t.Errorf("failedIndexes %v after one failure of index 1, want empty", f)
	}
	e.exit(retry, 1)
	e.Eventually("index 1 failed", func() bool {
		f := e.job("work").Status.FailedIndexes
		return f != nil && *f == "1"
	})
	e.settleJob("work")
	if jobFinished(e.job("work")) {
		t.Fatal("the Job finished while index 2 runs")
	}
	e.exit(p2, 0)
	cur := e.settleFinished("work")
	e.wantConditions(cur, "FailureTarget=True/FailedIndexes", "Failed=True/FailedIndexes")
	if f := cur.Status.FailedIndexes; f == nil || *f != "1" || cur.Status.CompletedIndexes != "0,2" {
		t.Errorf("failedIndexes %v completedIndexes %q, want 1 and 0,2", f, cur.Status.CompletedIndexes)
	}
	e.jobCounted(cur, 2, 2)
	for _, tc := range []struct {
		what string
		pod  *corev1.Pod
		want string
	}{{"index 0", p0, "0"}, {"index 1", p1, "0"}, {"index 1, retried", retry, "1"}, {"index 2", p2, "0"}} {
		if got := e.podByUID(tc.pod.UID).Annotations[batchv1.JobIndexFailureCountAnnotation]; got != tc.want {
			t.Errorf("pod of %s: failure count %q, want %q", tc.what, got, tc.want)
		}
	}
	if n := len(e.jobIndexPods(j)[1]); n != 2 {
		t.Errorf("index 1 had %d pods, want 2", n)
	}
}

// More failed indexes than maxFailedIndexes fail the Job at once, before
// the other indexes run.
func TestJobMaxFailedIndexes(t *testing.T) {
	e := newJobEnv(t, 10*time.Millisecond)
	j := e.createJob(jobTestJob("work", func(j *batchv1.Job) {
		jobIndexedTest(4, 1)(j)
		j.Spec.BackoffLimitPerIndex = ctltest.Ptr(int32(0))
		j.Spec.MaxFailedIndexes = ctltest.Ptr(int32(1))
	}))
	e.exit(e.awaitIndex(j, 0), 1)
	e.exit(e.awaitIndex(j, 1), 1)
	cur := e.settleFinished("work")
	e.wantConditions(cur, "FailureTarget=True/MaxFailedIndexesExceeded", "Failed=True/MaxFailedIndexesExceeded")
	if msg := cur.Status.Conditions[1].Message; msg != "Job has exceeded the specified maximal number of failed indexes" {
		t.Errorf("Failed message %q", msg)
	}
	if f := cur.Status.FailedIndexes; f == nil || *f != "0,1" {
		t.Errorf("failedIndexes %v, want 0,1", f)
	}
	e.jobCounted(cur, 0, 2)
	if all, _ := e.jobPods(j); len(all) != 2 {
		t.Errorf("%d pods made, want 2", len(all))
	}
}

// A success policy completes an Indexed Job once a rule is met; the pods
// still running are deleted and not counted.
func TestJobSuccessPolicy(t *testing.T) {
	cases := []struct {
		name   string
		policy batchv1.SuccessPolicy
		// run finishes pods of the Job (all 5 indexes start) so that the
		// policy is met, returning the indexes that succeeded and how
		// many pods failed.
		run       func(e *jobEnv, j *batchv1.Job, pods map[int]*corev1.Pod) (string, int32)
		message   string
		completed string
	}{
		{"succeededIndexes", batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{
			{SucceededIndexes: ctltest.Ptr("1-3"), SucceededCount: ctltest.Ptr(int32(3))},
			{SucceededIndexes: ctltest.Ptr("0,2")},
		}}, func(e *jobEnv, j *batchv1.Job, pods map[int]*corev1.Pod) (string, int32) {
			e.exit(pods[2], 0)
			e.exit(pods[3], 0)
			e.settleJob("work")
			if jobFinished(e.job("work")) || jobCondition(e.job("work"), batchv1.JobSuccessCriteriaMet) != nil {
				e.T.Fatal("the policy is met before index 0 succeeded")
			}
			e.exit(pods[0], 0)
			return "0,2,3", 0
		}, "Matched rules at index 1", "0,2,3"},
		{"succeededCount", batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededCount: ctltest.Ptr(int32(2))}}},
			func(e *jobEnv, j *batchv1.Job, pods map[int]*corev1.Pod) (string, int32) {
				e.exit(pods[1], 1)
				e.Eventually("the failure is counted", func() bool { return e.job("work").Status.Failed == 1 })
				e.exit(pods[4], 0)
				e.settleJob("work")
				if jobCondition(e.job("work"), batchv1.JobSuccessCriteriaMet) != nil {
					e.T.Fatal("the policy is met after one success")
				}
				e.exit(pods[2], 0)
				return "2,4", 1
			}, "Matched rules at index 0", "2,4"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newJobEnv(t, 10*time.Millisecond)
			j := e.createJob(jobTestJob("work", func(j *batchv1.Job) {
				jobIndexedTest(5, 5)(j)
				j.Spec.SuccessPolicy = &tc.policy
			}))
			pods := map[int]*corev1.Pod{}
			for ix := range 5 {
				pods[ix] = e.awaitIndex(j, ix)
			}
			completed, failed := tc.run(e, j, pods)
			cur := e.settleFinished("work")
			e.wantConditions(cur, "SuccessCriteriaMet=True/SuccessPolicy", "Complete=True/SuccessPolicy")
			for _, c := range cur.Status.Conditions {
				if c.Message != tc.message {
					t.Errorf("condition %s message %q, want %q", c.Type, c.Message, tc.message)
				}
			}
			if cur.Status.CompletedIndexes != completed || cur.Status.CompletionTime == nil {
				t.Errorf("completedIndexes %q completionTime %v, want %q and a time", cur.Status.CompletedIndexes, cur.Status.CompletionTime, completed)
			}
			succeeded := int32(len(strings.Split(completed, ",")))
			e.jobCounted(cur, succeeded, failed)
			if _, active := e.jobPods(j); len(active) != 0 {
				t.Errorf("%d pods still active", len(active))
			}
			e.Eventually("Event Completed", func() bool { return e.HasEvent("Job", "work", corev1.EventTypeNormal, "Completed", "Job completed") })
		})
	}
}

func TestJobJudgeFailure(t *testing.T) {
	pod := func(conds []corev1.PodCondition, codes ...int32) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
		p.Status.Conditions = conds
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}}
		for i, c := range codes {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: fmt.Sprintf("c%d", i),
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: c}}})
		}
		// A container still running has no exit code to match.
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: "running",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})
		return p
	}
	onCode := func(action batchv1.PodFailurePolicyAction, op batchv1.PodFailurePolicyOnExitCodesOperator, container string, codes ...int32) batchv1.PodFailurePolicyRule {
		r := jobExitRule(action, op, codes...)
		if container != "" {
			r.OnExitCodes.ContainerName = &container
		}
		return r
	}
	disrupted := []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}, {Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}
	cases := []struct {
		name    string
		rules   []batchv1.PodFailurePolicyRule
		pod     *corev1.Pod
		action  batchv1.PodFailurePolicyAction
		message string
		counts  bool
	}{
		{"no rules", nil, pod(nil, 1), "", "", true},
		{"In matches", []batchv1.PodFailurePolicyRule{onCode("FailJob", "In", "", 5, 1)}, pod(nil, 0, 1), "FailJob",
			"Container c1 for pod ns/p failed with exit code 1 matching FailJob rule at index 0", true},
		{"exit code 0 never matches", []batchv1.PodFailurePolicyRule{onCode("FailJob", "NotIn", "", 1)}, pod(nil, 0, 1), "", "", true},
		{"NotIn", []batchv1.PodFailurePolicyRule{onCode("Ignore", "NotIn", "", 1, 2), onCode("FailJob", "NotIn", "", 3)}, pod(nil, 2), "FailJob",
			"Container c0 for pod ns/p failed with exit code 2 matching FailJob rule at index 1", true},
		{"the first rule that matches wins", []batchv1.PodFailurePolicyRule{onCode("Ignore", "In", "", 9), onCode("Count", "In", "", 1),
			onCode("FailJob", "In", "", 1)}, pod(nil, 1), "Count", "", true},
		{"Ignore", []batchv1.PodFailurePolicyRule{onCode("Ignore", "In", "", 1)}, pod(nil, 1), "Ignore", "", false},
		{"containerName", []batchv1.PodFailurePolicyRule{onCode("Ignore", "In", "c0", 1), onCode("FailIndex", "In", "c1", 1)}, pod(nil, 0, 1), "FailIndex", "", true},
		{"init containers", []batchv1.PodFailurePolicyRule{onCode("FailJob", "In", "", 4)}, func() *corev1.Pod {
			p := pod(nil)
			p.Status.InitContainerStatuses[0].State.Terminated.ExitCode = 4
			return p
		}(), "FailJob", "Container init for pod ns/p failed with exit code 4 matching FailJob rule at index 0", true},
		{"pod condition", []batchv1.PodFailurePolicyRule{onCode("Count", "In", "", 9), {Action: "FailJob",
			OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}}},
			pod(disrupted, 1), "FailJob", "Pod ns/p has condition DisruptionTarget matching FailJob rule at index 1", true},
		{"pod condition of another status", []batchv1.PodFailurePolicyRule{{Action: "Ignore",
			OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionFalse}}}},
			pod(disrupted, 1), "", "", true},
		{"an unknown action is passed over", []batchv1.PodFailurePolicyRule{onCode("Retry", "In", "", 1), onCode("Ignore", "In", "", 1)},
			pod(nil, 1), "Ignore", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := &batchv1.Job{}
			if tc.rules != nil {
				j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: tc.rules}
			}
			v := jobJudgeFailure(j, tc.pod)
			if v.action != tc.action || v.message != tc.message || v.counts() != tc.counts {
				t.Errorf("action %q message %q counts %v, want %q, %q, %v", v.action, v.message, v.counts(), tc.action, tc.message, tc.counts)
			}
		})
	}
}

func TestJobMeetsSuccessPolicy(t *testing.T) {
	rules := func(r ...batchv1.SuccessPolicyRule) *batchv1.SuccessPolicy { return &batchv1.SuccessPolicy{Rules: r} }
	cases := []struct {
		name      string
		policy    *batchv1.SuccessPolicy
		succeeded []int
		want      string // "" if not met
	}{
		{"no policy", nil, []int{0, 1, 2}, ""},
		{"nothing succeeded", rules(batchv1.SuccessPolicyRule{SucceededCount: ctltest.Ptr(int32(0))}), nil, ""},
		{"indexes all succeeded", rules(batchv1.SuccessPolicyRule{SucceededIndexes: ctltest.Ptr("0,2-3")}), []int{0, 2, 3}, "Matched rules at index 0"},
		{"indexes not all succeeded", rules(batchv1.SuccessPolicyRule{SucceededIndexes: ctltest.Ptr("0,2-3")}), []int{0, 1, 2, 4}, ""},
		{"enough of the indexes", rules(batchv1.SuccessPolicyRule{SucceededIndexes: ctltest.Ptr("1-5"), SucceededCount: ctltest.Ptr(int32(2))}), []int{0, 3, 5}, "Matched rules at index 0"},
		{"too few of the indexes", rules(batchv1.SuccessPolicyRule{SucceededIndexes: ctltest.Ptr("1-5"), SucceededCount: ctltest.Ptr(int32(2))}), []int{0, 3, 6}, ""},
		{"indexes beyond completions", rules(batchv1.SuccessPolicyRule{SucceededIndexes: ctltest.Ptr("8-9")}), []int{0}, ""},
		{"count", rules(batchv1.SuccessPolicyRule{SucceededIndexes: ctltest.Ptr("5")}, batchv1.SuccessPolicyRule{SucceededCount: ctltest.Ptr(int32(2))}),
			[]int{1, 7}, "Matched rules at index 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg, met := jobMeetsSuccessPolicy(tc.policy, 8, sets.New(tc.succeeded...))
			if msg != tc.want || met != (tc.want != "") {
				t.Errorf("%q, %v; want %q", msg, met, tc.want)
			}
		})
	}
}
