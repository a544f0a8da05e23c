package registry

import (
	"context"
	"fmt"
	"slices"

	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Finalizers the server itself acts on.
const (
	FinalizerForeground = metav1.FinalizerDeleteDependents // "foregroundDeletion"
	FinalizerOrphan     = metav1.FinalizerOrphanDependents // "orphan"
	// FinalizerNamespace is the namespace's spec finalizer: the namespace
	// controller removes it once the namespace is empty.
	FinalizerNamespace = corev1.FinalizerKubernetes
)

// Delete deletes an object, or starts deleting it: an object with
// finalizers (including those the propagation policy adds), a namespace,
// or a pod running on a node gets a deletionTimestamp and stays until its
// finalizers are gone or its node has stopped it. deleted reports whether
// the object is gone now.
func (s *Store) Delete(ctx context.Context, r *Resource, ns, name string, opts metav1.DeleteOptions) (obj runtime.Object, deleted bool, err error) {
	if r.ReadOnly {
		return nil, false, apierrors.NewMethodNotSupported(r.GroupVersionResource.GroupResource(), "delete")
	}
	if errs := metav1validation.ValidateDeleteOptions(&opts); len(errs) > 0 {
		return nil, false, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "DeleteOptions"}, "", errs)
	}
	// A negative grace period is one second, as kube-apiserver takes it.
	if g := opts.GracePeriodSeconds; g != nil && *g < 0 {
		one := int64(1)
		opts.GracePeriodSeconds = &one
	}
	wopts := WriteOptions{DryRun: len(opts.DryRun) > 0}
	gr := r.GroupVersionResource.GroupResource()
	for attempt := 0; attempt < maxRetries && ctx.Err() == nil; attempt++ {
		old, err := s.Get(ctx, r, ns, name, metav1.GetOptions{})
		if err != nil {
			return nil, false, err
		}
		om, _ := meta.Accessor(old)
		if p := opts.Preconditions; p != nil {
			if p.UID != nil && *p.UID != om.GetUID() {
				return nil, false, apierrors.NewConflict(gr, name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, om.GetUID()))
			}
			if p.ResourceVersion != nil && *p.ResourceVersion != om.GetResourceVersion() {
				return nil, false, apierrors.NewConflict(gr, name, fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p.ResourceVersion, om.GetResourceVersion()))
			}
		}
		if err := s.admitDelete(ctx, r, old, opts); err != nil {
			return nil, false, err
		}
		obj := old.DeepCopyObject()
		m, _ := meta.Accessor(obj)
		finalizers := m.GetFinalizers()
		switch propagation(opts) {
		case metav1.DeletePropagationForeground:
			finalizers = addFinalizer(finalizers, FinalizerForeground)
		case metav1.DeletePropagationOrphan:
			finalizers = addFinalizer(finalizers, FinalizerOrphan)
		}
		grace, stay := r.Strategy.BeginDelete(obj, opts)
		if len(finalizers) == 0 && grace == 0 && !stay {
			removed, err := s.remove(ctx, r, old, wopts)
			if apierrors.IsConflict(err) {
				continue
			}
			return removed, err == nil, err
		}
		if m.GetDeletionTimestamp() == nil {
			now := metav1.NewTime(s.now().UTC().Truncate(1e9))
			m.SetDeletionTimestamp(&now)
			m.SetDeletionGracePeriodSeconds(&grace)
		} else if cur := m.GetDeletionGracePeriodSeconds(); cur != nil && grace < *cur {
			m.SetDeletionGracePeriodSeconds(&grace) // a shorter grace period may replace a longer one
		}
		m.SetFinalizers(finalizers)
		updated, err := s.writeDeleting(ctx, r, obj, old, wopts)
		if apierrors.IsConflict(err) {
			continue
		}
		return updated, false, err
	}
	return nil, false, apierrors.NewConflict(gr, name, fmt.Errorf("the object kept changing while it was being deleted; try again"))
}

// writeDeleting stores the deletion marks of an object with a CAS.
func (s *Store) writeDeleting(ctx context.Context, r *Resource, obj, old runtime.Object, opts WriteOptions) (runtime.Object, error) {
	om, _ := meta.Accessor(old)
	return s.guaranteedUpdate(ctx, r, om.GetNamespace(), om.GetName(), om.GetResourceVersion(), opts,
		func(runtime.Object) (runtime.Object, error) { return obj, nil }, subDelete)
}

func propagation(opts metav1.DeleteOptions) metav1.DeletionPropagation {
	if opts.PropagationPolicy != nil {
		return *opts.PropagationPolicy
	}
	if opts.OrphanDependents != nil && *opts.OrphanDependents {
		return metav1.DeletePropagationOrphan
	}
	return metav1.DeletePropagationBackground
}

func addFinalizer(fs []string, f string) []string {
	if slices.Contains(fs, f) {
		return fs
	}
	return append(slices.Clone(fs), f)
}

// DeleteCollection deletes every object of r in ns matching the selectors.
func (s *Store) DeleteCollection(ctx context.Context, r *Resource, ns string, lopts metav1.ListOptions, dopts metav1.DeleteOptions) (runtime.Object, error) {
	list, err := s.List(ctx, r, ns, lopts)
	if err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	var out []runtime.Object
	for _, it := range items {
		m, _ := meta.Accessor(it)
		obj, _, err := s.Delete(ctx, r, m.GetNamespace(), m.GetName(), dopts)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
	if err := meta.SetList(list, out); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return list, nil
}
