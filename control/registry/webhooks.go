package registry

import (
	"context"
	"fmt"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Admission webhooks: the store calls them on every write, its own
// controllers' too, as kube-apiserver calls them on every client's (its
// controllers being clients): a mutating webhook sees a new Pod whoever
// made it.

// The operations of an admission request.
const (
	OpCreate  = "CREATE"
	OpUpdate  = "UPDATE"
	OpDelete  = "DELETE"
	OpConnect = "CONNECT"
)

// AdmissionRequest is one write as the admission webhooks see it.
type AdmissionRequest struct {
	Resource    *Resource
	Subresource string
	Operation   string
	Namespace   string
	Name        string
	// Object is the object as it would be stored (nil on a delete), Old
	// the stored one (nil on a create).
	Object, Old runtime.Object
	// Options are the request's CreateOptions, UpdateOptions or
	// DeleteOptions (PodExecOptions and the like on a connect).
	Options runtime.Object
	DryRun  bool
	User    authenticationv1.UserInfo
}

// Webhooks are the admission webhooks of the cluster.
type Webhooks interface {
	// Any reports whether any webhook is in force: without, a write
	// builds no request for them.
	Any() bool
	// Mutate calls the mutating webhooks the request matches, and
	// returns the object as they leave it (req.Object if unchanged).
	Mutate(ctx context.Context, req *AdmissionRequest) (runtime.Object, error)
	// Validate calls the validating webhooks the request matches.
	Validate(ctx context.Context, req *AdmissionRequest) error
}

// SetWebhooks sets the admission webhooks every write calls from now on.
func (s *Store) SetWebhooks(w Webhooks) { s.webhooks.Store(&w) }

// Webhooks returns the admission webhooks, nil if none is in force; the
// requests that do not write (CONNECT) call them themselves.
func (s *Store) Webhooks() Webhooks {
	if w := s.webhooks.Load(); w != nil && (*w).Any() {
		return *w
	}
	return nil
}

// ControllerUser is who the server's own writes are made by, as the
// webhooks see them.
var ControllerUser = authenticationv1.UserInfo{Username: "system:kube-controller-manager", Groups: []string{"system:authenticated"}}

type requesterKey struct{}

// WithRequester returns ctx carrying the user a request is made by, for
// the admission webhooks.
func WithRequester(ctx context.Context, u authenticationv1.UserInfo) context.Context {
	return context.WithValue(ctx, requesterKey{}, u)
}

// RequesterOf is the user of ctx's request (ControllerUser if none).
func RequesterOf(ctx context.Context) authenticationv1.UserInfo {
	if u, ok := ctx.Value(requesterKey{}).(authenticationv1.UserInfo); ok {
		return u
	}
	return ControllerUser
}

// Warnings collects the warnings a request's admission gave, for the
// client's Warning headers.
type Warnings struct {
	mu   sync.Mutex
	list []string
}

type warningsKey struct{}

// WithWarnings returns ctx with a collector of the warnings admission
// gives.
func WithWarnings(ctx context.Context) (context.Context, *Warnings) {
	w := &Warnings{}
	return context.WithValue(ctx, warningsKey{}, w), w
}

// AddWarning records a warning for the request of ctx, if it collects
// them.
func AddWarning(ctx context.Context, msg string) {
	if w, ok := ctx.Value(warningsKey{}).(*Warnings); ok {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.list = append(w.list, msg)
	}
}

// List returns the warnings collected so far.
func (w *Warnings) List() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.list...)
}

// admissionOptions are the options object a webhook gets of a write.
func admissionOptions(op string, opts WriteOptions) runtime.Object {
	var dryRun []string
	if opts.DryRun {
		dryRun = []string{metav1.DryRunAll}
	}
	if op == OpCreate {
		o := &metav1.CreateOptions{DryRun: dryRun, FieldManager: opts.Manager}
		o.GetObjectKind().SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("CreateOptions"))
		return o
	}
	o := &metav1.UpdateOptions{DryRun: dryRun, FieldManager: opts.Manager}
	o.GetObjectKind().SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("UpdateOptions"))
	return o
}

