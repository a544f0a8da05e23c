package cronjob

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/isle-cluster/isle/control/controllers/internal/ctltest"
	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/registry"
)

type env struct {
	*ctltest.Env
	t              *testing.T
	clock          *kit.TestClock
	cronJobs, jobs *registry.Resource

	mu     sync.Mutex
	synced int64 // the highest store revision a finished sync began at
}

func newEnv(t *testing.T) *env {
	clock := kit.NewTestClock(time.Date(2026, 1, 1, 10, 0, 30, 0, time.UTC))
	ce := ctltest.New(t, clock.Now)
	e := &env{Env: ce, t: t, clock: clock,
		cronJobs: kit.MustLookup(ce.Store, batchv1.SchemeGroupVersion.WithResource("cronjobs")),
		jobs:     kit.MustLookup(ce.Store, batchv1.SchemeGroupVersion.WithResource("jobs"))}
	c := New(ce.Store, ce.Log, ce.Events.Recorder("cronjob-controller"))
	c.now = clock.Now
	c.synced = func(_ string, rev int64) {
		e.mu.Lock()
		e.synced = max(e.synced, rev)
		e.mu.Unlock()
	}
	ce.Run(t, c)
	return e
}

func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(ctltest.Wait)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: not true within %v", what, ctltest.Wait)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// settle pokes the CronJob and waits for a sync that began after the
// poke: what the test sees then is the controller's answer to the clock.
func (e *env) settle() {
	e.t.Helper()
	out := e.mutate(func(cj *batchv1.CronJob) {
		n, _ := strconv.Atoi(cj.Annotations["poke"])
		cj.Annotations = map[string]string{"poke": strconv.Itoa(n + 1)}
	})
	rev, _ := strconv.ParseInt(out.ResourceVersion, 10, 64)
	e.eventually("a sync after the poke", func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.synced >= rev
	})
}

