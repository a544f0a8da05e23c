package pods

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
)

// apiSources reads the objects pods refer to (volumes, env, pull
// secrets) from the API, as the node is allowed to.
type apiSources struct{ c *rest.RESTClient }

func (s apiSources) ConfigMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	out := &corev1.ConfigMap{}
	return out, s.c.Get().Namespace(ns).Resource("configmaps").Name(name).Do(ctx).Into(out)
}

func (s apiSources) Secret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	out := &corev1.Secret{}
	return out, s.c.Get().Namespace(ns).Resource("secrets").Name(name).Do(ctx).Into(out)
}

func (s apiSources) PersistentVolumeClaim(ctx context.Context, ns, name string) (*corev1.PersistentVolumeClaim, error) {
	out := &corev1.PersistentVolumeClaim{}
	return out, s.c.Get().Namespace(ns).Resource("persistentvolumeclaims").Name(name).Do(ctx).Into(out)
}

func (s apiSources) PersistentVolume(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	out := &corev1.PersistentVolume{}
	return out, s.c.Get().Resource("persistentvolumes").Name(name).Do(ctx).Into(out)
}
