package strategy

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidateDeployment(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(d *appsv1.Deployment)
		want   []wantErr
	}{
		{"valid", func(d *appsv1.Deployment) {}, nil},
		{"selector missing", func(d *appsv1.Deployment) { d.Spec.Selector = nil },
			[]wantErr{{field.ErrorTypeRequired, "spec.selector", ""}}},
		{"selector empty", func(d *appsv1.Deployment) { d.Spec.Selector = &metav1.LabelSelector{} },
			[]wantErr{{field.ErrorTypeInvalid, "spec.selector", "empty selector is invalid for deployment"}}},
		{"selector does not match", func(d *appsv1.Deployment) { d.Spec.Template.Labels = map[string]string{"app": "x"} },
			[]wantErr{{field.ErrorTypeInvalid, "spec.template.metadata.labels", "`selector` does not match template `labels`"}}},
		{"selector operator invalid", func(d *appsv1.Deployment) {
			d.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Like"}}
		}, []wantErr{{field.ErrorTypeInvalid, "spec.selector.matchExpressions[0].operator", ""}}},
		{"replicas negative", func(d *appsv1.Deployment) { d.Spec.Replicas = ptrTo(int32(-1)) },
			[]wantErr{{field.ErrorTypeInvalid, "spec.replicas", "must be greater than or equal to 0"}}},
		{"template restart policy", func(d *appsv1.Deployment) { d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure },
			[]wantErr{{field.ErrorTypeNotSupported, "spec.template.spec.restartPolicy", `supported values: "Always"`}}},
		{"template container invalid", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "" },
			[]wantErr{{field.ErrorTypeRequired, "spec.template.spec.containers[0].image", ""}}},
		{"strategy type unknown", func(d *appsv1.Deployment) { d.Spec.Strategy = appsv1.DeploymentStrategy{Type: "BlueGreen"} },
			[]wantErr{{field.ErrorTypeNotSupported, "spec.strategy", `"Recreate", "RollingUpdate"`}}},
		{"recreate with rolling update", func(d *appsv1.Deployment) { d.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType },
			[]wantErr{{field.ErrorTypeForbidden, "spec.strategy.rollingUpdate", "may not be specified when strategy `type` is 'Recreate'"}}},
		{"surge and unavailable zero", func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxUnavailable: ptrTo(intstr.FromInt32(0)), MaxSurge: ptrTo(intstr.FromString("0%"))}
		}, []wantErr{{field.ErrorTypeInvalid, "spec.strategy.rollingUpdate.maxUnavailable", "may not be 0 when `maxSurge` is 0"}}},
		{"unavailable over 100%", func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate.MaxUnavailable = ptrTo(intstr.FromString("150%"))
		},
			[]wantErr{{field.ErrorTypeInvalid, "spec.strategy.rollingUpdate.maxUnavailable", "must not be greater than 100%"}}},
		{"surge not a percent", func(d *appsv1.Deployment) { d.Spec.Strategy.RollingUpdate.MaxSurge = ptrTo(intstr.FromString("lots")) },
			[]wantErr{{field.ErrorTypeInvalid, "spec.strategy.rollingUpdate.maxSurge", ""}}},
		{"progress deadline not above min ready", func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = 600 },
			[]wantErr{{field.ErrorTypeInvalid, "spec.progressDeadlineSeconds", "must be greater than minReadySeconds"}}},
		{"revision history negative", func(d *appsv1.Deployment) { d.Spec.RevisionHistoryLimit = ptrTo(int32(-1)) },
			[]wantErr{{field.ErrorTypeInvalid, "spec.revisionHistoryLimit", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := validDeployment()
			tt.mutate(d)
			checkErrs(t, ValidateCreate(d), tt.want...)
		})
	}
}

func TestValidateDeploymentUpdate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(d *appsv1.Deployment)
		want   []wantErr
	}{
		{"replicas may change", func(d *appsv1.Deployment) { d.Spec.Replicas = ptrTo(int32(5)) }, nil},
		{"template may change", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "busybox:1.37" }, nil},
		{"selector is immutable", func(d *appsv1.Deployment) {
			d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "tier": "fe"}}
			d.Spec.Template.Labels["tier"] = "fe"
		}, []wantErr{{field.ErrorTypeInvalid, "spec.selector", "field is immutable"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := validDeployment()
			d := old.DeepCopy()
			tt.mutate(d)
			checkErrs(t, ValidateUpdate(d, old), tt.want...)
		})
	}
}

