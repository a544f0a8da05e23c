package registry

import (
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Resource describes one served API resource.
type Resource struct {
	schema.GroupVersionResource
	Kind       string
	Singular   string
	ShortNames []string
	Categories []string
	Namespaced bool
	// Status: the resource has a status subresource, and writes to the
	// main resource keep the stored status.
	Status bool
	// Scale: the resource has a scale subresource (spec.replicas).
	Scale bool
	// Subresources served by other parts (pods/binding, pods/log, ...).
	Extra []string
	// StorageVersion is the version objects are stored in when a resource
	// is served in several versions (autoscaling v1 and v2); empty means
	// this one.
	StorageVersion string
	// ReadOnly resources are maintained by the server and refuse writes.
	ReadOnly bool

	newObj  func() runtime.Object
	newList func() runtime.Object
}

// GVK returns the resource's group, version and kind.
func (r *Resource) GVK() schema.GroupVersionKind { return r.GroupVersion().WithKind(r.Kind) }

// New returns a new empty object of the resource.
func (r *Resource) New() runtime.Object { return r.newObj() }

// NewList returns a new empty list of the resource.
func (r *Resource) NewList() runtime.Object { return r.newList() }

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
	if g == "" {
		g = "core"
	}
	return g + "/" + r.Resource
}

func res(gv schema.GroupVersion, resource, kind, singular string, namespaced bool, obj, list runtime.Object) *Resource {
	return &Resource{
		GroupVersionResource: gv.WithResource(resource),
		Kind:                 kind, Singular: singular, Namespaced: namespaced,
		newObj:  func() runtime.Object { return obj.DeepCopyObject() },
		newList: func() runtime.Object { return list.DeepCopyObject() },
	}
}

func (r *Resource) short(names ...string) *Resource   { r.ShortNames = names; return r }
func (r *Resource) inAll() *Resource                  { r.Categories = []string{"all"}; return r }
func (r *Resource) status() *Resource                 { r.Status = true; return r }
func (r *Resource) scale() *Resource                  { r.Scale = true; return r }
func (r *Resource) extra(subs ...string) *Resource    { r.Extra = subs; return r }
func (r *Resource) storedAs(version string) *Resource { r.StorageVersion = version; return r }

