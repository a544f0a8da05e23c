package registry

import (
	"context"
	"encoding/json"
	"fmt"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// maxPatchOps bounds a JSON patch's operations (input from outside).
const maxPatchOps = 10000

// Patch applies a JSON patch, merge patch or strategic merge patch to the
// stored object (sub "" or "status") and writes the result, retrying on a
// concurrent write unless the patch itself pins a resourceVersion.
func (s *Store) Patch(ctx context.Context, r *Resource, ns, name, sub string, pt types.PatchType, patch []byte, mode FieldValidation, opts WriteOptions) (runtime.Object, []string, error) {
	if r.ReadOnly {
		return nil, nil, apierrors.NewMethodNotSupported(r.GroupVersionResource.GroupResource(), "patch")
	}
	var warnings []string
	obj, err := s.guaranteedUpdate(ctx, r, ns, name, "", opts, func(old runtime.Object) (runtime.Object, error) {
		patched, err := applyPatch(r, old, pt, patch)
		if err != nil {
			return nil, err
		}
		obj, w, err := Decode(r, patched, FormatJSON, mode)
		warnings = w
		return obj, err
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
			return nil, apierrors.NewGenericServerResponse(422, "patch", r.GroupVersionResource.GroupResource(), "",
				"the JSON patch could not be applied: "+err.Error(), 0, false)
		}
	case types.MergePatchType:
		out, err = jsonpatch.MergePatch(original, patch)
		if err != nil {
			return nil, apierrors.NewBadRequest("invalid merge patch: " + err.Error())
		}
	case types.StrategicMergePatchType:
		out, err = strategicpatch.StrategicMergePatch(original, patch, r.New())
		if err != nil {
			return nil, apierrors.NewBadRequest("invalid strategic merge patch: " + err.Error())
		}
	case types.ApplyYAMLPatchType, types.ApplyCBORPatchType:
		return nil, apierrors.NewGenericServerResponse(415, "patch", r.GroupVersionResource.GroupResource(), "",
			"server-side apply is not supported by isle: use client-side kubectl apply (without --server-side)", 0, false)
	default:
		return nil, apierrors.NewGenericServerResponse(415, "patch", r.GroupVersionResource.GroupResource(), "",
			fmt.Sprintf("unsupported patch type %q", pt), 0, false)
	}
	return out, nil
}
