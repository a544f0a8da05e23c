package registry

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
)

// The service-account token volume kube-apiserver's ServiceAccount
// admission gives every pod, named and laid out as upstream's.
const (
	// ServiceAccountMountPath is where its containers find it.
	ServiceAccountMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"
	// ServiceAccountVolumePrefix starts its name.
	ServiceAccountVolumePrefix = "kube-api-access-"
	// serviceAccountTokenExpiration is its token's life, as upstream's
	// (an hour and seven seconds).
	serviceAccountTokenExpiration = 3607
	// rootCAConfigMap holds the cluster CA's certificate in every
	// namespace (the root-CA publisher keeps it).
	rootCAConfigMap = "kube-root-ca.crt"
)

// admitServiceAccount is kube-apiserver's ServiceAccount admission for a
// new pod: it runs as the default service account unless it names one; a
// service account it names must exist (the default one, which the
// namespace controller makes a moment after the namespace, need not yet);
// and, unless the pod or its service account opts out
// (automountServiceAccountToken: false), it gets the projected
// kube-api-access volume (a token for the service account bound to the
// pod, the cluster CA, the namespace) mounted in every container that has
// nothing mounted there.
func (s *Store) admitServiceAccount(ctx context.Context, pod *corev1.Pod) error {
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = "default"
	}
	pod.Spec.DeprecatedServiceAccount = pod.Spec.ServiceAccountName
	r, _ := s.resources.Lookup(corev1.SchemeGroupVersion.WithResource("serviceaccounts"))
	obj, err := s.Get(ctx, r, pod.Namespace, pod.Spec.ServiceAccountName, metav1.GetOptions{ResourceVersion: "0"})
	var sa *corev1.ServiceAccount
	switch {
	case err == nil:
		sa = obj.(*corev1.ServiceAccount)
	case apierrors.IsNotFound(err) && pod.Spec.ServiceAccountName == "default":
	case apierrors.IsNotFound(err):
		return apierrors.NewForbidden(corev1.Resource("pods"), pod.Name,
			fmt.Errorf("error looking up service account %s/%s: serviceaccount %q not found", pod.Namespace, pod.Spec.ServiceAccountName, pod.Spec.ServiceAccountName))
	default:
		return err
	}
	if a := pod.Spec.AutomountServiceAccountToken; a != nil && !*a {
		return nil
	}
	if pod.Spec.AutomountServiceAccountToken == nil && sa != nil && sa.AutomountServiceAccountToken != nil && !*sa.AutomountServiceAccountToken {
		return nil
	}
	if slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return strings.HasPrefix(v.Name, ServiceAccountVolumePrefix) }) {
		return nil // it has one (a pod made from another's spec)
	}
	name := ServiceAccountVolumePrefix + rand.String(5)
	exp, mode := int64(serviceAccountTokenExpiration), int32(0o644)
	// The caller's slices may be shared (a template's): changed copies.
	pod.Spec.Volumes = append(slices.Clip(pod.Spec.Volumes), corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: &mode,
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: &exp, Path: "token"}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: rootCAConfigMap},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		},
	}}})
	mount := func(cs []corev1.Container) []corev1.Container {
		cs = slices.Clone(cs)
		for i := range cs {
			c := &cs[i]
			if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == ServiceAccountMountPath }) {
				c.VolumeMounts = append(slices.Clip(c.VolumeMounts), corev1.VolumeMount{Name: name, ReadOnly: true, MountPath: ServiceAccountMountPath})
			}
		}
		return cs
	}
	pod.Spec.InitContainers = mount(pod.Spec.InitContainers)
	pod.Spec.Containers = mount(pod.Spec.Containers)
	return nil
}
