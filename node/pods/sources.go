package pods

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// apiSources reads the objects pods refer to (volumes, env, pull
// secrets) from the API, as the node is allowed to; the Services from an
// informer of them all, as the kubelet keeps one (Config.Services).
type apiSources struct {
	c        *rest.RESTClient
	services cache.SharedIndexInformer
}

// WithoutManagedFields is an informer's transform that drops an object's
// metadata.managedFields, which the board never reads and which are often
// half of an object: the board's informers keep the rest.
func WithoutManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

func (s apiSources) Services(context.Context) ([]*corev1.Service, error) {
	if !s.services.HasSynced() {
		return nil, errors.New("the Services have not been read yet: no Service variables to give")
	}
	objs := s.services.GetStore().List()
	out := make([]*corev1.Service, 0, len(objs))
	for _, o := range objs {
		if svc, ok := o.(*corev1.Service); ok {
			out = append(out, svc)
		}
	}
	return out, nil
}

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

// Token asks the API for a token of pod's service account bound to pod
// (TokenRequest; a node may ask tokens of its own pods alone).
func (s apiSources) Token(ctx context.Context, pod *corev1.Pod, audience string, expirationSeconds int64) (string, time.Time, error) {
	req := authenticationv1.TokenRequest{
		TypeMeta: metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "TokenRequest"},
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expirationSeconds,
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}},
	}
	if audience != "" {
		req.Spec.Audiences = []string{audience}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return "", time.Time{}, err
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	raw, err := s.c.Post().Namespace(pod.Namespace).Resource("serviceaccounts").Name(sa).SubResource("token").
		SetHeader("Content-Type", "application/json").Body(body).Do(ctx).Raw()
	if err != nil {
		return "", time.Time{}, err
	}
	var out authenticationv1.TokenRequest
	if err := json.Unmarshal(raw, &out); err != nil || out.Status.Token == "" {
		return "", time.Time{}, fmt.Errorf("the TokenRequest's answer holds no token: %v", err)
	}
	return out.Status.Token, out.Status.ExpirationTimestamp.Time, nil
}