// mutate calls the mutating webhooks on a write: sub is the subresource
// written, old nil on a create.
func (s *Store) mutate(ctx context.Context, r *Resource, sub string, obj, old runtime.Object, opts WriteOptions) (runtime.Object, bool, error) {
	w := s.Webhooks()
	if w == nil {
		return obj, false, nil
	}
	req := s.admissionRequest(ctx, r, sub, obj, old, opts)
	out, err := w.Mutate(ctx, req)
	if err != nil {
		return nil, false, err
	}
	return out, out != obj, nil
}

// validate calls the validating webhooks on a write.
func (s *Store) validate(ctx context.Context, r *Resource, sub string, obj, old runtime.Object, opts WriteOptions) error {
	w := s.Webhooks()
	if w == nil {
		return nil
	}
	return w.Validate(ctx, s.admissionRequest(ctx, r, sub, obj, old, opts))
}

func (s *Store) admissionRequest(ctx context.Context, r *Resource, sub string, obj, old runtime.Object, opts WriteOptions) *AdmissionRequest {
	op := OpUpdate
	if old == nil {
		op = OpCreate
	}
	ref := obj
	if ref == nil {
		ref = old
	}
	m, _ := meta.Accessor(ref)
	return &AdmissionRequest{Resource: r, Subresource: sub, Operation: op, Namespace: m.GetNamespace(), Name: m.GetName(),
		Object: obj, Old: old, Options: admissionOptions(op, opts), DryRun: opts.DryRun, User: RequesterOf(ctx)}
}

// admitDelete calls the webhooks on a delete of old.
func (s *Store) admitDelete(ctx context.Context, r *Resource, old runtime.Object, opts metav1.DeleteOptions) error {
	w := s.Webhooks()
	if w == nil {
		return nil
	}
	m, _ := meta.Accessor(old)
	o := opts.DeepCopy()
	o.GetObjectKind().SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("DeleteOptions"))
	req := &AdmissionRequest{Resource: r, Operation: OpDelete, Namespace: m.GetNamespace(), Name: m.GetName(),
		Old: old, Options: o, DryRun: len(opts.DryRun) > 0, User: RequesterOf(ctx)}
	if _, err := w.Mutate(ctx, req); err != nil {
		return err
	}
	return w.Validate(ctx, req)
}

// mutateUpdate calls the mutating webhooks on an update through
// subresource sub; a write through the scale subresource shows them the
// Scale, and takes the replicas they set.
func (s *Store) mutateUpdate(ctx context.Context, r *Resource, sub string, obj, old runtime.Object, opts WriteOptions) (runtime.Object, bool, error) {
	if opts.trackAs != "scale" {
		return s.mutate(ctx, r, sub, obj, old, opts)
	}
	sc, err := scaleOf(r, obj)
	if err != nil {
		return nil, false, err
	}
	prev, err := scaleOf(r, old)
	if err != nil {
		return nil, false, err
	}
	out, changed, err := s.mutate(ctx, r, "scale", sc, prev, opts)
	if err != nil || !changed {
		return obj, false, err
	}
	want, ok := out.(*autoscalingv1.Scale)
	if !ok {
		return nil, false, apierrors.NewInternalError(fmt.Errorf("the admission webhooks made a %T of a Scale", out))
	}
	if want.Spec.Replicas < 0 {
		return nil, false, apierrors.NewInternalError(fmt.Errorf("the admission webhooks set the Scale's replicas to %d", want.Spec.Replicas))
	}
	r.Scale.SetReplicas(obj, want.Spec.Replicas)
	return obj, true, nil
}

// validateUpdate calls the validating webhooks on an update through
// subresource sub (the Scale of a write through scale).
func (s *Store) validateUpdate(ctx context.Context, r *Resource, sub string, obj, old runtime.Object, opts WriteOptions) error {
	if s.Webhooks() == nil {
		return nil
	}
	if opts.trackAs != "scale" {
		return s.validate(ctx, r, sub, obj, old, opts)
	}
	sc, err := scaleOf(r, obj)
	if err != nil {
		return err
	}
	prev, err := scaleOf(r, old)
	if err != nil {
		return err
	}
	return s.validate(ctx, r, "scale", sc, prev, opts)
}
