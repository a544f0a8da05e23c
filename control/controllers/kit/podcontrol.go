package kit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/isle-cluster/isle/control/registry"
)

// EventRecorder records Kubernetes Events (control/events.Recorder).
type EventRecorder interface {
	Eventf(obj runtime.Object, eventType, reason, messageFmt string, args ...any)
}

// Record records an Event if there is a recorder.
func Record(r EventRecorder, obj runtime.Object, eventType, reason, messageFmt string, args ...any) {
	if r != nil {
		r.Eventf(obj, eventType, reason, messageFmt, args...)
	}
}

// The reasons of the Events about pods that Kubernetes' controllers create
// and delete.
const (
	reasonSuccessfulCreate = "SuccessfulCreate"
	reasonFailedCreate     = "FailedCreate"
	reasonSuccessfulDelete = "SuccessfulDelete"
	reasonFailedDelete     = "FailedDelete"
)

// CreateOwnedPod creates a pod of a controller and records the Event
// Kubernetes' pod control records. A namespace being deleted is not an
// error: the controller goes with it.
func CreateOwnedPod(ctx context.Context, store *registry.Store, res *registry.Resource, events EventRecorder, owner runtime.Object, pod *corev1.Pod) error {
	m, _ := meta.Accessor(owner)
	out, err := store.Create(ctx, res, m.GetNamespace(), pod, registry.WriteOptions{})
	if err != nil && NamespaceTerminating(err) {
		return nil
	}
	if err != nil {
		Record(events, owner, corev1.EventTypeWarning, reasonFailedCreate, "Error creating: %v", err)
		return fmt.Errorf("create pod: %w", err)
	}
	Record(events, owner, corev1.EventTypeNormal, reasonSuccessfulCreate, "Created pod: %v", out.(*corev1.Pod).Name)
	return nil
}

// DeleteOwnedPod deletes a pod of a controller (grace -1: the pod's own
// grace period) and records the Event Kubernetes' pod control records; a
// pod already gone or replaced is not an error.
func DeleteOwnedPod(ctx context.Context, store *registry.Store, res *registry.Resource, events EventRecorder, owner runtime.Object, pod *corev1.Pod, grace int64) error {
	uid := pod.UID
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
	if grace >= 0 {
		opts.GracePeriodSeconds = &grace
	}
	_, _, err := store.Delete(ctx, res, pod.Namespace, pod.Name, opts)
	switch {
	case err == nil:
		Record(events, owner, corev1.EventTypeNormal, reasonSuccessfulDelete, "Deleted pod: %v", pod.Name)
		return nil
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return nil
	}
	Record(events, owner, corev1.EventTypeWarning, reasonFailedDelete, "Error deleting: %v", err)
	return fmt.Errorf("delete pod %s: %w", pod.Name, err)
}

// ErrClaimSkip: the pod changed since it was listed; it is left alone.
var ErrClaimSkip = errors.New("pod changed; skipped")

// ClaimPods returns the pods owner controls among pods, after adopting the
// orphans its selector matches and releasing those it controls that no
// longer match, as Kubernetes' PodControllerRefManager. A finalizer, if
// given, is added to adopted pods and removed from released ones (the Job
// controller's tracking finalizer). Shared by the ReplicaSet, DaemonSet
// and Job controllers.
func ClaimPods(ctx context.Context, store *registry.Store, res *registry.Resource, owner metav1.Object, kind schema.GroupVersionKind,
	sel labels.Selector, pods []*corev1.Pod, finalizer string) ([]*corev1.Pod, error) {
	var owned []*corev1.Pod
	var errs []error
	var canAdopt error
	checked := false
	for _, pod := range pods {
		matches := sel.Matches(labels.Set(pod.Labels))
		if ref := metav1.GetControllerOf(pod); ref != nil {
			switch {
			case ref.UID != owner.GetUID():
			case matches:
				owned = append(owned, pod)
			case owner.GetDeletionTimestamp() == nil:
				if err := claimRelease(ctx, store, res, owner, sel, pod, finalizer); err != nil {
					errs = append(errs, err)
				}
			}
			continue
		}
		if !matches || pod.DeletionTimestamp != nil || owner.GetDeletionTimestamp() != nil {
			continue
		}
		if !checked {
			canAdopt, checked = claimCanAdopt(ctx, store, owner, kind), true
		}
		if canAdopt != nil {
			continue
		}
		adopted, err := claimAdopt(ctx, store, res, owner, kind, sel, pod, finalizer)
		switch {
		case err == nil:
			owned = append(owned, adopted)
		case errors.Is(err, ErrClaimSkip), apierrors.IsNotFound(err):
		default:
			errs = append(errs, err)
		}
	}
	if canAdopt != nil {
		errs = append(errs, canAdopt)
	}
	return owned, errors.Join(errs...)
}

