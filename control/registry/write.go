package registry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/isle-cluster/isle/raft"
	"github.com/isle-cluster/isle/raft/kv"
)

// WriteOptions are the options every write takes.
type WriteOptions struct {
	// DryRun validates and admits without storing.
	DryRun bool
	// Admit, if set, is the writer's own admission, given the object as
	// it would be stored, after defaults and validation, and as it was
	// (nil on a create): the API server's checks of what the requester
	// may write (RBAC escalation, NodeRestriction).
	Admit func(ctx context.Context, obj, old runtime.Object) error
	// Manager names the writer in the object's managedFields: the
	// request's fieldManager or user agent (ManagerFor); empty:
	// DefaultManager.
	Manager string
	// Force, in a server-side apply, takes over the fields other managers
	// own instead of failing on them.
	Force bool
	// applied: a server-side apply, which set the managed fields itself.
	applied bool
	// trackAs is the subresource the managed fields record the write
	// under when it is not the one written through (scale).
	trackAs string
}

// Create stores a new object of r in namespace ns: decode is done by the
// caller; here come defaults, validation, admission and the store.
func (s *Store) Create(ctx context.Context, r *Resource, ns string, obj runtime.Object, opts WriteOptions) (runtime.Object, error) {
	if r.ReadOnly {
		return nil, apierrors.NewMethodNotSupported(r.GroupVersionResource.GroupResource(), "create")
	}
	if r.Terminating != "" {
		return nil, apierrors.NewGenericServerResponse(http.StatusMethodNotAllowed, "create", r.GroupVersionResource.GroupResource(), "", r.Terminating, 0, false)
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if err := s.checkNamespace(r, m, ns); err != nil {
		return nil, err
	}
	if m.GetName() == "" && m.GetGenerateName() != "" {
		m.SetName(m.GetGenerateName() + rand.String(5))
	}
	now := metav1.NewTime(s.now().UTC().Truncate(1e9))
	m.SetUID(uuid.NewUUID())
	m.SetCreationTimestamp(now)
	m.SetResourceVersion("")
	m.SetDeletionTimestamp(nil)
	m.SetDeletionGracePeriodSeconds(nil)
	m.SetGeneration(0)
	if hasSpec(obj) {
		m.SetGeneration(1)
	}
	r.Strategy.PrepareForCreate(obj)
	if !opts.applied {
		empty := r.New()
		setGVK(r, empty)
		obj = s.fields.update(r, "", empty, obj, opts.Manager)
		m, _ = meta.Accessor(obj)
	}
	mutated, changed, err := s.mutate(ctx, r, "", obj, nil, opts)
	if err != nil {
		return nil, err
	}
	if changed {
		// What the webhooks changed gets the kind's defaults, and the
		// system fields are the server's again.
		uid, gen := m.GetUID(), m.GetGeneration()
		obj = mutated
		m, _ = meta.Accessor(obj)
		r.Strategy.PrepareForCreate(obj)
		m.SetUID(uid)
		m.SetCreationTimestamp(now)
		m.SetResourceVersion("")
		m.SetGeneration(gen)
		m.SetDeletionTimestamp(nil)
		m.SetDeletionGracePeriodSeconds(nil)
		if err := s.checkNamespace(r, m, ns); err != nil {
			return nil, err
		}
	}
	if errs := r.Strategy.ValidateCreate(obj); len(errs) > 0 {
		return nil, invalid(r, m.GetName(), errs)
	}
	if opts.Admit != nil {
		if err := opts.Admit(ctx, obj, nil); err != nil {
			return nil, err
		}
	}
	if err := s.validate(ctx, r, "", obj, nil, opts); err != nil {
		return nil, err
	}
	// Allocations (Service IPs, node ports) are claimed in the write's own
	// transaction; a claim lost to a concurrent create is allocated again.
	orig := obj.DeepCopyObject()
	for attempt := 0; ; attempt++ {
		if err := s.admitCreate(ctx, r, obj); err != nil {
			return nil, err
		}
		// The quotas last, as Kubernetes' ResourceQuota plugin: their
		// charges go in the object's transaction.
		charges, err := s.admitQuota(ctx, r, obj)
		if err != nil {
			return nil, err
		}
		out, err := s.storeNew(ctx, r, obj, opts, charges)
		var taken *claimTakenError
		switch {
		case errors.Is(err, errQuotaChanged) && attempt >= 10:
			return nil, apierrors.NewConflict(r.GroupVersionResource.GroupResource(), m.GetName(), err)
		case errors.Is(err, errQuotaChanged):
			// A quota changed between its read and the write: again.
		case !errors.As(err, &taken):
			return out, err
		case requested(r, orig, taken.key) || attempt >= 10:
			return nil, allocationInvalid(r, m.GetName(), taken.key)
		}
		obj = orig.DeepCopyObject()
		m, _ = meta.Accessor(obj)
	}
}

// claimTakenError: an allocation claimed in a write was taken meanwhile.
type claimTakenError struct{ key string }

func (e *claimTakenError) Error() string {
	return e.key + ": an allocation was taken by a concurrent write"
}

// errQuotaChanged: a quota a create charged changed before the write.
var errQuotaChanged = errors.New("registry: a quota changed while the object was charged to it")

// storeNew writes a new object with whatever claims admission attached
// and the charges to its quotas.
func (s *Store) storeNew(ctx context.Context, r *Resource, obj runtime.Object, opts WriteOptions, charges []kv.Op) (runtime.Object, error) {
	m, _ := meta.Accessor(obj)
	data, err := s.toStore(r, obj)
	if err != nil {
		return nil, err
	}
	if opts.DryRun {
		return obj, nil
	}
	key := objectKey(r, m.GetNamespace(), m.GetName())
	if data, err = s.seal(key, data); err != nil {
		return nil, err
	}
	claims := claimsOf(r, obj)
	ops := append(append([]kv.Op{{Type: kv.OpPut, Key: key, Value: data, IfModRev: 0}}, claims...), charges...)
	res, err := s.propose(ctx, ops...)
	if err != nil {
		return nil, err
	}
	if !res.Succeeded {
		switch {
		case res.FailedOp == 0:
			return nil, apierrors.NewAlreadyExists(r.GroupVersionResource.GroupResource(), m.GetName())
		case res.FailedOp > len(claims):
			return nil, errQuotaChanged
		}
		return nil, &claimTakenError{key: ops[res.FailedOp].Key}
	}
	m.SetResourceVersion(strconv.FormatInt(res.Revision, 10))
	return obj, nil
}

// MaxWriteBytes bounds what one write puts in the store, as etcd's
// request limit does (1.5 MiB): an object over it is refused (413) before
// it reaches Raft, whose log and followers would otherwise carry it.
const MaxWriteBytes = 3 << 19

func tooLarge(size int) error {
	return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("the object is %d bytes stored, more than the store takes in one write (%d)", size, MaxWriteBytes))
}

