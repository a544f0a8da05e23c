package printers

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestDeploymentRows(t *testing.T) {
	ready := deployment()

	rolling := deployment()
	rolling.Spec.Replicas = ptr(int32(4))
	rolling.Status = appsv1.DeploymentStatus{Replicas: 5, UpdatedReplicas: 2, ReadyReplicas: 3, AvailableReplicas: 3}
	rolling.Spec.Selector = &metav1.LabelSelector{
		MatchLabels:      map[string]string{"app": "web"},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"front", "edge"}}},
	}

	noSelector := deployment()
	noSelector.Spec.Selector = nil
	noSelector.Spec.Replicas = nil
	noSelector.Status = appsv1.DeploymentStatus{}

	badSelector := deployment()
	badSelector.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}

	tests := []struct {
		name string
		d    *appsv1.Deployment
		want []interface{}
	}{
		{"all ready", &ready, []interface{}{"web", "3/3", int64(3), int64(3), "3d", "web,exporter", "nginx:1.27,nginx/nginx-prometheus-exporter:1.3", "app=web"}},
		{"rolling out", &rolling, []interface{}{"web", "3/4", int64(2), int64(3), "3d", "web,exporter", "nginx:1.27,nginx/nginx-prometheus-exporter:1.3", "app=web,tier in (edge,front)"}},
		{"not defaulted, no selector", &noSelector, []interface{}{"web", "0/1", int64(0), int64(0), "3d", "web,exporter", "nginx:1.27,nginx/nginx-prometheus-exporter:1.3", ""}},
		{"invalid selector", &badSelector, []interface{}{"web", "3/3", int64(3), int64(3), "3d", "web,exporter", "nginx:1.27,nginx/nginx-prometheus-exporter:1.3", "<invalid>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkCells(t, gr("apps", "deployments"), tt.d, tt.want)
		})
	}
}

func TestReplicaSetRows(t *testing.T) {
	rs := replicaSet()
	old := replicaSet()
	old.Name = "web-5c6d7e8f9"
	old.Spec.Replicas = ptr(int32(0))
	old.Spec.Selector = nil
	old.Status = appsv1.ReplicaSetStatus{}

	tests := []struct {
		name string
		rs   *appsv1.ReplicaSet
		want []interface{}
	}{
		{"scaled", &rs, []interface{}{"web-7d4b9c6f5", int64(3), int64(3), int64(2), "3d", "web", "nginx:1.27", "app=web,pod-template-hash=7d4b9c6f5"}},
		{"scaled down, no selector", &old, []interface{}{"web-5c6d7e8f9", int64(0), int64(0), int64(0), "3d", "web", "nginx:1.27", "<none>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkCells(t, gr("apps", "replicasets"), tt.rs, tt.want)
		})
	}
}

func TestDaemonSetRows(t *testing.T) {
	ds := daemonSet()
	anywhere := daemonSet()
	anywhere.Name = "node-agent"
	anywhere.Spec.Template.Spec.NodeSelector = nil
	anywhere.Spec.Template.Spec.Containers = append(anywhere.Spec.Template.Spec.Containers, corev1.Container{Name: "log", Image: "fluent-bit:3.1"})

	tests := []struct {
		name string
		ds   *appsv1.DaemonSet
		want []interface{}
	}{
		{"with node selector", &ds, []interface{}{"kube-proxy", int64(3), int64(3), int64(2), int64(3), int64(2), "kubernetes.io/os=linux", "40d",
			"kube-proxy", "registry.k8s.io/kube-proxy:v1.32.0", "k8s-app=kube-proxy"}},
		{"every node, two containers", &anywhere, []interface{}{"node-agent", int64(3), int64(3), int64(2), int64(3), int64(2), "<none>", "40d",
			"kube-proxy,log", "registry.k8s.io/kube-proxy:v1.32.0,fluent-bit:3.1", "k8s-app=kube-proxy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkCells(t, gr("apps", "daemonsets"), tt.ds, tt.want)
		})
	}
}

