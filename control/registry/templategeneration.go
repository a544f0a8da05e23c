package registry

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
)

// setTemplateGeneration keeps a DaemonSet's template generation, as
// Kubernetes' API server does (its internal spec.templateGeneration, which
// apps/v1 carries in the deprecated.daemonset.template.generation
// annotation): at least 1 on create, and on every update the stored value,
// one higher if the update changes the pod template. Clients cannot set it
// otherwise. The DaemonSet controller labels its pods with it
// (pod-template-generation). old is nil on create.
func setTemplateGeneration(obj, old runtime.Object) {
	ds, ok := obj.(*appsv1.DaemonSet)
	if !ok {
		return
	}
	gen := templateGeneration(ds)
	if old != nil {
		prev := old.(*appsv1.DaemonSet)
		gen = templateGeneration(prev)
		if !equality.Semantic.DeepEqual(ds.Spec.Template, prev.Spec.Template) {
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
