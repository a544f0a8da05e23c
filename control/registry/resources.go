package registry

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Resource is the registration of one served API resource: everything the
// registry and the API server know of its kind. The registry calls its
// functions and has no code of its own for any kind; they take
// runtime.Object, so a kind need not be a Go type.
type Resource struct {
	schema.GroupVersionResource
	Kind       string
	Singular   string
	ShortNames []string
	Categories []string
	Namespaced bool
	// New and NewList return a new empty object and list of the kind.
	New     func() runtime.Object
	NewList func() runtime.Object
	// Strategy defaults and validates the kind's writes.
	Strategy Strategy
	// Admission is what the kind's writes take from or claim in the rest
	// of the store; nil: nothing.
	Admission *Admission
	// Table prints the kind for kubectl; nil: NAME and CREATED AT.
	Table TableConvertor
	// Fields are the field selectors of the kind beyond metadata.name and
	// metadata.namespace: field name to value.
	Fields map[string]func(runtime.Object) string
	// Status: the resource has a status subresource, and writes to the
	// main resource keep the stored status.
	Status bool
	// Scale: the resource has a scale subresource; nil: none.
	Scale *Scale
	// Subresources served by other parts (pods/binding, pods/log, ...).
	Extra []string
	// Approval, if set, makes an approval subresource (CSRs): a write to
	// it changes the status as a status write does, after Approval has
	// carried over into obj from old what it may not change.
	Approval func(obj, old runtime.Object)
	// StorageVersion is the version objects are stored in when a resource
	// is served in several versions (autoscaling v1 and v2); empty means
	// this one. StorageGroup, if set, is the group of that version when it
	// is another group's ("core" for the legacy group: events.k8s.io/v1
	// Events are core/v1 Events). Convert converts between them.
	StorageVersion string
	StorageGroup   string
	Convert        func(obj runtime.Object, to schema.GroupVersion) (runtime.Object, error)
	// ReadOnly resources are maintained by the server and refuse writes.
	ReadOnly bool
	// Owner names what added the resource while serving ("" for the
	// table's): Resources.Set replaces an owner's resources.
	Owner string
	// Unserved: a stored version that is not served (a CRD's), kept to
	// read and write what is stored.
	Unserved bool
	// Terminating, if set, refuses creates with this message (the kind
	// is being removed).
	Terminating string
	// Prune, for a kind without a Go type, returns the fields of a
	// decoded object its schema does not know (".spec.foo"): a request's
	// unknown fields, for fieldValidation. nil: none.
	Prune func(obj runtime.Object) []string
	// For a kind without a Go type that has a schema (a CRD's):
	// ApplyTypes builds server-side apply's types of it; OpenAPIDefs
	// returns its OpenAPI models as a v2 or v3 document writes them, Model
	// and ListModel naming its own and its list's. nil: reflected from the
	// Go type. (Functions of plain types: a field of kube-openapi's schema
	// type would keep its JSON encoders, 200 KB, in the binary.)
	ApplyTypes       func() (managedfields.TypeConverter, error)
	OpenAPIDefs      func(v3 bool) map[string]map[string]any
	Model, ListModel string
	// Read, if set, completes an object read from storage (a CRD's
	// defaults added after it was written).
	Read func(obj runtime.Object)
	// Warnings, if set, are what a written object asks that the server
	// accepts without doing (for the client's Warning headers).
	Warnings func(obj runtime.Object) []string
}

// WarningsFor returns the warnings of a written object.
func (r *Resource) WarningsFor(obj runtime.Object) []string {
	if r.Warnings == nil || obj == nil {
		return nil
	}
	return r.Warnings(obj)
}

// Strategy is a kind's rules for writes, as Kubernetes' registry
// strategies: the registry calls them on every create, update, status
// write and delete.
type Strategy interface {
	// PrepareForCreate fills in a new object's defaults and what the
	// server owns in it (its status), before ValidateCreate.
	PrepareForCreate(obj runtime.Object)
	// PrepareForUpdate fills in the defaults of an update of old to obj of
	// the main resource and carries over what the server owns.
	PrepareForUpdate(obj, old runtime.Object)
	// PrepareForStatusUpdate carries over the metadata a write to the
	// status subresource may not change (the spec and the system fields
	// the registry carries over itself).
	PrepareForStatusUpdate(obj, old runtime.Object)
	ValidateCreate(obj runtime.Object) field.ErrorList
	ValidateUpdate(obj, old runtime.Object) field.ErrorList
	ValidateStatusUpdate(obj, old runtime.Object) field.ErrorList
	// BeginDelete marks obj as being deleted: grace is how long it stays
	// for its node to stop it, stay whether it stays, without finalizers,
	// for finalizing of its own.
	BeginDelete(obj runtime.Object, opts metav1.DeleteOptions) (grace int64, stay bool)
	// HeldBack reports whether a deleting object must stay though no
	// finalizers are left.
	HeldBack(obj runtime.Object) bool
}

// Admission is the part of a kind's writes that reads or claims other
// state of the store, as Kubernetes' admission plugins and allocators.
// Any function may be nil.
type Admission struct {
	// Create admits a new object after its validation; it may change obj.
	Create func(ctx context.Context, s *Store, obj runtime.Object) error
	// Update admits an update of old to obj of the main resource, before
	// its defaults and validation; it may change obj.
	Update func(ctx context.Context, s *Store, obj, old runtime.Object) error
	// Claims lists the keys an object holds in the store besides its own,
	// written in the same transaction as the object (allocations).
	Claims func(obj runtime.Object) []Claim
}

// Claim is a key an object holds in the store, with its owner as value;
// a create of a key that exists fails, so no two objects hold one.
type Claim struct {
	Key   string
	Owner []byte
}