func TestValidateDeploymentStatus(t *testing.T) {
	old := validDeployment()
	old.Status.CollisionCount = ptrTo(int32(2))
	tests := []struct {
		name   string
		mutate func(d *appsv1.Deployment)
		want   []wantErr
	}{
		{"counts", func(d *appsv1.Deployment) { d.Status.Replicas, d.Status.ReadyReplicas = 2, 1 }, nil},
		{"ready above replicas", func(d *appsv1.Deployment) { d.Status.Replicas, d.Status.ReadyReplicas = 1, 2 },
			[]wantErr{{field.ErrorTypeInvalid, "status.readyReplicas", "cannot be greater than status.replicas"}}},
		{"negative", func(d *appsv1.Deployment) { d.Status.UpdatedReplicas = -1 },
			[]wantErr{{field.ErrorTypeInvalid, "status.updatedReplicas", "must be greater than or equal to 0"}}},
		{"collision count decremented", func(d *appsv1.Deployment) { d.Status.CollisionCount = ptrTo(int32(1)) },
			[]wantErr{{field.ErrorTypeInvalid, "status.collisionCount", "cannot be decremented"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := old.DeepCopy()
			tt.mutate(d)
			checkErrs(t, ValidateStatusUpdate(d, old), tt.want...)
		})
	}
}

func validReplicaSet() *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{ObjectMeta: objMeta("web-1"), Spec: appsv1.ReplicaSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Template: validTemplate(map[string]string{"app": "web"}),
	}}
	Default(rs)
	return rs
}

func TestValidateReplicaSet(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(rs *appsv1.ReplicaSet)
		want   []wantErr
	}{
		{"valid", func(rs *appsv1.ReplicaSet) {}, nil},
		{"selector missing", func(rs *appsv1.ReplicaSet) { rs.Spec.Selector = nil },
			[]wantErr{{field.ErrorTypeRequired, "spec.selector", ""}}},
		{"selector does not match", func(rs *appsv1.ReplicaSet) { rs.Spec.Template.Labels = nil },
			[]wantErr{{field.ErrorTypeInvalid, "spec.template.metadata.labels", "`selector` does not match template `labels`"}}},
		{"replicas negative", func(rs *appsv1.ReplicaSet) { rs.Spec.Replicas = ptrTo(int32(-3)) },
			[]wantErr{{field.ErrorTypeInvalid, "spec.replicas", ""}}},
		{"active deadline", func(rs *appsv1.ReplicaSet) { rs.Spec.Template.Spec.ActiveDeadlineSeconds = ptrTo(int64(5)) },
			[]wantErr{{field.ErrorTypeForbidden, "spec.template.spec.activeDeadlineSeconds", "activeDeadlineSeconds in ReplicaSet is not Supported"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := validReplicaSet()
			tt.mutate(rs)
			checkErrs(t, ValidateCreate(rs), tt.want...)
		})
	}
	t.Run("selector is immutable", func(t *testing.T) {
		old := validReplicaSet()
		rs := old.DeepCopy()
		rs.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpExists}}
		checkErrs(t, ValidateUpdate(rs, old), wantErr{field.ErrorTypeInvalid, "spec.selector", "field is immutable"})
	})
}

func validDaemonSet() *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{ObjectMeta: objMeta("agent"), Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
		Template: validTemplate(map[string]string{"app": "agent"}),
	}}
	Default(ds)
	return ds
}

func TestValidateDaemonSet(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(ds *appsv1.DaemonSet)
		want   []wantErr
	}{
		{"valid", func(ds *appsv1.DaemonSet) {}, nil},
		{"selector missing", func(ds *appsv1.DaemonSet) { ds.Spec.Selector = nil },
			[]wantErr{{field.ErrorTypeRequired, "spec.selector", ""}, {field.ErrorTypeInvalid, "spec.template.metadata.labels", "does not match"}}},
		{"selector empty", func(ds *appsv1.DaemonSet) { ds.Spec.Selector = &metav1.LabelSelector{} },
			[]wantErr{{field.ErrorTypeInvalid, "spec.selector", "empty selector is invalid for daemonset"}}},
		{"restart policy never", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever },
			[]wantErr{{field.ErrorTypeNotSupported, "spec.template.spec.restartPolicy", ""}}},
		{"strategy unknown", func(ds *appsv1.DaemonSet) { ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: "Now"} },
			[]wantErr{{field.ErrorTypeNotSupported, "spec.updateStrategy", `"RollingUpdate", "OnDelete"`}}},
		{"surge and unavailable", func(ds *appsv1.DaemonSet) { ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge = ptrTo(intstr.FromInt32(1)) },
			[]wantErr{{field.ErrorTypeInvalid, "spec.updateStrategy.rollingUpdate.maxSurge", "may not be set when maxUnavailable is non-zero"}}},
		{"both zero", func(ds *appsv1.DaemonSet) {
			ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptrTo(intstr.FromInt32(0))
		},
			[]wantErr{{field.ErrorTypeRequired, "spec.updateStrategy.rollingUpdate.maxUnavailable", "cannot be 0 when maxSurge is 0"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := validDaemonSet()
			tt.mutate(ds)
			checkErrs(t, ValidateCreate(ds), tt.want...)
		})
	}
	t.Run("selector is immutable", func(t *testing.T) {
		old := validDaemonSet()
		ds := old.DeepCopy()
		ds.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent", "v": "2"}}
		ds.Spec.Template.Labels["v"] = "2"
		checkErrs(t, ValidateUpdate(ds, old), wantErr{field.ErrorTypeInvalid, "spec.selector", "field is immutable"})
	})
}