func (e *env) mutate(change func(*batchv1.CronJob)) *batchv1.CronJob {
	e.t.Helper()
	out, err := e.Store.Mutate(e.t.Context(), e.cronJobs, "default", "tick", "", func(o runtime.Object) error {
		change(o.(*batchv1.CronJob))
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out.(*batchv1.CronJob)
}

func (e *env) cronJob() *batchv1.CronJob {
	e.t.Helper()
	obj, err := e.Store.Get(e.t.Context(), e.cronJobs, "default", "tick", metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return obj.(*batchv1.CronJob)
}

// jobNames are the CronJob's Jobs, by name.
func (e *env) jobNames() []string {
	list, err := e.Store.List(e.t.Context(), e.jobs, "default", metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, j := range list.(*batchv1.JobList).Items {
		if j.DeletionTimestamp == nil {
			out = append(out, j.Name)
		}
	}
	slices.Sort(out)
	return out
}

// jobAt is the name of the Job of the scheduled minute.
func jobAt(t time.Time) string { return fmt.Sprintf("tick-%d", t.Unix()/60) }

// finish marks a Job succeeded now.
func (e *env) finish(name string) {
	e.t.Helper()
	now := metav1.NewTime(e.clock.Now())
	if _, err := e.Store.Mutate(e.t.Context(), e.jobs, "default", name, "status", func(o runtime.Object) error {
		j := o.(*batchv1.Job)
		j.Status.StartTime, j.Status.CompletionTime, j.Status.Succeeded = &now, &now, 1
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now}}
		return nil
	}); err != nil {
		e.t.Fatalf("finish job %s: %v", name, err)
	}
}

func (e *env) hasEvent(reason string) bool {
	list, err := e.Store.List(e.t.Context(), kit.MustLookup(e.Store, corev1.SchemeGroupVersion.WithResource("events")), "default", metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return slices.ContainsFunc(list.(*corev1.EventList).Items, func(ev corev1.Event) bool {
		return ev.InvolvedObject.Kind == "CronJob" && ev.Reason == reason
	})
}

func TestCronJobSchedules(t *testing.T) {
	e := newEnv(t)
	utc := "UTC"
	if _, err := e.Store.Create(t.Context(), e.cronJobs, "default", &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "tick"},
		Spec: batchv1.CronJobSpec{Schedule: "* * * * *", TimeZone: &utc, SuccessfulJobsHistoryLimit: ctltest.Ptr(int32(2)),
			JobTemplate: batchv1.JobTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "tick"}},
				Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}}}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.settle()
	if got := e.jobNames(); len(got) != 0 {
		t.Fatalf("jobs %v before the first minute", got)
	}

	// Each minute its Job, once; finished ones beyond the limit go.
	var want []string
	for i := range 4 {
		e.clock.Advance(time.Minute)
		minute := e.clock.Now().Truncate(time.Minute)
		e.settle()
		e.settle()
		name := jobAt(minute)
		cj := e.cronJob()
		if !slices.Contains(e.jobNames(), name) || len(cj.Status.Active) != 1 || cj.Status.Active[0].Name != name ||
			!cj.Status.LastScheduleTime.Time.Equal(minute) {
			t.Fatalf("minute %d: jobs %v, status %+v; want %s active", i, e.jobNames(), cj.Status, name)
		}
		obj, _ := e.Store.Get(t.Context(), e.jobs, "default", name, metav1.GetOptions{})
		j := obj.(*batchv1.Job)
		if j.Annotations[batchv1.CronJobScheduledTimestampAnnotation] != minute.Format(time.RFC3339) || j.Labels["app"] != "tick" ||
			!metav1.IsControlledBy(j, cj) {
			t.Fatalf("job %s: annotations %v, labels %v, owners %v", name, j.Annotations, j.Labels, j.OwnerReferences)
		}
		e.finish(name)
		want = append(want, name)
		e.eventually("the finished job leaves status.active", func() bool {
			st := e.cronJob().Status
			return len(st.Active) == 0 && st.LastSuccessfulTime != nil
		})
	}
	e.settle()
	if got := e.jobNames(); !slices.Equal(got, want[2:]) {
		t.Fatalf("jobs after four minutes: %v, want the last two %v", got, want[2:])
	}
	if !e.hasEvent("SawCompletedJob") || !e.hasEvent("SuccessfulCreate") || !e.hasEvent("SuccessfulDelete") {
		t.Error("want SawCompletedJob, SuccessfulCreate and SuccessfulDelete Events")
	}

	// An outage of ten minutes: one Job, for the last minute missed.
	e.clock.Advance(10 * time.Minute)
	e.settle()
	e.settle()
	last := e.clock.Now().Truncate(time.Minute)
	if got := slices.DeleteFunc(e.jobNames(), func(n string) bool { return slices.Contains(want, n) }); !slices.Equal(got, []string{jobAt(last)}) {
		t.Fatalf("after the outage: new jobs %v, want %s alone", got, jobAt(last))
	}

	// Forbid: no second Job while one runs.
	e.mutate(func(cj *batchv1.CronJob) { cj.Spec.ConcurrencyPolicy = batchv1.ForbidConcurrent })
	before := e.jobNames()
	e.clock.Advance(time.Minute)
	e.settle()
	e.settle()
	if got := e.jobNames(); !slices.Equal(got, before) || !e.hasEvent("JobAlreadyActive") {
		t.Fatalf("Forbid with a job running: jobs %v (before %v)", got, before)
	}

	// Replace: the running Job goes for the new one.
	e.mutate(func(cj *batchv1.CronJob) { cj.Spec.ConcurrencyPolicy = batchv1.ReplaceConcurrent })
	e.clock.Advance(time.Minute)
	e.settle()
	e.settle()
	now := jobAt(e.clock.Now().Truncate(time.Minute))
	cj := e.cronJob()
	if len(cj.Status.Active) != 1 || cj.Status.Active[0].Name != now || slices.Contains(e.jobNames(), jobAt(last)) {
		t.Fatalf("Replace: active %v, jobs %v; want %s alone running and %s gone", cj.Status.Active, e.jobNames(), now, jobAt(last))
	}

	// A starting deadline shorter than the delay: the time is missed.
	e.mutate(func(cj *batchv1.CronJob) {
		cj.Spec.StartingDeadlineSeconds = ctltest.Ptr(int64(20))
		cj.Spec.ConcurrencyPolicy = batchv1.AllowConcurrent
	})
	before = e.jobNames()
	e.clock.Advance(2 * time.Minute)
	e.settle()
	if got := e.jobNames(); !maps.Equal(setOf(got), setOf(before)) {
		t.Fatalf("a time 30 s past a 20 s deadline ran: %v", got)
	}

	// Suspended: nothing runs.
	e.mutate(func(cj *batchv1.CronJob) { cj.Spec.Suspend = ctltest.Ptr(true) })
	e.clock.Advance(5 * time.Minute)
	e.settle()
	if got := e.jobNames(); !maps.Equal(setOf(got), setOf(before)) {
		t.Fatalf("a suspended CronJob ran: %v", got)
	}
}

func setOf(s []string) map[string]bool {
	m := map[string]bool{}
	for _, v := range s {
		m[v] = true
	}
	return m
}
