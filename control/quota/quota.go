// Package quota counts what objects use of a namespace's ResourceQuotas,
// as Kubernetes' quota evaluators do: the admission (control/registry)
// charges a new object against the quotas that cover it, and the quota
// controller recounts every quota's usage from the objects themselves.
//
// Counted: pods (pods, the requests and limits of cpu, memory,
// ephemeral-storage and extended resources, hugepages, and cpu, memory
// and ephemeral-storage as their requests), services (services, services.loadbalancers,
// services.nodeports), persistentvolumeclaims (persistentvolumeclaims,
// requests.storage, and both per storage class), configmaps, secrets,
// replicationcontrollers and resourcequotas, and count/<resource>.<group>
// of every namespaced kind. Pods that finished, or whose deletion's grace
// period is over, count for nothing. Scopes (Terminating, NotTerminating,
// BestEffort, NotBestEffort, PriorityClass, CrossNamespacePodAffinity)
// select pods; a quota with scopes covers no other kind.
package quota

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	resourcehelper "k8s.io/component-helpers/resource"
)

// storageClassSuffix names the per-class resources of claims:
// <class>.storageclass.storage.k8s.io/requests.storage.
const storageClassSuffix = ".storageclass.storage.k8s.io/"

// CountName is the object-count resource of a kind: count/pods,
// count/deployments.apps.
func CountName(gr schema.GroupResource) corev1.ResourceName {
	if gr.Group == "" {
		return corev1.ResourceName("count/" + gr.Resource)
	}
	return corev1.ResourceName("count/" + gr.Resource + "." + gr.Group)
}

// Counted reports whether the object counts at all at now: a pod that
// finished or whose grace period is over does not.
func Counted(obj runtime.Object, now time.Time) bool {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return true
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if d := pod.DeletionTimestamp; d != nil && pod.DeletionGracePeriodSeconds != nil &&
		now.After(d.Add(time.Duration(*pod.DeletionGracePeriodSeconds)*time.Second)) {
		return false
	}
	return true
}

// Usage is what obj, of resource gr, uses of quotas.
func Usage(gr schema.GroupResource, obj runtime.Object) corev1.ResourceList {
	one := *resource.NewQuantity(1, resource.DecimalSI)
	u := corev1.ResourceList{CountName(gr): one}
	if gr.Group != "" {
		return u
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		u[corev1.ResourcePods] = one
		addPodCompute(u, o)
	case *corev1.Service:
		u[corev1.ResourceServices] = one
		ports := 0
		switch o.Spec.Type {
		case corev1.ServiceTypeLoadBalancer:
			u[corev1.ResourceServicesLoadBalancers] = one
			ports = len(o.Spec.Ports)
		case corev1.ServiceTypeNodePort:
			ports = len(o.Spec.Ports)
		}
		if ports > 0 {
			u[corev1.ResourceServicesNodePorts] = *resource.NewQuantity(int64(ports), resource.DecimalSI)
		}
	case *corev1.PersistentVolumeClaim:
		u[corev1.ResourcePersistentVolumeClaims] = one
		class := ""
		if o.Spec.StorageClassName != nil {
			class = *o.Spec.StorageClassName
		}
		if class != "" {
			u[corev1.ResourceName(class+storageClassSuffix+"persistentvolumeclaims")] = one
		}
		if q, ok := o.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
			u[corev1.ResourceRequestsStorage] = q.DeepCopy()
			if class != "" {
				u[corev1.ResourceName(class+storageClassSuffix+"requests.storage")] = q.DeepCopy()
			}
		}
	case *corev1.ConfigMap:
		u[corev1.ResourceConfigMaps] = one
	case *corev1.Secret:
		u[corev1.ResourceSecrets] = one
	case *corev1.ReplicationController:
		u[corev1.ResourceReplicationControllers] = one
	case *corev1.ResourceQuota:
		u[corev1.ResourceQuotas] = one
	}
	return u
}

// addPodCompute adds a pod's requests and limits: as the scheduler counts
// them (init containers, sidecars, overhead), requests.* and limits.*,
// cpu, memory and ephemeral-storage for their requests.
func addPodCompute(u corev1.ResourceList, pod *corev1.Pod) {
	requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	limits := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	for name, q := range requests {
		switch {
		case name == corev1.ResourcePods:
		case name == corev1.ResourceCPU || name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage:
			u[name] = q.DeepCopy()
			u["requests."+name] = q.DeepCopy()
		default:
			u["requests."+name] = q.DeepCopy()
		}
	}
	for name, q := range limits {
		switch name {
		case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
			u["limits."+name] = q.DeepCopy()
		}
	}
}