// createdJob is a valid Job as stored after create.
func createdJob(t *testing.T) *batchv1.Job {
	t.Helper()
	j := validJob()
	checkErrs(t, ValidateCreate(j))
	return j
}

func TestValidateJob(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(j *batchv1.Job)
		want   []wantErr
	}{
		{"valid", func(j *batchv1.Job) {}, nil},
		{"restart policy always", func(j *batchv1.Job) { j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways },
			[]wantErr{{field.ErrorTypeRequired, "spec.template.spec.restartPolicy", `valid values: "OnFailure", "Never"`}}},
		{"parallelism negative", func(j *batchv1.Job) { j.Spec.Parallelism = ptrTo(int32(-1)) },
			[]wantErr{{field.ErrorTypeInvalid, "spec.parallelism", "must be greater than or equal to 0"}}},
		{"completions negative", func(j *batchv1.Job) { j.Spec.Completions = ptrTo(int32(-1)) },
			[]wantErr{{field.ErrorTypeInvalid, "spec.completions", ""}}},
		{"backoff limit negative", func(j *batchv1.Job) { j.Spec.BackoffLimit = ptrTo(int32(-1)) },
			[]wantErr{{field.ErrorTypeInvalid, "spec.backoffLimit", ""}}},
		{"indexed without completions", func(j *batchv1.Job) {
			j.Spec.CompletionMode = ptrTo(batchv1.IndexedCompletion)
			j.Spec.Completions = nil
		}, []wantErr{{field.ErrorTypeRequired, "spec.completions", "when completion mode is Indexed"}}},
		{"completion mode unknown", func(j *batchv1.Job) { j.Spec.CompletionMode = ptrTo(batchv1.CompletionMode("Some")) },
			[]wantErr{{field.ErrorTypeNotSupported, "spec.completionMode", ""}}},
		{"manual selector missing", func(j *batchv1.Job) { j.Spec.ManualSelector = ptrTo(true) },
			[]wantErr{{field.ErrorTypeRequired, "spec.selector", ""}}},
		{"manual selector mismatch", func(j *batchv1.Job) {
			j.Spec.ManualSelector = ptrTo(true)
			j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pi"}}
		}, []wantErr{{field.ErrorTypeInvalid, "spec.template.metadata.labels", "`selector` does not match template `labels`"}}},
		{"generated label conflict", func(j *batchv1.Job) { j.Spec.Template.Labels = map[string]string{"job-name": "other"} },
			[]wantErr{{field.ErrorTypeInvalid, "spec.template.metadata.labels[job-name]", "must be 'pi'"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := validJob()
			tt.mutate(j)
			checkErrs(t, ValidateCreate(j), tt.want...)
		})
	}
}

func TestValidateJobUpdate(t *testing.T) {
	tests := []struct {
		name   string
		prep   func(old *batchv1.Job)
		mutate func(j *batchv1.Job)
		want   []wantErr
	}{
		{"parallelism may change", nil, func(j *batchv1.Job) { j.Spec.Parallelism = ptrTo(int32(3)) }, nil},
		{"suspend may change", nil, func(j *batchv1.Job) { j.Spec.Suspend = ptrTo(true) }, nil},
		{"selector is immutable", nil, func(j *batchv1.Job) {
			j.Spec.Selector.MatchLabels["extra"] = "x"
			j.Spec.Template.Labels["extra"] = "x"
		},
			[]wantErr{{field.ErrorTypeInvalid, "spec.selector", "field is immutable"}}},
		{"template is immutable", nil, func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Image = "busybox:2" },
			[]wantErr{{field.ErrorTypeInvalid, "spec.template", "field is immutable"}}},
		{"completions are immutable", nil, func(j *batchv1.Job) { j.Spec.Completions = ptrTo(int32(4)) },
			[]wantErr{{field.ErrorTypeInvalid, "spec.completions", "field is immutable"}}},
		{"completion mode is immutable", nil, func(j *batchv1.Job) {
			j.Spec.CompletionMode = ptrTo(batchv1.IndexedCompletion)
		}, []wantErr{{field.ErrorTypeInvalid, "spec.completionMode", "field is immutable"}}},
		{"suspended unstarted job may change node selector", func(old *batchv1.Job) { old.Spec.Suspend = ptrTo(true) },
			func(j *batchv1.Job) { j.Spec.Template.Spec.NodeSelector = map[string]string{"zone": "a"} }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := createdJob(t)
			if tt.prep != nil {
				tt.prep(old)
			}
			j := old.DeepCopy()
			tt.mutate(j)
			checkErrs(t, ValidateUpdate(j, old), tt.want...)
		})
	}
}
