package printers

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
)

// Printers of workload controllers: deployments, replica sets, daemon sets
// and jobs.

// replicas is spec.replicas with the API's default of 1 for an object that
// was not defaulted.
func replicas(r *int32) int64 {
	if r == nil {
		return 1
	}
	return int64(*r)
}

func printDeployment(d *appsv1.Deployment, now time.Time) []interface{} {
	// Unlike the other controllers, a deployment's selector prints as the
	// bare selector string: empty, not "<none>", when there is none.
	selector := "<invalid>"
	if s, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil {
		selector = s.String()
	}
	names, images := containerCells(d.Spec.Template.Spec.Containers)
	return []interface{}{
		d.Name,
		fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, replicas(d.Spec.Replicas)),
		int64(d.Status.UpdatedReplicas),
		int64(d.Status.AvailableReplicas),
		since(d.CreationTimestamp, now),
		names,
		images,
		selector,
	}
}

func printReplicationController(rc *corev1.ReplicationController, now time.Time) []interface{} {
	var containers []corev1.Container
	if rc.Spec.Template != nil {
		containers = rc.Spec.Template.Spec.Containers
	}
	names, images := containerCells(containers)
	return []interface{}{
		rc.Name,
		replicas(rc.Spec.Replicas),
		int64(rc.Status.Replicas),
		int64(rc.Status.ReadyReplicas),
		since(rc.CreationTimestamp, now),
		names,
		images,
		labels.FormatLabels(rc.Spec.Selector),
	}
}

func printStatefulSet(s *appsv1.StatefulSet, now time.Time) []interface{} {
	names, images := containerCells(s.Spec.Template.Spec.Containers)
	return []interface{}{s.Name, fmt.Sprintf("%d/%d", s.Status.ReadyReplicas, replicas(s.Spec.Replicas)), since(s.CreationTimestamp, now), names, images}
}

// printControllerRevision names the revision's controller as
// "kind.group/name" (statefulset.apps/web), as kubectl's printer does.
func printControllerRevision(r *appsv1.ControllerRevision, now time.Time) []interface{} {
	controller := none
	if ref := metav1.GetControllerOf(r); ref != nil {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err == nil {
			controller = strings.ToLower(gv.WithKind(ref.Kind).GroupKind().String()) + "/" + ref.Name
		}
	}
	return []interface{}{r.Name, controller, r.Revision, since(r.CreationTimestamp, now)}
}

func printPriorityClass(pc *schedulingv1.PriorityClass, now time.Time) []interface{} {
	policy := ""
	if pc.PreemptionPolicy != nil {
		policy = string(*pc.PreemptionPolicy)
	}
	return []interface{}{pc.Name, int64(pc.Value), pc.GlobalDefault, since(pc.CreationTimestamp, now), policy}
}

func printPodDisruptionBudget(p *policyv1.PodDisruptionBudget, now time.Time) []interface{} {
	minAvailable, maxUnavailable := "N/A", "N/A"
	if v := p.Spec.MinAvailable; v != nil {
		minAvailable = v.String()
	}
	if v := p.Spec.MaxUnavailable; v != nil {
		maxUnavailable = v.String()
	}
	return []interface{}{p.Name, minAvailable, maxUnavailable, int64(p.Status.DisruptionsAllowed), since(p.CreationTimestamp, now)}
}

func printCronJob(c *batchv1.CronJob, now time.Time) []interface{} {
	last := none
	if t := c.Status.LastScheduleTime; t != nil {
		last = since(*t, now)
	}
	tz, suspend := none, unset
	if c.Spec.TimeZone != nil {
		tz = *c.Spec.TimeZone
	}
	if c.Spec.Suspend != nil {
		suspend = "False"
		if *c.Spec.Suspend {
			suspend = "True"
		}
	}
	names, images := containerCells(c.Spec.JobTemplate.Spec.Template.Spec.Containers)
	return []interface{}{c.Name, c.Spec.Schedule, tz, suspend, int64(len(c.Status.Active)), last, since(c.CreationTimestamp, now),
		names, images, metav1.FormatLabelSelector(c.Spec.JobTemplate.Spec.Selector)}
}

func printReplicaSet(rs *appsv1.ReplicaSet, now time.Time) []interface{} {
	names, images := containerCells(rs.Spec.Template.Spec.Containers)
	return []interface{}{
		rs.Name,
		replicas(rs.Spec.Replicas),
		int64(rs.Status.Replicas),
		int64(rs.Status.ReadyReplicas),
		since(rs.CreationTimestamp, now),
		names,
		images,
		metav1.FormatLabelSelector(rs.Spec.Selector),
	}
}

func printDaemonSet(ds *appsv1.DaemonSet, now time.Time) []interface{} {
	names, images := containerCells(ds.Spec.Template.Spec.Containers)
	return []interface{}{
		ds.Name,
		int64(ds.Status.DesiredNumberScheduled),
		int64(ds.Status.CurrentNumberScheduled),
		int64(ds.Status.NumberReady),
		int64(ds.Status.UpdatedNumberScheduled),
		int64(ds.Status.NumberAvailable),
		labels.FormatLabels(ds.Spec.Template.Spec.NodeSelector),
		since(ds.CreationTimestamp, now),
		names,
		images,
		metav1.FormatLabelSelector(ds.Spec.Selector),
	}
}

func printJob(job *batchv1.Job, now time.Time) []interface{} {
	var completions string
	switch {
	case job.Spec.Completions != nil:
		completions = fmt.Sprintf("%d/%d", job.Status.Succeeded, *job.Spec.Completions)
	case job.Spec.Parallelism != nil && *job.Spec.Parallelism > 1:
		// A work queue: done when any pod succeeds.
		completions = fmt.Sprintf("%d/1 of %d", job.Status.Succeeded, *job.Spec.Parallelism)
	default:
		completions = fmt.Sprintf("%d/1", job.Status.Succeeded)
	}

	var took string
	switch start := job.Status.StartTime; {
	case start == nil:
	case job.Status.CompletionTime == nil:
		took = duration.HumanDuration(now.Sub(start.Time))
	default:
		took = duration.HumanDuration(job.Status.CompletionTime.Sub(start.Time))
	}

	names, images := containerCells(job.Spec.Template.Spec.Containers)
	return []interface{}{
		job.Name,
		jobStatus(job),
		completions,
		took,
		since(job.CreationTimestamp, now),
		names,
		images,
		metav1.FormatLabelSelector(job.Spec.Selector),
	}
}

// jobStatus is the first that applies of Complete, Failed, Terminating,
// Suspended, FailureTarget, Running.
func jobStatus(job *batchv1.Job) string {
	switch {
	case jobCondition(job, batchv1.JobComplete):
		return "Complete"
	case jobCondition(job, batchv1.JobFailed):
		return "Failed"
	case job.DeletionTimestamp != nil:
		return "Terminating"
	case jobCondition(job, batchv1.JobSuspended):
		return "Suspended"
	case jobCondition(job, batchv1.JobFailureTarget):
		return "FailureTarget"
	}
	return "Running"
}

// jobCondition reports whether the job's first condition of type t is True.
func jobCondition(job *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