// Covers reports whether the quota's scopes select obj, of resource gr:
// scopes select pods only.
func Covers(q *corev1.ResourceQuota, gr schema.GroupResource, obj runtime.Object) bool {
	selectors := scopeSelectors(q)
	if len(selectors) == 0 {
		return true
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok || gr.Group != "" {
		return false
	}
	for _, s := range selectors {
		if !podMatchesScope(pod, s) {
			return false
		}
	}
	return true
}

func scopeSelectors(q *corev1.ResourceQuota) []corev1.ScopedResourceSelectorRequirement {
	var out []corev1.ScopedResourceSelectorRequirement
	for _, s := range q.Spec.Scopes {
		out = append(out, corev1.ScopedResourceSelectorRequirement{ScopeName: s, Operator: corev1.ScopeSelectorOpExists})
	}
	if q.Spec.ScopeSelector != nil {
		out = append(out, q.Spec.ScopeSelector.MatchExpressions...)
	}
	return out
}

func podMatchesScope(pod *corev1.Pod, s corev1.ScopedResourceSelectorRequirement) bool {
	switch s.ScopeName {
	case corev1.ResourceQuotaScopeTerminating:
		return pod.Spec.ActiveDeadlineSeconds != nil && *pod.Spec.ActiveDeadlineSeconds >= 0
	case corev1.ResourceQuotaScopeNotTerminating:
		return pod.Spec.ActiveDeadlineSeconds == nil || *pod.Spec.ActiveDeadlineSeconds < 0
	case corev1.ResourceQuotaScopeBestEffort:
		return bestEffort(pod)
	case corev1.ResourceQuotaScopeNotBestEffort:
		return !bestEffort(pod)
	case corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		return crossNamespace(pod)
	case corev1.ResourceQuotaScopePriorityClass:
		class := pod.Spec.PriorityClassName
		switch s.Operator {
		case corev1.ScopeSelectorOpExists:
			return class != ""
		case corev1.ScopeSelectorOpDoesNotExist:
			return class == ""
		case corev1.ScopeSelectorOpIn:
			return slices.Contains(s.Values, class)
		case corev1.ScopeSelectorOpNotIn:
			return !slices.Contains(s.Values, class)
		}
	}
	return false
}

// bestEffort: the pod's QoS class (set when it was created) is
// BestEffort, or, without one, no container asks for cpu or memory.
func bestEffort(pod *corev1.Pod) bool {
	if c := pod.Status.QOSClass; c != "" {
		return c == corev1.PodQOSBestEffort
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, l := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
				if _, ok := l[corev1.ResourceCPU]; ok {
					return false
				}
				if _, ok := l[corev1.ResourceMemory]; ok {
					return false
				}
			}
		}
	}
	return true
}

// crossNamespace: one of the pod's affinity terms names namespaces or
// selects them.
func crossNamespace(pod *corev1.Pod) bool {
	aff := pod.Spec.Affinity
	if aff == nil {
		return false
	}
	var terms []corev1.PodAffinityTerm
	if a := aff.PodAffinity; a != nil {
		terms = append(terms, a.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range a.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	if a := aff.PodAntiAffinity; a != nil {
		terms = append(terms, a.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range a.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	for _, t := range terms {
		if len(t.Namespaces) > 0 || t.NamespaceSelector != nil {
			return true
		}
	}
	return false
}

// Mask keeps the resources of l that names has.
func Mask(l corev1.ResourceList, names corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range l {
		if _, ok := names[name]; ok {
			out[name] = q.DeepCopy()
		}
	}
	return out
}

// Add sums two lists.
func Add(a, b corev1.ResourceList) corev1.ResourceList {
	out := a.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	for name, q := range b {
		sum := out[name]
		sum.Add(q)
		out[name] = sum
	}
	return out
}

// Exceeded lists, sorted, the resources whose use is above hard.
func Exceeded(use, hard corev1.ResourceList) []corev1.ResourceName {
	var out []corev1.ResourceName
	for name, q := range use {
		if h, ok := hard[name]; ok && q.Cmp(h) > 0 {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// String prints a list as Kubernetes' quota errors do:
// requests.cpu=500m,pods=1, sorted by name.
func String(l corev1.ResourceList) string {
	names := make([]string, 0, len(l))
	for name := range l {
		names = append(names, string(name))
	}
	slices.Sort(names)
	parts := make([]string, 0, len(names))
	for _, name := range names {
		q := l[corev1.ResourceName(name)]
		parts = append(parts, name+"="+q.String())
	}
	return strings.Join(parts, ",")
}

// mustSpecify are the resources that, when a quota limits them, every
// container must ask for explicitly (a rule Kubernetes keeps for
// compatibility).
var mustSpecify = []corev1.ResourceName{"cpu", "limits.cpu", "limits.memory", "memory", "requests.cpu", "requests.memory"}

// MissingRequests says which of the compute resources the quota limits
// some of the pod's containers do not ask for ("" if none): "must specify
// limits.cpu for: app; requests.memory for: app,sidecar".
func MissingRequests(pod *corev1.Pod, hard corev1.ResourceList) string {
	missing := map[corev1.ResourceName][]string{}
	check := func(c *corev1.Container) {
		for _, name := range mustSpecify {
			if _, limited := hard[name]; !limited {
				continue
			}
			var ok bool
			switch {
			case strings.HasPrefix(string(name), "limits."):
				_, ok = c.Resources.Limits[corev1.ResourceName(strings.TrimPrefix(string(name), "limits."))]
			default:
				_, ok = c.Resources.Requests[corev1.ResourceName(strings.TrimPrefix(string(name), "requests."))]
			}
			if !ok {
				missing[name] = append(missing[name], c.Name)
			}
		}
	}
	for i := range pod.Spec.Containers {
		check(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.InitContainers {
		check(&pod.Spec.InitContainers[i])
	}
	if len(missing) == 0 {
		return ""
	}
	var parts []string
	for _, name := range mustSpecify {
		if names, ok := missing[name]; ok {
			slices.Sort(names)
			parts = append(parts, fmt.Sprintf("%s for: %s", name, strings.Join(names, ",")))
		}
	}
	return "must specify " + strings.Join(parts, "; ")
}
