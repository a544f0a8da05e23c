package registry

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// Apply is server-side apply (a PATCH of application/apply-patch+yaml):
// the patch, a partial object in YAML or JSON, is merged into the stored
// object (sub "" or "status") as opts.Manager's intent, which then owns
// the fields it set; fields other managers own and the patch changes are
// a 409 naming them unless opts.Force. Without an object, one is created
// (created true), as kube-apiserver does. The merged object takes the
// write path of any update: defaults, validation, admission.
func (s *Store) Apply(ctx context.Context, r *Resource, ns, name, sub string, patch []byte, mode FieldValidation, opts WriteOptions) (obj runtime.Object, created bool, warnings []string, err error) {
	if r.ReadOnly {
		return nil, false, nil, apierrors.NewMethodNotSupported(r.GroupVersionResource.GroupResource(), "patch")
	}
	applied, warnings, err := decodeApply(r, ns, name, patch, mode)
	if err != nil {
		return nil, false, nil, err
	}
	opts.applied = true
	obj, err = s.guaranteedUpdate(ctx, r, ns, name, "", opts, func(old runtime.Object) (runtime.Object, error) {
		return s.fields.apply(r, sub, old, applied.DeepCopy().Object, opts.Manager, opts.Force)
	}, sub)
	if !apierrors.IsNotFound(err) || sub != "" {
		return obj, false, warnings, err
	}
	live := r.New()
	m, _ := meta.Accessor(live)
	m.SetName(name)
	m.SetNamespace(ns)
	if obj, err = s.fields.apply(r, "", live, applied.Object, opts.Manager, opts.Force); err != nil {
		return nil, false, nil, err
	}
	obj, err = s.Create(ctx, r, ns, obj, opts)
	return obj, err == nil, warnings, err
}

// decodeApply reads an apply patch: YAML or JSON of one object of the
// resource's kind and version, named as the URL names it. Duplicate
// fields are refused (Strict) or warned of (Warn); unknown fields are
// refused by the merge, whatever the mode, as kube-apiserver does.
func decodeApply(r *Resource, ns, name string, patch []byte, mode FieldValidation) (*unstructured.Unstructured, []string, error) {
	var warnings []string
	j, err := yaml.YAMLToJSON(patch)
	if err != nil {
		return nil, nil, apierrors.NewBadRequest("error decoding YAML: " + err.Error())
	}
	if mode != FieldValidationIgnore {
		if _, err := yaml.YAMLToJSONStrict(patch); err != nil {
			if mode == FieldValidationStrict {
				return nil, nil, apierrors.NewBadRequest("error strict decoding YAML: " + err.Error())
			}
			warnings = append(warnings, err.Error())
		}
	}
	u := &unstructured.Unstructured{}
	if err := utiljson.Unmarshal(j, &u.Object); err != nil || u.Object == nil {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding YAML: the apply patch is not an object (%v)", err))
	}
	if gvk := u.GroupVersionKind(); gvk != r.GVK() {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("the apply patch is of apiVersion %q kind %q; this URL takes %s %s",
			u.GetAPIVersion(), u.GetKind(), r.GroupVersion(), r.Kind))
	}
	if u.GetName() != name {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", u.GetName(), name))
	}
	if got := u.GetNamespace(); got != "" && got != ns {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("the namespace of the object (%s) does not match the namespace on the URL (%s)", got, ns))
	}
	return u, warnings, nil
}
