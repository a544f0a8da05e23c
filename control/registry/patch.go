package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxPatchOps bounds a JSON patch's operations (input from outside).
const maxPatchOps = 10000

// maxPatchCopyBytes bounds what a JSON patch's copy operations may add up
// to, as kube-apiserver's: a chain of copies of copies otherwise doubles
// the object at each step.
const maxPatchCopyBytes = 3 << 20

func init() {
	// The library's limits are package settings; kube-apiserver sets the
	// same ones.
	jsonpatch.AccumulatedCopySizeLimit = maxPatchCopyBytes
	jsonpatch.SupportNegativeIndices = false
}

// Patch applies a JSON patch, merge patch or strategic merge patch to the
// stored object (sub "" or "status") and writes the result, retrying on a
// concurrent write unless the patch itself pins a resourceVersion.
func (s *Store) Patch(ctx context.Context, r *Resource, ns, name, sub string, pt types.PatchType, patch []byte, mode FieldValidation, opts WriteOptions) (runtime.Object, []string, error) {
	if r.ReadOnly {
		return nil, nil, apierrors.NewMethodNotSupported(r.GroupVersionResource.GroupResource(), "patch")
	}
	if pt == types.ApplyYAMLPatchType {
		obj, _, warnings, err := s.Apply(ctx, r, ns, name, sub, patch, mode, opts)
		return obj, warnings, err
	}
	var warnings []string
	obj, err := s.guaranteedUpdate(ctx, r, ns, name, "", opts, func(old runtime.Object) (runtime.Object, error) {
		patched, err := applyPatch(r, old, pt, patch)
		if err != nil {
			return nil, err
		}
		obj, w, err := Decode(r, patched, FormatJSON, mode)
		if err != nil {
			return nil, err
		}
		warnings = w
		// What the URL names is not the patch's to change.
		nm, om := obj.(metav1.Object), old.(metav1.Object)
		if nm.GetName() != name {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", nm.GetName(), name))
		}
		if uid := nm.GetUID(); uid != "" && uid != om.GetUID() {
			return nil, apierrors.NewInvalid(r.GVK().GroupKind(), name, field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), uid, "field is immutable")})
		}
		return obj, nil
	}, sub)
	return obj, warnings, err
}

// applyPatch returns the JSON of old with the patch applied.
func applyPatch(r *Resource, old runtime.Object, pt types.PatchType, patch []byte) ([]byte, error) {
	old.GetObjectKind().SetGroupVersionKind(r.GVK())
	original, err := json.Marshal(old)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	var out []byte
	switch pt {
	case types.JSONPatchType:
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, apierrors.NewBadRequest("invalid JSON patch: " + err.Error())
		}
		if len(p) > maxPatchOps {
			return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("the JSON patch has %d operations, more than %d", len(p), maxPatchOps))
		}
		out, err = p.Apply(original)
		if err != nil {
			// The reason in the message, where clients show it.
			return nil, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity,
				Reason: metav1.StatusReasonInvalid, Message: "the JSON patch could not be applied: " + err.Error(),
				Details: &metav1.StatusDetails{Group: r.Group, Kind: r.Resource, Name: old.(metav1.Object).GetName()}}}
		}
	case types.MergePatchType:
		out, err = jsonpatch.MergePatch(original, patch)
		if err != nil {
			return nil, apierrors.NewBadRequest("invalid merge patch: " + err.Error())
		}
	case types.StrategicMergePatchType:
		if _, custom := r.New().(runtime.Unstructured); custom {
			return nil, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", r.GroupVersionResource.GroupResource(), "",
				fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %s, %s, %s",
					types.JSONPatchType, types.MergePatchType, types.ApplyYAMLPatchType), 0, false)
		}
		out, err = strategicpatch.StrategicMergePatch(original, patch, r.New())
		if err != nil {
			return nil, apierrors.NewBadRequest("invalid strategic merge patch: " + err.Error())
		}
	default:
		return nil, apierrors.NewGenericServerResponse(415, "patch", r.GroupVersionResource.GroupResource(), "",
			fmt.Sprintf("unsupported patch type %q", pt), 0, false)
	}
	return out, nil
}
