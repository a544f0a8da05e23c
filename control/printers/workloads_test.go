package printers

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
