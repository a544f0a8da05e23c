package volumes

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Sources gives the objects that volumes and environment variables refer
// to. The agent backs it with informers or GETs; tests with maps. A missing
// object must be reported as a Kubernetes NotFound error
// (apierrors.NewNotFound), which is how this package tells an absent
// optional source from a failure.
type Sources interface {
	ConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
	Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
	PersistentVolumeClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error)
	PersistentVolume(ctx context.Context, name string) (*corev1.PersistentVolume, error)
	// Services are all the cluster's Services, for the variables that
	// tell a pod where they are; an error if they are not known yet.
	Services(ctx context.Context) ([]*corev1.Service, error)
	// Token is a token of pod's service account bound to pod, for
	// audience ("": the API server's), valid expirationSeconds.
	Token(ctx context.Context, pod *corev1.Pod, audience string, expirationSeconds int64) (string, time.Time, error)
}

// notFoundError says that an object is missing, as a user reads it
// (`configmap "app-config" not found`), and unwraps to the NotFound error
// of Sources so that apierrors.IsNotFound still answers true.
type notFoundError struct {
	kind, name string
	err        error
}

func (e *notFoundError) Error() string { return fmt.Sprintf("%s %q not found", e.kind, e.name) }
func (e *notFoundError) Unwrap() error { return e.err }

// fetcher reads the objects of one namespace for one Setup or Env call and
// remembers them, so that twenty variables from one ConfigMap cost one
// lookup.
type fetcher struct {
	ctx        context.Context
	src        Sources
	namespace  string
	configMaps map[string]fetched[*corev1.ConfigMap]
	secrets    map[string]fetched[*corev1.Secret]
}

type fetched[T any] struct {
	obj T
	err error
}

func newFetcher(ctx context.Context, src Sources, namespace string) *fetcher {
	return &fetcher{ctx: ctx, src: src, namespace: namespace}
}

func (f *fetcher) configMap(name string) (*corev1.ConfigMap, error) {
	if name == "" {
		return nil, fmt.Errorf("configmap name is empty")
	}
	if r, ok := f.configMaps[name]; ok {
		return r.obj, r.err
	}
	cm, err := f.src.ConfigMap(f.ctx, f.namespace, name)
	err = lookupError("configmap", name, err)
	if err == nil && cm == nil {
		err = fmt.Errorf("get configmap %q: no object and no error", name)
	}
	if f.configMaps == nil {
		f.configMaps = map[string]fetched[*corev1.ConfigMap]{}
	}
	f.configMaps[name] = fetched[*corev1.ConfigMap]{cm, err}
	return cm, err
}

func (f *fetcher) secret(name string) (*corev1.Secret, error) {
	if name == "" {
		return nil, fmt.Errorf("secret name is empty")
	}
	if r, ok := f.secrets[name]; ok {
		return r.obj, r.err
	}
	s, err := f.src.Secret(f.ctx, f.namespace, name)
	err = lookupError("secret", name, err)
	if err == nil && s == nil {
		err = fmt.Errorf("get secret %q: no object and no error", name)
	}
	if f.secrets == nil {
		f.secrets = map[string]fetched[*corev1.Secret]{}
	}
	f.secrets[name] = fetched[*corev1.Secret]{s, err}
	return s, err
}

// lookupError turns an error of Sources into one that names the object.
func lookupError(kind, name string, err error) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return &notFoundError{kind: kind, name: name, err: err}
	default:
		return fmt.Errorf("get %s %q: %w", kind, name, err)
	}
}

// skipOptional says whether a lookup error is that of an optional object
// that is absent, which Kubernetes treats as empty.
func skipOptional(err error, optional *bool) bool {
	return optional != nil && *optional && apierrors.IsNotFound(err)
}
