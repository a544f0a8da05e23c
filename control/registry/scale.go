package registry

import (
	"context"
	"encoding/json"
	"fmt"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// scaleOf returns the autoscaling/v1 Scale view of an object of r.
func scaleOf(r *Resource, obj runtime.Object) (*autoscalingv1.Scale, error) {
	if r.Scale == nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s has no scale subresource", r))
	}
	replicas, current, sel := r.Scale.Replicas(obj)
	m, _ := meta.Accessor(obj)
	selector := ""
	if sel != nil {
		if s, err := metav1.LabelSelectorAsSelector(sel); err == nil {
			selector = s.String()
		}
	}
	return &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"},
		ObjectMeta: metav1.ObjectMeta{Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUID(),
			ResourceVersion: m.GetResourceVersion(), CreationTimestamp: m.GetCreationTimestamp()},
		Spec:   autoscalingv1.ScaleSpec{Replicas: replicas},
		Status: autoscalingv1.ScaleStatus{Replicas: current, Selector: selector},
	}, nil
}

// GetScale reads the scale subresource.
func (s *Store) GetScale(ctx context.Context, r *Resource, ns, name string) (*autoscalingv1.Scale, error) {
	obj, err := s.Get(ctx, r, ns, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return scaleOf(r, obj)
}

// UpdateScale sets spec.replicas through the scale subresource, from a
// whole Scale (PUT) or a patch of one (PATCH). The parent's generation is
// bumped like any spec change.
func (s *Store) UpdateScale(ctx context.Context, r *Resource, ns, name string, scale *autoscalingv1.Scale, pt types.PatchType, patch []byte, opts WriteOptions) (*autoscalingv1.Scale, error) {
	opts.trackAs = "scale"
	precondition := ""
	if scale != nil {
		precondition = scale.ResourceVersion
	}
	obj, err := s.guaranteedUpdate(ctx, r, ns, name, precondition, opts, func(old runtime.Object) (runtime.Object, error) {
		cur, err := scaleOf(r, old)
		if err != nil {
			return nil, err
		}
		want := scale
		if want == nil {
			want, err = patchScale(cur, pt, patch)
			if err != nil {
				return nil, err
			}
		}
		if want.Spec.Replicas < 0 {
			return nil, apierrors.NewInvalid(autoscalingv1.SchemeGroupVersion.WithKind("Scale").GroupKind(), name, nil)
		}
		r.Scale.SetReplicas(old, want.Spec.Replicas)
		return old, nil
	}, "")
	if err != nil {
		return nil, err
	}
	return scaleOf(r, obj)
}

func patchScale(cur *autoscalingv1.Scale, pt types.PatchType, patch []byte) (*autoscalingv1.Scale, error) {
	orig, _ := json.Marshal(cur)
	var out []byte
	var err error
	switch pt {
	case types.MergePatchType, types.StrategicMergePatchType: // Scale has no merge keys: both are merge patches
		out, err = jsonpatch.MergePatch(orig, patch)
	case types.JSONPatchType:
		var p jsonpatch.Patch
		if p, err = jsonpatch.DecodePatch(patch); err == nil {
			out, err = p.Apply(orig)
		}
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("unsupported patch type %q for scale", pt))
	}
	if err != nil {
		return nil, apierrors.NewBadRequest("invalid scale patch: " + err.Error())
	}
	var sc autoscalingv1.Scale
	if err := json.Unmarshal(out, &sc); err != nil {
		return nil, apierrors.NewBadRequest("invalid scale patch: " + err.Error())
	}
	return &sc, nil
}
