package strategy

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Deployment is the strategy of apps/v1 Deployments; a status write keeps
// their labels, as in Kubernetes.
var Deployment = &Kind[*appsv1.Deployment]{namespaced: true, defaults: defaultDeployment, create: validateDeployment, update: validateDeploymentUpdate, status: validateDeploymentStatus,
	statusMeta: keepLabels}

// DeploymentReplicas returns a Deployment's desired and current replicas
// and its selector, for its scale subresource.
func DeploymentReplicas(obj runtime.Object) (spec, status int32, selector *metav1.LabelSelector) {
	o := obj.(*appsv1.Deployment)
	return deref(o.Spec.Replicas, 0), o.Status.Replicas, o.Spec.Selector
}

// SetDeploymentReplicas sets a Deployment's desired replicas.
func SetDeploymentReplicas(obj runtime.Object, n int32) { obj.(*appsv1.Deployment).Spec.Replicas = &n }

// ReplicaSet is the strategy of apps/v1 ReplicaSets.
var ReplicaSet = &Kind[*appsv1.ReplicaSet]{namespaced: true, defaults: defaultReplicaSet, create: validateReplicaSet, update: validateReplicaSetUpdate, status: validateReplicaSetStatus}

// ReplicaSetFields are the field selectors of ReplicaSets.
var ReplicaSetFields = fields(map[string]func(*appsv1.ReplicaSet) string{
	"status.replicas": func(o *appsv1.ReplicaSet) string { return strconv.Itoa(int(o.Status.Replicas)) },
})

// ReplicaSetReplicas returns a ReplicaSet's desired and current replicas
// and its selector, for its scale subresource.
func ReplicaSetReplicas(obj runtime.Object) (spec, status int32, selector *metav1.LabelSelector) {
	o := obj.(*appsv1.ReplicaSet)
	return deref(o.Spec.Replicas, 0), o.Status.Replicas, o.Spec.Selector
}

// SetReplicaSetReplicas sets a ReplicaSet's desired replicas.
func SetReplicaSetReplicas(obj runtime.Object, n int32) { obj.(*appsv1.ReplicaSet).Spec.Replicas = &n }

// DaemonSet is the strategy of apps/v1 DaemonSets, which keeps their
// template generation (setTemplateGeneration).
var DaemonSet = &Kind[*appsv1.DaemonSet]{namespaced: true, defaults: defaultDaemonSet, create: validateDaemonSet, update: validateDaemonSetUpdate, status: validateDaemonSetStatus,
	onCreate: func(o *appsv1.DaemonSet) {
		setTemplateGeneration(o, nil)
		clearStatus(o)
	},
	onUpdate: setTemplateGeneration}

// setTemplateGeneration keeps a DaemonSet's template generation, as
// Kubernetes' API server does (its internal spec.templateGeneration, which
// apps/v1 carries in the deprecated.daemonset.template.generation
// annotation): at least 1 on create, and on every update the stored value,
// one higher if the update changes the pod template. Clients cannot set it
// otherwise. The DaemonSet controller labels its pods with it
// (pod-template-generation). old is nil on create.
func setTemplateGeneration(ds, old *appsv1.DaemonSet) {
	gen := templateGeneration(ds)
	if old != nil {
		gen = templateGeneration(old)
		if !equality.Semantic.DeepEqual(ds.Spec.Template, old.Spec.Template) {
			gen++
		}
	} else if gen < 1 {
		gen = 1
	}
	if ds.Annotations == nil {
		ds.Annotations = map[string]string{}
	}
	ds.Annotations[appsv1.DeprecatedTemplateGeneration] = strconv.FormatInt(gen, 10)
}

// templateGeneration reads the annotation; absent or unreadable is 0.
func templateGeneration(ds *appsv1.DaemonSet) int64 {
	n, err := strconv.ParseInt(ds.Annotations[appsv1.DeprecatedTemplateGeneration], 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// Job is the strategy of batch/v1 Jobs.
var Job = &Kind[*batchv1.Job]{namespaced: true, defaults: defaultJob, create: validateJobCreate, update: validateJobUpdate, status: validateJobStatus}

// JobFields are the field selectors of Jobs.
var JobFields = fields(map[string]func(*batchv1.Job) string{
	"status.successful": func(o *batchv1.Job) string { return strconv.Itoa(int(o.Status.Succeeded)) },
})