// claimCanAdopt checks, reading afresh, that the owner is still there and
// not being deleted (Kubernetes' RecheckDeletionTimestamp).
func claimCanAdopt(ctx context.Context, store *registry.Store, owner metav1.Object, kind schema.GroupVersionKind) error {
	res, ok := store.Resources().ForKind(kind)
	if !ok {
		return fmt.Errorf("adopt pods: %s is not served", kind)
	}
	obj, err := store.Get(ctx, res, owner.GetNamespace(), owner.GetName(), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("adopt pods: %w", err)
	}
	fresh, _ := obj.(metav1.Object)
	if fresh.GetUID() != owner.GetUID() {
		return fmt.Errorf("original %s %s/%s is gone: got uid %s, wanted %s", kind.Kind, owner.GetNamespace(), owner.GetName(), fresh.GetUID(), owner.GetUID())
	}
	if fresh.GetDeletionTimestamp() != nil {
		return fmt.Errorf("%s/%s has just been deleted at %v", owner.GetNamespace(), owner.GetName(), fresh.GetDeletionTimestamp())
	}
	return nil
}

func claimAdopt(ctx context.Context, store *registry.Store, res *registry.Resource, owner metav1.Object, kind schema.GroupVersionKind,
	sel labels.Selector, pod *corev1.Pod, finalizer string) (*corev1.Pod, error) {
	out, err := store.Mutate(ctx, res, pod.Namespace, pod.Name, "", func(obj runtime.Object) error {
		p := obj.(*corev1.Pod)
		if p.UID != pod.UID || p.DeletionTimestamp != nil || metav1.GetControllerOf(p) != nil || !sel.Matches(labels.Set(p.Labels)) {
			return ErrClaimSkip
		}
		p.OwnerReferences = slices.DeleteFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == owner.GetUID() })
		p.OwnerReferences = append(p.OwnerReferences, *metav1.NewControllerRef(owner, kind))
		if finalizer != "" && !slices.Contains(p.Finalizers, finalizer) {
			p.Finalizers = append(p.Finalizers, finalizer)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("adopt pod %s: %w", pod.Name, err)
	}
	return out.(*corev1.Pod), nil
}

func claimRelease(ctx context.Context, store *registry.Store, res *registry.Resource, owner metav1.Object,
	sel labels.Selector, pod *corev1.Pod, finalizer string) error {
	_, err := store.Mutate(ctx, res, pod.Namespace, pod.Name, "", func(obj runtime.Object) error {
		p := obj.(*corev1.Pod)
		if p.UID != pod.UID || sel.Matches(labels.Set(p.Labels)) {
			return ErrClaimSkip
		}
		p.OwnerReferences = slices.DeleteFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == owner.GetUID() })
		if finalizer != "" {
			p.Finalizers = slices.DeleteFunc(p.Finalizers, func(f string) bool { return f == finalizer })
		}
		return nil
	})
	if err == nil || errors.Is(err, ErrClaimSkip) || apierrors.IsNotFound(err) {
		return nil
	}
	return fmt.Errorf("release pod %s: %w", pod.Name, err)
}

// NamespaceTerminating: a create failed because the namespace is being
// deleted.
func NamespaceTerminating(err error) bool {
	return apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) ||
		apierrors.IsForbidden(err) && strings.Contains(err.Error(), "because it is being terminated")
}