// Table is the ordered list of every resource the API server serves.
func Table() []*Resource {
	core, apps, batch := corev1.SchemeGroupVersion, appsv1.SchemeGroupVersion, batchv1.SchemeGroupVersion
	return []*Resource{
		res(core, "namespaces", "Namespace", "namespace", false, &corev1.Namespace{}, &corev1.NamespaceList{}).short("ns").status().extra("finalize"),
		res(core, "nodes", "Node", "node", false, &corev1.Node{}, &corev1.NodeList{}).short("no").status(),
		res(core, "pods", "Pod", "pod", true, &corev1.Pod{}, &corev1.PodList{}).short("po").inAll().status().extra("binding", "eviction", "log", "exec"),
		res(core, "services", "Service", "service", true, &corev1.Service{}, &corev1.ServiceList{}).short("svc").inAll().status(),
		res(core, "configmaps", "ConfigMap", "configmap", true, &corev1.ConfigMap{}, &corev1.ConfigMapList{}).short("cm"),
		res(core, "secrets", "Secret", "secret", true, &corev1.Secret{}, &corev1.SecretList{}),
		res(core, "podtemplates", "PodTemplate", "podtemplate", true, &corev1.PodTemplate{}, &corev1.PodTemplateList{}),
		res(core, "serviceaccounts", "ServiceAccount", "serviceaccount", true, &corev1.ServiceAccount{}, &corev1.ServiceAccountList{}).short("sa"),
		res(core, "events", "Event", "event", true, &corev1.Event{}, &corev1.EventList{}).short("ev"),
		res(core, "persistentvolumes", "PersistentVolume", "persistentvolume", false, &corev1.PersistentVolume{}, &corev1.PersistentVolumeList{}).short("pv").status(),
		res(core, "persistentvolumeclaims", "PersistentVolumeClaim", "persistentvolumeclaim", true, &corev1.PersistentVolumeClaim{}, &corev1.PersistentVolumeClaimList{}).short("pvc").status(),
		res(apps, "deployments", "Deployment", "deployment", true, &appsv1.Deployment{}, &appsv1.DeploymentList{}).short("deploy").inAll().status().scale(),
		res(apps, "replicasets", "ReplicaSet", "replicaset", true, &appsv1.ReplicaSet{}, &appsv1.ReplicaSetList{}).short("rs").inAll().status().scale(),
		res(apps, "daemonsets", "DaemonSet", "daemonset", true, &appsv1.DaemonSet{}, &appsv1.DaemonSetList{}).short("ds").inAll().status(),
		res(batch, "jobs", "Job", "job", true, &batchv1.Job{}, &batchv1.JobList{}).inAll().status(),
		res(discoveryv1.SchemeGroupVersion, "endpointslices", "EndpointSlice", "endpointslice", true, &discoveryv1.EndpointSlice{}, &discoveryv1.EndpointSliceList{}),
		res(networkingv1.SchemeGroupVersion, "ingresses", "Ingress", "ingress", true, &networkingv1.Ingress{}, &networkingv1.IngressList{}).short("ing").status(),
		res(networkingv1.SchemeGroupVersion, "ingressclasses", "IngressClass", "ingressclass", false, &networkingv1.IngressClass{}, &networkingv1.IngressClassList{}),
		res(autoscalingv2.SchemeGroupVersion, "horizontalpodautoscalers", "HorizontalPodAutoscaler", "horizontalpodautoscaler", true, &autoscalingv2.HorizontalPodAutoscaler{}, &autoscalingv2.HorizontalPodAutoscalerList{}).short("hpa").inAll().status(),
		res(autoscalingv1.SchemeGroupVersion, "horizontalpodautoscalers", "HorizontalPodAutoscaler", "horizontalpodautoscaler", true, &autoscalingv1.HorizontalPodAutoscaler{}, &autoscalingv1.HorizontalPodAutoscalerList{}).short("hpa").inAll().status().storedAs("v2"),
		res(storagev1.SchemeGroupVersion, "storageclasses", "StorageClass", "storageclass", false, &storagev1.StorageClass{}, &storagev1.StorageClassList{}).short("sc"),
		res(coordinationv1.SchemeGroupVersion, "leases", "Lease", "lease", true, &coordinationv1.Lease{}, &coordinationv1.LeaseList{}),
	}
}

// Resources indexes the table.
type Resources struct {
	list  []*Resource
	byGVR map[schema.GroupVersionResource]*Resource
	byGVK map[schema.GroupVersionKind]*Resource
}

// NewResources indexes a table of resources.
func NewResources(table []*Resource) *Resources {
	rs := &Resources{list: table, byGVR: map[schema.GroupVersionResource]*Resource{}, byGVK: map[schema.GroupVersionKind]*Resource{}}
	for _, r := range table {
		rs.byGVR[r.GroupVersionResource] = r
		rs.byGVK[r.GVK()] = r
	}
	return rs
}

// All returns every resource in table order.
func (rs *Resources) All() []*Resource { return rs.list }

// Lookup finds a resource by group, version and resource name.
func (rs *Resources) Lookup(gvr schema.GroupVersionResource) (*Resource, bool) {
	r, ok := rs.byGVR[gvr]
	return r, ok
}

// ForKind finds a resource by group, version and kind.
func (rs *Resources) ForKind(gvk schema.GroupVersionKind) (*Resource, bool) {
	r, ok := rs.byGVK[gvk]
	return r, ok
}

// GroupVersions returns the served group versions, the preferred version of
// each group first, in table order of their first resource.
func (rs *Resources) GroupVersions() []schema.GroupVersion {
	seen := map[schema.GroupVersion]bool{}
	var out []schema.GroupVersion
	for _, r := range rs.list {
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
	for _, r := range rs.list {
		if r.GroupVersion() == gv {
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