func (s *Store) propose(ctx context.Context, ops ...kv.Op) (kv.Result, error) {
	size := 0
	for _, op := range ops {
		size += len(op.Key) + len(op.Value)
	}
	if size > MaxWriteBytes {
		return kv.Result{}, tooLarge(size)
	}
	ctx, cancel := context.WithTimeout(ctx, s.writeTimeout)
	defer cancel()
	res, err := s.node.Propose(ctx, ops...)
	if errors.Is(err, raft.ErrTimeout) && s.node.Leader() == 0 {
		// Taken by raft but no leader now: the store has lost its quorum.
		return res, apierrors.NewServiceUnavailable("the cluster store has no quorum; the write may or may not have been applied: " + err.Error())
	}
	if err != nil {
		return res, storeError(err)
	}
	return res, nil
}

// checkNamespace makes the object's namespace agree with the request's.
func (s *Store) checkNamespace(r *Resource, m metav1.Object, ns string) error {
	if !r.Namespaced {
		m.SetNamespace("")
		return nil
	}
	if m.GetNamespace() != "" && m.GetNamespace() != ns {
		return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	m.SetNamespace(ns)
	return nil
}

func invalid(r *Resource, name string, errs field.ErrorList) error {
	return apierrors.NewInvalid(r.GVK().GroupKind(), name, errs)
}

// The spec and status of an object, a Go type's fields or the keys of an
// object without one (runtime.Unstructured).

// hasSpec reports whether the object has a spec (and so a generation).
func hasSpec(obj runtime.Object) bool {
	if u, ok := obj.(runtime.Unstructured); ok {
		_, ok := u.UnstructuredContent()["spec"]
		return ok
	}
	v := reflect.ValueOf(obj)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	return v.Kind() == reflect.Struct && v.FieldByName("Spec").IsValid()
}

// specOf returns the object's spec for comparison.
func specOf(obj runtime.Object) any {
	if u, ok := obj.(runtime.Unstructured); ok {
		return u.UnstructuredContent()["spec"]
	}
	v := reflect.ValueOf(obj).Elem().FieldByName("Spec")
	if !v.IsValid() {
		return nil
	}
	return v.Interface()
}

// copyStatus sets dst's status to src's (both of the same type).
func copyStatus(dst, src runtime.Object) {
	if u, ok := dst.(runtime.Unstructured); ok {
		copyKey(u, src.(runtime.Unstructured), "status")
		return
	}
	d := reflect.ValueOf(dst).Elem().FieldByName("Status")
	sv := reflect.ValueOf(src).Elem().FieldByName("Status")
	if d.IsValid() && sv.IsValid() && d.CanSet() {
		d.Set(sv)
	}
}

// copySpec sets dst's spec to src's.
func copySpec(dst, src runtime.Object) {
	if u, ok := dst.(runtime.Unstructured); ok {
		copyKey(u, src.(runtime.Unstructured), "spec")
		return
	}
	d := reflect.ValueOf(dst).Elem().FieldByName("Spec")
	sv := reflect.ValueOf(src).Elem().FieldByName("Spec")
	if d.IsValid() && sv.IsValid() && d.CanSet() {
		d.Set(sv)
	}
}

// copyKey sets dst's key to src's, or removes it if src has none.
func copyKey(dst, src runtime.Unstructured, key string) {
	d := dst.UnstructuredContent()
	if v, ok := src.UnstructuredContent()[key]; ok {
		d[key] = runtime.DeepCopyJSONValue(v)
	} else {
		delete(d, key)
	}
}

// Update replaces an object (sub "" ), or only its status (sub "status").
// A resourceVersion in obj is a precondition (409 if stale); without one
// the update applies to whatever is stored.
func (s *Store) Update(ctx context.Context, r *Resource, ns, name, sub string, obj runtime.Object, opts WriteOptions) (runtime.Object, error) {
	if r.ReadOnly {
		return nil, apierrors.NewMethodNotSupported(r.GroupVersionResource.GroupResource(), "update")
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if m.GetName() != name {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", m.GetName(), name))
	}
	if err := s.checkNamespace(r, m, ns); err != nil {
		return nil, err
	}
	want, uid := m.GetResourceVersion(), m.GetUID()
	return s.guaranteedUpdate(ctx, r, ns, name, want, opts, func(old runtime.Object) (runtime.Object, error) {
		// A uid in the object is a precondition, as kube-apiserver takes it.
		if ouid := old.(metav1.Object).GetUID(); uid != "" && uid != ouid {
			return nil, apierrors.NewConflict(r.GroupVersionResource.GroupResource(), name,
				fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", uid, ouid))
		}
		return obj.DeepCopyObject(), nil
	}, sub)
}

// guaranteedUpdate reads the stored object, lets mutate build the new one
// from it, and writes it back with a compare-and-swap on the stored
// revision, retrying when another writer got there first. precondition, if
// set, is a resourceVersion the stored object must have (else 409).
func (s *Store) guaranteedUpdate(ctx context.Context, r *Resource, ns, name, precondition string, opts WriteOptions,
	mutate func(old runtime.Object) (runtime.Object, error), sub string) (runtime.Object, error) {
	gr := r.GroupVersionResource.GroupResource()
	for attempt := 0; ; attempt++ {
		old, err := s.Get(ctx, r, ns, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		om, _ := meta.Accessor(old)
		if precondition != "" && precondition != om.GetResourceVersion() {
			return nil, apierrors.NewConflict(gr, name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
		}
		obj, err := mutate(old.DeepCopyObject())
		if err != nil {
			return nil, err
		}
		nm, _ := meta.Accessor(obj)
		if rv := nm.GetResourceVersion(); rv != "" && rv != om.GetResourceVersion() {
			return nil, apierrors.NewConflict(gr, name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
		}
		if obj, err = s.prepareUpdate(ctx, r, sub, obj, old, opts); err != nil {
			return nil, err
		}
		nm, _ = meta.Accessor(obj)
		if sub != subDelete && sub != subBinding {
			if opts.Admit != nil {
				if err := opts.Admit(ctx, obj, old); err != nil {
					return nil, err
				}
			}
			if err := s.validateUpdate(ctx, r, sub, obj, old, opts); err != nil {
				return nil, err
			}
		}
		// An object being deleted goes once nothing holds it any more.
		if nm.GetDeletionTimestamp() != nil && !heldBack(r, obj) {
			removed, err := s.remove(ctx, r, old, opts)
			if apierrors.IsConflict(err) && precondition == "" && attempt < maxRetries && ctx.Err() == nil {
				continue // changed meanwhile: look again
			}
			return removed, err
		}
		oldRev, _ := strconv.ParseInt(om.GetResourceVersion(), 10, 64)
		data, err := s.toStore(r, obj)
		if err != nil {
			return nil, err
		}
		if prev, err := s.toStore(r, old); err == nil && bytes.Equal(prev, data) {
			return old, nil // nothing changed: no write, no new resourceVersion
		}
		if opts.DryRun {
			return obj, nil
		}
		key := objectKey(r, ns, name)
		if data, err = s.seal(key, data); err != nil {
			return nil, err
		}
		ops := append([]kv.Op{{Type: kv.OpPut, Key: key, Value: data, IfModRev: oldRev}}, claimChanges(r, old, obj)...)
		res, err := s.propose(ctx, ops...)
		if err != nil {
			return nil, err
		}
		if res.Succeeded {
			nm.SetResourceVersion(strconv.FormatInt(res.Revision, 10))
			return obj, nil
		}
		if res.FailedOp > 0 && attempt < maxRetries && ctx.Err() == nil {
			continue // a new allocation was taken meanwhile: allocate again
		}
		if precondition != "" || attempt >= maxRetries || ctx.Err() != nil {
			return nil, apierrors.NewConflict(gr, name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
		}
	}
}

// prepareUpdate carries over what a client may not change, applies the
// subresource's rules, defaults, records the writer's fields and
// validates.
func (s *Store) prepareUpdate(ctx context.Context, r *Resource, sub string, obj, old runtime.Object, opts WriteOptions) (runtime.Object, error) {
	nm, _ := meta.Accessor(obj)
	om, _ := meta.Accessor(old)
	switch sub {
	case "":
		if r.Status {
			copyStatus(obj, old)
		}
	case "status":
		copySpec(obj, old)
		r.Strategy.PrepareForStatusUpdate(obj, old)
	case "approval":
		if r.Approval == nil {
			return nil, apierrors.NewNotFound(r.GroupVersionResource.GroupResource(), om.GetName())
		}
		r.Approval(obj, old)
		r.Strategy.PrepareForStatusUpdate(obj, old)
	}
	carryIdentity(nm, om)
	if sub == subDelete || sub == subBinding {
		return obj, nil // the server's own change: nothing else to carry over or check
	}
	nm.SetDeletionTimestamp(om.GetDeletionTimestamp())
	nm.SetDeletionGracePeriodSeconds(om.GetDeletionGracePeriodSeconds())
	if sub == "" {
		if err := s.admitUpdate(ctx, r, obj, old); err != nil {
			return nil, err
		}
		prepareMainUpdate(r, obj, old, nm, om)
	}
	if !opts.applied {
		track := sub
		if opts.trackAs != "" {
			track = opts.trackAs
		}
		obj = s.fields.update(r, track, old, obj, opts.Manager)
	}
	mutated, changed, err := s.mutateUpdate(ctx, r, sub, obj, old, opts)
	if err != nil {
		return nil, err
	}
	if changed {
		// What the webhooks changed gets the rules of the subresource and
		// the kind's defaults again.
		obj = mutated
		nm, _ = meta.Accessor(obj)
		switch sub {
		case "":
			if r.Status {
				copyStatus(obj, old)
			}
		default:
			copySpec(obj, old)
			r.Strategy.PrepareForStatusUpdate(obj, old)
		}
		carryIdentity(nm, om)
		nm.SetDeletionTimestamp(om.GetDeletionTimestamp())
		nm.SetDeletionGracePeriodSeconds(om.GetDeletionGracePeriodSeconds())
		if sub == "" {
			prepareMainUpdate(r, obj, old, nm, om)
		}
	}
	var errs field.ErrorList
	if sub == "status" || sub == "approval" {
		errs = r.Strategy.ValidateStatusUpdate(obj, old)
	} else {
		errs = r.Strategy.ValidateUpdate(obj, old)
	}
	if len(errs) > 0 {
		return nil, invalid(r, nm.GetName(), errs)
	}
	return obj, nil
}

// carryIdentity sets in an update what a client may never change: the
// object's name, namespace, uid, creation time, revision and generation.
func carryIdentity(nm, om metav1.Object) {
	nm.SetName(om.GetName())
	nm.SetNamespace(om.GetNamespace())
	nm.SetUID(om.GetUID())
	nm.SetCreationTimestamp(om.GetCreationTimestamp())
	nm.SetResourceVersion(om.GetResourceVersion())
	nm.SetGeneration(om.GetGeneration())
}

// prepareMainUpdate applies the kind's update rules to a write of the
// main resource and counts a changed spec in the generation.
func prepareMainUpdate(r *Resource, obj, old runtime.Object, nm, om metav1.Object) {
	r.Strategy.PrepareForUpdate(obj, old)
	if hasSpec(obj) && !equality.Semantic.DeepEqual(specOf(obj), specOf(old)) {
		nm.SetGeneration(om.GetGeneration() + 1)
	}
}

// maxRetries bounds how often a write without a precondition is tried
// again after losing a race with another writer (Kubernetes retries until
// the request's deadline; so does this, within the bound).
const maxRetries = 1000

// subDelete and subBinding mark the server's own updates that record a
// deletion or a pod's binding to a node.
const (
	subDelete  = "(delete)"
	subBinding = "(binding)"
)

// heldBack reports whether a deleting object must stay: it has finalizers,
// or its kind holds it back (a namespace not yet emptied, a pod whose node
// has not stopped it).
func heldBack(r *Resource, obj runtime.Object) bool {
	m, _ := meta.Accessor(obj)
	return len(m.GetFinalizers()) > 0 || r.Strategy.HeldBack(obj)
}

// remove deletes the stored object if it is still the revision given.
func (s *Store) remove(ctx context.Context, r *Resource, old runtime.Object, opts WriteOptions) (runtime.Object, error) {
	om, _ := meta.Accessor(old)
	if opts.DryRun {
		return old, nil
	}
	rev, _ := strconv.ParseInt(om.GetResourceVersion(), 10, 64)
	ops := append([]kv.Op{{Type: kv.OpDelete, Key: objectKey(r, om.GetNamespace(), om.GetName()), IfModRev: rev}}, releasesOf(r, old)...)
	res, err := s.propose(ctx, ops...)
	if err != nil {
		return nil, err
	}
	if !res.Succeeded {
		return nil, apierrors.NewConflict(r.GroupVersionResource.GroupResource(), om.GetName(),
			fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	return old, nil
}

// Mutate reads an object, lets change modify it, and writes it back with
// the full write path (defaults, validation), retrying on conflicts: the
// main resource (sub "") or its status (sub "status"). It is how in-process
// controllers update objects.
func (s *Store) Mutate(ctx context.Context, r *Resource, ns, name, sub string, change func(obj runtime.Object) error) (runtime.Object, error) {
	return s.guaranteedUpdate(ctx, r, ns, name, "", WriteOptions{}, func(old runtime.Object) (runtime.Object, error) {
		if err := change(old); err != nil {
			return nil, err
		}
		return old, nil
	}, sub)
}