func TestJobRows(t *testing.T) {
	complete := completeJob()
	queue := runningJob()

	withCondition := func(name string, ct batchv1.JobConditionType, status corev1.ConditionStatus) *batchv1.Job {
		j := runningJob()
		j.Name = name
		j.Spec.Parallelism = ptr(int32(1))
		j.Status.Conditions = []batchv1.JobCondition{{Type: ct, Status: status}}
		return &j
	}
	failed := withCondition("failed", batchv1.JobFailed, corev1.ConditionTrue)
	failed.Spec.Completions = ptr(int32(5))
	failed.Status.Succeeded = 2
	failed.Status.CompletionTime = agoPtr(time.Minute)

	terminating := withCondition("terminating", batchv1.JobSuspended, corev1.ConditionTrue)
	terminating.DeletionTimestamp = agoPtr(time.Second)

	notStarted := batchv1.Job{
		ObjectMeta: meta("later", 5*time.Second),
		Spec:       batchv1.JobSpec{Suspend: ptr(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}},
	}

	tests := []struct {
		name string
		job  *batchv1.Job
		want []interface{}
	}{
		{"complete", &complete, []interface{}{"pi", "Complete", "1/1", "12s", "10m", "pi", "perl:5.34.0", "batch.kubernetes.io/controller-uid=5f1c"}},
		{"work queue running", &queue, []interface{}{"queue-worker", "Running", "0/1 of 3", "3m", "3m", "worker", "busybox:1.36", "<none>"}},
		{"failed", failed, []interface{}{"failed", "Failed", "2/5", "2m", "3m", "worker", "busybox:1.36", "<none>"}},
		{"terminating wins over suspended", terminating, []interface{}{"terminating", "Terminating", "0/1", "3m", "3m", "worker", "busybox:1.36", "<none>"}},
		{"suspended", withCondition("suspended", batchv1.JobSuspended, corev1.ConditionTrue), []interface{}{"suspended", "Suspended", "0/1", "3m", "3m", "worker", "busybox:1.36", "<none>"}},
		{"failure target", withCondition("failing", batchv1.JobFailureTarget, corev1.ConditionTrue), []interface{}{"failing", "FailureTarget", "0/1", "3m", "3m", "worker", "busybox:1.36", "<none>"}},
		{"false condition ignored", withCondition("resumed", batchv1.JobSuspended, corev1.ConditionFalse), []interface{}{"resumed", "Running", "0/1", "3m", "3m", "worker", "busybox:1.36", "<none>"}},
		{"not started", &notStarted, []interface{}{"later", "Running", "0/1", "", "5s", "c", "busybox", "<none>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkCells(t, gr("batch", "jobs"), tt.job, tt.want)
		})
	}
}

func TestStatefulSetAndRevisionRows(t *testing.T) {
	containers := []corev1.Container{{Name: "db", Image: "postgres:17"}}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", CreationTimestamp: ago(72 * time.Hour)},
		Spec:   appsv1.StatefulSetSpec{Replicas: ptr(int32(3)), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: containers}}},
		Status: appsv1.StatefulSetStatus{ReadyReplicas: 2}}
	checkCells(t, gr("apps", "statefulsets"), sts, []interface{}{"db", "2/3", "3d", "db", "postgres:17"})
	rev := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "db-7d9f8c6b5", CreationTimestamp: ago(time.Hour),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", Controller: ptr(true)}}}, Revision: 2}
	checkCells(t, gr("apps", "controllerrevisions"), rev, []interface{}{"db-7d9f8c6b5", "statefulset.apps/db", int64(2), "60m"})
	rev.OwnerReferences = nil
	checkCells(t, gr("apps", "controllerrevisions"), rev, []interface{}{"db-7d9f8c6b5", "<none>", int64(2), "60m"})
}

func TestCronJobRows(t *testing.T) {
	cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "backup", CreationTimestamp: ago(48 * time.Hour)},
		Spec: batchv1.CronJobSpec{Schedule: "@daily", Suspend: ptr(false), JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "dump", Image: "restic:0.17"}}}}}}},
		Status: batchv1.CronJobStatus{Active: []corev1.ObjectReference{{Name: "backup-1"}}, LastScheduleTime: agoPtr(5 * time.Minute)}}
	checkCells(t, gr("batch", "cronjobs"), cj, []interface{}{"backup", "@daily", "<none>", "False", int64(1), "5m", "2d", "dump", "restic:0.17", "<none>"})
	cj.Spec.TimeZone, cj.Spec.Suspend, cj.Status = ptr("Europe/Berlin"), nil, batchv1.CronJobStatus{}
	checkCells(t, gr("batch", "cronjobs"), cj, []interface{}{"backup", "@daily", "Europe/Berlin", "<unset>", int64(0), "<none>", "2d", "dump", "restic:0.17", "<none>"})
}

func TestReplicationControllerRows(t *testing.T) {
	rc := &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "old", CreationTimestamp: ago(time.Hour)},
		Spec: corev1.ReplicationControllerSpec{Replicas: ptr(int32(2)), Selector: map[string]string{"app": "old"},
			Template: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}},
		Status: corev1.ReplicationControllerStatus{Replicas: 2, ReadyReplicas: 1}}
	checkCells(t, gr("", "replicationcontrollers"), rc, []interface{}{"old", int64(2), int64(2), int64(1), "60m", "c", "busybox", "app=old"})
	rc.Spec.Template = nil
	checkCells(t, gr("", "replicationcontrollers"), rc, []interface{}{"old", int64(2), int64(2), int64(1), "60m", "", "", "app=old"})
}

func TestBudgetAndPriorityClassRows(t *testing.T) {
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "db", CreationTimestamp: ago(time.Hour)},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr(intstr.FromString("50%"))}, Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1}}
	checkCells(t, gr("policy", "poddisruptionbudgets"), pdb, []interface{}{"db", "50%", "N/A", int64(1), "60m"})
	pdb.Spec = policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr(intstr.FromInt32(1))}
	checkCells(t, gr("policy", "poddisruptionbudgets"), pdb, []interface{}{"db", "N/A", "1", int64(1), "60m"})
	never := corev1.PreemptNever
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "batch", CreationTimestamp: ago(time.Hour)}, Value: 100, PreemptionPolicy: &never}
	checkCells(t, gr("scheduling.k8s.io", "priorityclasses"), pc, []interface{}{"batch", int64(100), false, "60m", "Never"})
}