// TableConvertor prints a kind's objects and lists as kubectl's tables.
type TableConvertor interface {
	Columns() []metav1.TableColumnDefinition
	Rows(obj runtime.Object, now time.Time) ([]metav1.TableRow, error)
}

// Scale is how a kind's scale subresource reads and sets its replicas.
type Scale struct {
	// Replicas returns the desired and current replicas and the selector
	// of the object's pods.
	Replicas func(obj runtime.Object) (spec, status int32, selector *metav1.LabelSelector)
	// SetReplicas sets the desired replicas.
	SetReplicas func(obj runtime.Object, n int32)
}

// GVK returns the resource's group, version and kind.
func (r *Resource) GVK() schema.GroupVersionKind { return r.GroupVersion().WithKind(r.Kind) }

// Verbs returns the verbs discovery advertises.
func (r *Resource) Verbs() []string {
	if r.ReadOnly {
		return []string{"get", "list", "watch"}
	}
	return []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
}

// storageGroupResource names the resource in storage keys ("core" for the
// legacy group), the same for every served version.
func (r *Resource) storageGroupResource() string {
	g := r.Group
	if r.StorageGroup != "" {
		g = r.StorageGroup
	}
	if g == "" {
		g = "core"
	}
	return g + "/" + r.Resource
}

// Resources indexes the served resources: the table's, and those added
// and removed while serving (the kinds of CustomResourceDefinitions).
// Readers see a consistent snapshot; a change replaces it.
type Resources struct {
	mu  sync.Mutex // serializes changes
	cur atomic.Pointer[resourceIndex]
}

// schemeMu serializes additions to Scheme.
var schemeMu sync.Mutex

type resourceIndex struct {
	list       []*Resource
	byGVR      map[schema.GroupVersionResource]*Resource
	byGVK      map[schema.GroupVersionKind]*Resource
	generation uint64
}

func newIndex(list []*Resource, generation uint64) *resourceIndex {
	ix := &resourceIndex{list: list, byGVR: map[schema.GroupVersionResource]*Resource{}, byGVK: map[schema.GroupVersionKind]*Resource{}, generation: generation}
	for _, r := range list {
		ix.byGVR[r.GroupVersionResource] = r
		ix.byGVK[r.GVK()] = r
	}
	return ix
}

// NewResources indexes a table of resources; the Go types of kinds beyond
// Table's join Scheme (call it before serving).
func NewResources(table []*Resource) *Resources {
	schemeMu.Lock()
	registerKinds(Scheme, table)
	schemeMu.Unlock()
	rs := &Resources{}
	rs.cur.Store(newIndex(table, 0))
	return rs
}

// All returns every resource in table order, then those added.
func (rs *Resources) All() []*Resource { return rs.cur.Load().list }

// Generation counts the changes since the table: what is built from the
// resources (OpenAPI documents) is rebuilt when it moves.
func (rs *Resources) Generation() uint64 { return rs.cur.Load().generation }

// Lookup finds a resource by group, version and resource name.
func (rs *Resources) Lookup(gvr schema.GroupVersionResource) (*Resource, bool) {
	r, ok := rs.cur.Load().byGVR[gvr]
	return r, ok
}

// ForKind finds a resource by group, version and kind.
func (rs *Resources) ForKind(gvk schema.GroupVersionKind) (*Resource, bool) {
	r, ok := rs.cur.Load().byGVK[gvk]
	return r, ok
}

// Set replaces the resources owner added with add (none: removes them),
// leaving the others; a resource the table or another owner serves is
// refused.
func (rs *Resources) Set(owner string, add []*Resource) error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	old := rs.cur.Load()
	var list []*Resource
	for _, r := range old.list {
		if r.Owner == owner {
			continue
		}
		list = append(list, r)
	}
	taken := newIndex(list, 0)
	for _, r := range add {
		if other, ok := taken.byGVR[r.GroupVersionResource]; ok {
			return fmt.Errorf("registry: %s is served already (%s)", r.GroupVersionResource, ownerName(other))
		}
		r.Owner = owner
		list = append(list, r)
	}
	rs.cur.Store(newIndex(list, old.generation+1))
	return nil
}

func ownerName(r *Resource) string {
	if r.Owner == "" {
		return "built in"
	}
	return r.Owner
}

// GroupVersions returns the served group versions, the preferred version of
// each group first, in table order of their first resource (for a CRD's,
// its first version).
func (rs *Resources) GroupVersions() []schema.GroupVersion {
	seen := map[schema.GroupVersion]bool{}
	var out []schema.GroupVersion
	for _, r := range rs.All() {
		if r.Unserved {
			continue
		}
		gv := r.GroupVersion()
		if !seen[gv] {
			seen[gv] = true
			out = append(out, gv)
		}
	}
	// Within a group, the version listed first in the table is preferred;
	// keep groups in first-seen order.
	order := map[string]int{}
	for i, gv := range out {
		if _, ok := order[gv.Group]; !ok {
			order[gv.Group] = i
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return order[out[i].Group] < order[out[j].Group] })
	return out
}

// InGroupVersion returns the resources of one group version.
func (rs *Resources) InGroupVersion(gv schema.GroupVersion) []*Resource {
	var out []*Resource
	for _, r := range rs.All() {
		if r.GroupVersion() == gv && !r.Unserved {
			out = append(out, r)
		}
	}
	return out
}

// String names the resource as kubectl users know it ("deployments.apps").
func (r *Resource) String() string {
	if r.Group == "" {
		return r.Resource
	}
	return fmt.Sprintf("%s.%s", r.Resource, r.Group)
}
