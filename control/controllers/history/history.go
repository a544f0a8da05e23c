// Package history keeps the apps/v1 ControllerRevisions of StatefulSets
// and DaemonSets: each revision holds a pod template as the patch that
// puts it back (`kubectl rollout undo`), is named after its owner and
// the hash of that patch, and is numbered in the order templates were
// seen, a template seen again taking the next number, as upstream's
// controller history does.
package history

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/isle-cluster/isle/control/registry"
)

// Patch is the data of a revision of template: the JSON patch
// {"spec":{"template":{...,"$patch":"replace"}}} that restores it.
func Patch(template *corev1.PodTemplateSpec) ([]byte, error) {
	b, err := json.Marshal(template)
	if err != nil {
		return nil, fmt.Errorf("history: encode the template: %w", err)
	}
	var t map[string]any
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("history: encode the template: %w", err)
	}
	// Kubernetes 1.33's types, whose clients match revisions by these
	// bytes (kubectl, the conformance suite), encode a template's zero
	// creation time as null; newer ones leave it out.
	meta, _ := t["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		t["metadata"] = meta
	}
	if _, ok := meta["creationTimestamp"]; !ok {
		meta["creationTimestamp"] = nil
	}
	t["$patch"] = "replace"
	return json.Marshal(map[string]any{"spec": map[string]any{"template": t}})
}

// Hash is the hash of a revision's data, with the owner's collision
// count mixed in when set, as upstream's HashControllerRevision.
func Hash(data []byte, collisionCount *int32) string {
	h := fnv.New32a()
	h.Write(data)
	if collisionCount != nil {
		h.Write([]byte(strconv.FormatInt(int64(*collisionCount), 10)))
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// Name is the name of owner's revision of hash, as upstream's.
func Name(owner, hash string) string {
	if len(owner) > 223 {
		owner = owner[:223]
	}
	return owner + "-" + hash
}

// History is one owner's revisions.
type History struct {
	Store *registry.Store
	Res   *registry.Resource // controllerrevisions
	Owner metav1.Object
	Kind  schema.GroupVersionKind
	// Labels are the owner's pod template labels, Annotations the
	// owner's (a change-cause): new revisions carry them.
	Labels, Annotations map[string]string
	// NameHash, if set, hashes a revision's name instead of Hash (a
	// DaemonSet's revisions are named by its template hash).
	NameHash func(data []byte, collisionCount *int32) string
}

// List returns the owner's revisions, oldest (lowest number) first.
func (h *History) List(ctx context.Context) ([]*appsv1.ControllerRevision, error) {
	list, err := h.Store.List(ctx, h.Res, h.Owner.GetNamespace(), metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, err
	}
	var out []*appsv1.ControllerRevision
	for i := range list.(*appsv1.ControllerRevisionList).Items {
		r := &list.(*appsv1.ControllerRevisionList).Items[i]
		if ref := metav1.GetControllerOf(r); ref != nil && ref.UID == h.Owner.GetUID() {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b *appsv1.ControllerRevision) int {
		if a.Revision != b.Revision {
			return cmp.Compare(a.Revision, b.Revision)
		}
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	return out, nil
}

// errCollision: a revision of the name holds other data.
var errCollision = errors.New("history: hash collision")

// Record makes data the owner's newest revision, given its revisions
// (List): the existing revision of the same data, renumbered if it is
// not the newest, or a new one. collisionCount is raised (and the name
// hashed again) when a revision of the name already holds other data,
// as upstream; the caller stores the count in the owner's status.
func (h *History) Record(ctx context.Context, revs []*appsv1.ControllerRevision, data []byte, collisionCount *int32) (*appsv1.ControllerRevision, error) {
	next := int64(1)
	if n := len(revs); n > 0 {
		next = revs[n-1].Revision + 1
	}
	for i, r := range revs {
		if !bytes.Equal(r.Data.Raw, data) && !sameJSON(r.Data.Raw, data) {
			continue
		}
		if i == len(revs)-1 {
			return r, nil
		}
		out, err := h.Store.Mutate(ctx, h.Res, r.Namespace, r.Name, "", func(obj runtime.Object) error {
			obj.(*appsv1.ControllerRevision).Revision = next
			return nil
		})
		if err != nil {
			return nil, err
		}
		return out.(*appsv1.ControllerRevision), nil
	}
	nameHash := h.NameHash
	if nameHash == nil {
		nameHash = Hash
	}
	for {
		hash := nameHash(data, collisionCount)
		labels := maps.Clone(h.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		labels[appsv1.ControllerRevisionHashLabelKey] = hash
		r := &appsv1.ControllerRevision{
			ObjectMeta: metav1.ObjectMeta{Name: Name(h.Owner.GetName(), hash), Namespace: h.Owner.GetNamespace(), Labels: labels,
				Annotations:     maps.Clone(h.Annotations),
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(h.Owner, h.Kind)}},
			Data:     runtime.RawExtension{Raw: data},
			Revision: next,
		}
		out, err := h.Store.Create(ctx, h.Res, r.Namespace, r, registry.WriteOptions{})
		if err == nil {
			return out.(*appsv1.ControllerRevision), nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
		got, gerr := h.Store.Get(ctx, h.Res, r.Namespace, r.Name, metav1.GetOptions{})
		if gerr != nil {
			return nil, gerr
		}
		old := got.(*appsv1.ControllerRevision)
		if ref := metav1.GetControllerOf(old); ref != nil && ref.UID == h.Owner.GetUID() && sameJSON(old.Data.Raw, data) {
			return old, nil
		}
		// Another's, or other data: hash again with a higher count.
		if collisionCount == nil {
			collisionCount = new(int32)
		}
		*collisionCount++
		if *collisionCount > 100 {
			return nil, fmt.Errorf("%w: %s", errCollision, r.Name)
		}
	}
}

// sameJSON compares two JSON documents by value; a template's null
// creation time counts as none (revisions written before Patch wrote it
// stay the same revision, so an upgrade rolls no pods).
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return equality.Semantic.DeepEqual(withoutNullCreation(x), withoutNullCreation(y))
}

// withoutNullCreation drops spec.template.metadata.creationTimestamp from
// a revision's data when it is null.
func withoutNullCreation(doc any) any {
	top, _ := doc.(map[string]any)
	spec, _ := top["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	meta, _ := tmpl["metadata"].(map[string]any)
	if v, ok := meta["creationTimestamp"]; ok && v == nil {
		delete(meta, "creationTimestamp")
	}
	return doc
}

// Truncate deletes the oldest revisions beyond limit, sparing those in
// live (by name).
func (h *History) Truncate(ctx context.Context, revs []*appsv1.ControllerRevision, live map[string]bool, limit int32) error {
	var old []*appsv1.ControllerRevision
	for _, r := range revs {
		if !live[r.Name] {
			old = append(old, r)
		}
	}
	var errs []error
	for i := 0; i < len(old)-int(max(limit, 0)); i++ {
		uid := old[i].UID
		_, _, err := h.Store.Delete(ctx, h.Res, old[i].Namespace, old[i].Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Template reads the pod template back from a revision's data.
func Template(r *appsv1.ControllerRevision) (*corev1.PodTemplateSpec, error) {
	var p struct {
		Spec struct {
			Template json.RawMessage `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(r.Data.Raw, &p); err != nil {
		return nil, fmt.Errorf("history: revision %s: %w", r.Name, err)
	}
	t := &corev1.PodTemplateSpec{}
	if err := json.Unmarshal(p.Spec.Template, t); err != nil {
		return nil, fmt.Errorf("history: revision %s: %w", r.Name, err)
	}
	return t, nil
}
