package registry

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/isle-cluster/isle/control/quota"
	"github.com/isle-cluster/isle/raft/kv"
)

// limitRangerAnnotation lists what the LimitRanger set on a pod.
const limitRangerAnnotation = "kubernetes.io/limit-ranger"

// list lists a kind's objects of one namespace, from the store's latest.
func (s *Store) list(ctx context.Context, resource, ns string) (runtime.Object, error) {
	r, ok := s.resources.Lookup(corev1.SchemeGroupVersion.WithResource(resource))
	if !ok {
		return nil, fmt.Errorf("registry: %s not served", resource)
	}
	return s.List(ctx, r, ns, metav1.ListOptions{ResourceVersion: "0"})
}

// admitLimits applies the namespace's LimitRanges to a new pod or claim,
// as Kubernetes' LimitRanger admission plugin: a pod's containers get
// the default requests and limits of the Container limits (noted in the
// kubernetes.io/limit-ranger annotation), then every container, the pod
// and a claim are held to the min, max and maxLimitRequestRatio; what
// breaks them is refused with 403 and upstream's messages.
func (s *Store) admitLimits(ctx context.Context, obj runtime.Object) error {
	m, _ := meta.Accessor(obj)
	list, err := s.list(ctx, "limitranges", m.GetNamespace())
	if err != nil {
		return err
	}
	ranges := list.(*corev1.LimitRangeList).Items
	if len(ranges) == 0 {
		return nil
	}
	var errs []error
	switch o := obj.(type) {
	case *corev1.Pod:
		for i := range ranges {
			defaultContainers(o, &ranges[i])
		}
		for i := range ranges {
			errs = append(errs, podLimitErrors(o, &ranges[i])...)
		}
	case *corev1.PersistentVolumeClaim:
		for i := range ranges {
			for _, l := range ranges[i].Spec.Limits {
				if l.Type != corev1.LimitTypePersistentVolumeClaim {
					continue
				}
				for _, k := range sortedNames(l.Min) {
					errs = appendErr(errs, minConstraint(l.Type, k, l.Min[k], o.Spec.Resources.Requests, nil))
				}
				for _, k := range sortedNames(l.Max) {
					errs = appendErr(errs, maxRequestConstraint(l.Type, k, l.Max[k], o.Spec.Resources.Requests))
				}
			}
		}
	}
	if len(errs) > 0 {
		gr := corev1.Resource("pods")
		if _, ok := obj.(*corev1.PersistentVolumeClaim); ok {
			gr = corev1.Resource("persistentvolumeclaims")
		}
		return apierrors.NewForbidden(gr, m.GetName(), utilerrors.NewAggregate(errs))
	}
	// The defaults are validated as kube-apiserver validates what its
	// mutating admission set: a default limit below a request the pod
	// makes is refused (422).
	if pod, ok := obj.(*corev1.Pod); ok && pod.Annotations[limitRangerAnnotation] != "" {
		r, _ := s.resources.Lookup(corev1.SchemeGroupVersion.WithResource("pods"))
		if errs := r.Strategy.ValidateCreate(pod); len(errs) > 0 {
			return invalid(r, pod.Name, errs)
		}
	}
	return nil
}

func appendErr(errs []error, err error) []error {
	if err != nil {
		return append(errs, err)
	}
	return errs
}

func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(l))
	for k := range l {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// defaultContainers gives the pod's containers the Container limit's
// default requests and limits they do not set.
func defaultContainers(pod *corev1.Pod, lr *corev1.LimitRange) {
	var requests, limits corev1.ResourceList
	for _, l := range lr.Spec.Limits {
		if l.Type == corev1.LimitTypeContainer {
			requests, limits = l.DefaultRequest, l.Default
		}
	}
	var notes []string
	merge := func(c *corev1.Container, kind string) {
		set := func(into *corev1.ResourceList, from corev1.ResourceList) []string {
			var names []string
			for _, k := range sortedNames(from) {
				if _, ok := (*into)[k]; !ok {
					if *into == nil {
						*into = corev1.ResourceList{}
					}
					(*into)[k] = from[k].DeepCopy()
					names = append(names, string(k))
				}
			}
			return names
		}
		if names := set(&c.Resources.Limits, limits); len(names) > 0 {
			defer func() { notes = append(notes, strings.Join(names, ", ")+" limit for "+kind+" "+c.Name) }()
		}
		if names := set(&c.Resources.Requests, requests); len(names) > 0 {
			notes = append(notes, strings.Join(names, ", ")+" request for "+kind+" "+c.Name)
		}
	}
	for i := range pod.Spec.Containers {
		merge(&pod.Spec.Containers[i], "container")
	}
	for i := range pod.Spec.InitContainers {
		merge(&pod.Spec.InitContainers[i], "init container")
	}
	if len(notes) > 0 {
		metav1.SetMetaDataAnnotation(&pod.ObjectMeta, limitRangerAnnotation, "LimitRanger plugin set: "+strings.Join(notes, "; "))
	}
}

// podLimitErrors holds every container (Container limits) and the whole
// pod (Pod limits) to the LimitRange.
func podLimitErrors(pod *corev1.Pod, lr *corev1.LimitRange) []error {
	var errs []error
	check := func(typ corev1.LimitType, l *corev1.LimitRangeItem, requests, limits corev1.ResourceList) {
		for _, k := range sortedNames(l.Min) {
			errs = appendErr(errs, minConstraint(typ, k, l.Min[k], requests, limits))
		}
		for _, k := range sortedNames(l.Max) {
			errs = appendErr(errs, maxConstraint(typ, k, l.Max[k], requests, limits))
		}
		for _, k := range sortedNames(l.MaxLimitRequestRatio) {
			errs = appendErr(errs, ratioConstraint(typ, k, l.MaxLimitRequestRatio[k], requests, limits))
		}
	}
	for i := range lr.Spec.Limits {
		l := &lr.Spec.Limits[i]
		switch l.Type {
		case corev1.LimitTypeContainer:
			for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
				for j := range cs {
					check(l.Type, l, cs[j].Resources.Requests, cs[j].Resources.Limits)
				}
			}
		case corev1.LimitTypePod:
			check(l.Type, l, resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}),
				resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{}))
		}
	}
	return errs
}

// comparable returns the values at a common precision: millis when none
// overflows.
func comparable(qs ...resource.Quantity) []int64 {
	out := make([]int64, len(qs))
	milli := true
	for i, q := range qs {
		out[i] = q.Value()
		milli = milli && out[i] <= resource.MaxMilliValue
	}
	if milli {
		for i, q := range qs {
			out[i] = q.MilliValue()
		}
	}
	return out
}

func minConstraint(typ corev1.LimitType, k corev1.ResourceName, min resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[k]
	lim, hasLim := limits[k]
	v := comparable(req, lim, min)
	switch {
	case !hasReq:
		return fmt.Errorf("minimum %s usage per %s is %s.  No request is specified", k, typ, min.String())
	case v[0] < v[2]:
		return fmt.Errorf("minimum %s usage per %s is %s, but request is %s", k, typ, min.String(), req.String())
	case hasLim && v[1] < v[2]:
		return fmt.Errorf("minimum %s usage per %s is %s, but limit is %s", k, typ, min.String(), lim.String())
	}
	return nil
}

func maxRequestConstraint(typ corev1.LimitType, k corev1.ResourceName, max resource.Quantity, requests corev1.ResourceList) error {
	req, hasReq := requests[k]
	v := comparable(req, max)
	switch {
	case !hasReq:
		return fmt.Errorf("maximum %s usage per %s is %s.  No request is specified", k, typ, max.String())
	case v[0] > v[1]:
		return fmt.Errorf("maximum %s usage per %s is %s, but request is %s", k, typ, max.String(), req.String())
	}
	return nil
}

func maxConstraint(typ corev1.LimitType, k corev1.ResourceName, max resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[k]
	lim, hasLim := limits[k]
	v := comparable(req, lim, max)
	switch {
	case !hasLim:
		return fmt.Errorf("maximum %s usage per %s is %s.  No limit is specified", k, typ, max.String())
	case v[1] > v[2]:
		return fmt.Errorf("maximum %s usage per %s is %s, but limit is %s", k, typ, max.String(), lim.String())
	case hasReq && v[0] > v[2]:
		return fmt.Errorf("maximum %s usage per %s is %s, but request is %s", k, typ, max.String(), req.String())
	}
	return nil
}

func ratioConstraint(typ corev1.LimitType, k corev1.ResourceName, ratio resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[k]
	lim, hasLim := limits[k]
	v := comparable(req, lim, ratio)
	if !hasReq || v[0] == 0 {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but no request is specified or request is 0", k, typ, ratio.String())
	}
	if !hasLim || v[1] == 0 {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but no limit is specified or limit is 0", k, typ, ratio.String())
	}
	observed := float64(v[1]) / float64(v[0])
	most := float64(ratio.Value())
	if ratio.Value() <= resource.MaxMilliValue {
		most = float64(ratio.MilliValue()) / 1000
	}
	if observed > most {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but provided ratio is %f", k, typ, ratio.String(), observed)
	}
	return nil
}

// admitQuota charges a new object against its namespace's
// ResourceQuotas, as Kubernetes' ResourceQuota admission plugin: each
// quota that covers the object and limits something it uses gets the use
// added to status.used, unless that would pass status.hard; then the
// object is refused with 403, "exceeded quota: compute, requested:
// requests.cpu=500m, used: requests.cpu=1800m, limited: requests.cpu=2".
// A quota the controller has not counted yet is counted here. A pod must
// ask explicitly for the cpu and memory a quota limits ("failed quota:
// compute: must specify requests.cpu for: app"). It returns the quotas'
// new status as writes for the object's own transaction, each on the
// condition that the quota did not change meanwhile: the charge and the
// object are stored together or not at all, so the controller's recount
// never misses a charged object (a quota that changed makes the create
// try again).
func (s *Store) admitQuota(ctx context.Context, r *Resource, obj runtime.Object) ([]kv.Op, error) {
	m, _ := meta.Accessor(obj)
	ns := m.GetNamespace()
	qr, ok := s.resources.Lookup(corev1.SchemeGroupVersion.WithResource("resourcequotas"))
	if !ok || !r.Namespaced {
		return nil, nil
	}
	list, err := s.List(ctx, qr, ns, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, err
	}
	quotas := list.(*corev1.ResourceQuotaList).Items
	gr := r.GroupVersionResource.GroupResource()
	if len(quotas) == 0 || !quota.Counted(obj, s.now()) {
		return nil, nil
	}
	usage := quota.Usage(gr, obj)
	forbidden := func(err error) error { return apierrors.NewForbidden(gr, m.GetName(), err) }
	var ops []kv.Op
	for i := range quotas {
		q := &quotas[i]
		requested := quota.Mask(usage, q.Spec.Hard)
		if len(requested) == 0 || !quota.Covers(q, gr, obj) {
			continue
		}
		if pod, ok := obj.(*corev1.Pod); ok {
			if msg := quota.MissingRequests(pod, q.Spec.Hard); msg != "" {
				return nil, forbidden(fmt.Errorf("failed quota: %s: %s", q.Name, msg))
			}
		}
		used := q.Status.Used
		if !counted(q) {
			if used, err = CountQuota(ctx, s, q); err != nil {
				return nil, err
			}
		}
		after := quota.Add(used, requested)
		if exceeded := quota.Exceeded(quota.Mask(after, requested), q.Spec.Hard); len(exceeded) > 0 {
			names := corev1.ResourceList{}
			for _, name := range exceeded {
				names[name] = resource.Quantity{}
			}
			return nil, forbidden(fmt.Errorf("exceeded quota: %s, requested: %s, used: %s, limited: %s", q.Name,
				quota.String(quota.Mask(requested, names)), quota.String(quota.Mask(used, names)), quota.String(quota.Mask(q.Spec.Hard, names))))
		}
		rev, err := strconv.ParseInt(q.ResourceVersion, 10, 64)
		if err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("resourcequota %s: resourceVersion %q", q.Name, q.ResourceVersion))
		}
		q.Status.Hard = q.Spec.Hard.DeepCopy()
		q.Status.Used = quota.Mask(after, q.Spec.Hard)
		key := objectKey(qr, ns, q.Name)
		data, err := s.toStore(qr, q)
		if err == nil {
			data, err = s.seal(key, data)
		}
		if err != nil {
			return nil, err
		}
		ops = append(ops, kv.Op{Type: kv.OpPut, Key: key, Value: data, IfModRev: rev})
	}
	return ops, nil
}

// counted reports whether the quota's status counts every resource its
// spec limits.
func counted(q *corev1.ResourceQuota) bool {
	for name, h := range q.Spec.Hard {
		sh, ok := q.Status.Hard[name]
		if _, used := q.Status.Used[name]; !ok || !used || sh.Cmp(h) != 0 {
			return false
		}
	}
	return true
}

// quotaKind is the resource (core/v1) whose objects use a standard quota
// resource; "" for the count/ ones and those of other domains.
func quotaKind(name corev1.ResourceName) string {
	n := string(name)
	switch {
	case n == "pods", n == "cpu", n == "memory", n == "ephemeral-storage",
		strings.HasPrefix(n, "requests.") && n != "requests.storage", strings.HasPrefix(n, "limits."):
		return "pods"
	case strings.HasPrefix(n, "services"):
		return "services"
	case n == "persistentvolumeclaims", n == "requests.storage", strings.Contains(n, ".storageclass.storage.k8s.io/"):
		return "persistentvolumeclaims"
	case n == "configmaps", n == "secrets", n == "replicationcontrollers", n == "resourcequotas":
		return n
	}
	return ""
}

// CountQuota counts what the objects of the quota's namespace use of the
// resources it limits (each at least 0), as the quota controller writes
// in status.used.
func CountQuota(ctx context.Context, s *Store, q *corev1.ResourceQuota) (corev1.ResourceList, error) {
	used := corev1.ResourceList{}
	kinds := map[*Resource]bool{}
	for name := range q.Spec.Hard {
		used[name] = *resource.NewQuantity(0, resource.DecimalSI)
		if k := quotaKind(name); k != "" {
			if r, ok := s.resources.Lookup(corev1.SchemeGroupVersion.WithResource(k)); ok {
				kinds[r] = true
			}
			continue
		}
		if counted, ok := strings.CutPrefix(string(name), "count/"); ok {
			res, group, _ := strings.Cut(counted, ".")
			for _, r := range s.resources.All() {
				if r.Namespaced && r.Group == group && r.Resource == res {
					kinds[r] = true
					break
				}
			}
		}
	}
	now := s.now()
	for r := range kinds {
		list, err := s.List(ctx, r, q.Namespace, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return nil, fmt.Errorf("count quota %s: list %s: %w", q.Name, r.Resource, err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, fmt.Errorf("count quota %s: %w", q.Name, err)
		}
		gr := r.GroupVersionResource.GroupResource()
		for _, obj := range items {
			if quota.Counted(obj, now) && quota.Covers(q, gr, obj) {
				used = quota.Add(used, quota.Mask(quota.Usage(gr, obj), q.Spec.Hard))
			}
		}
	}
	return used, nil
}
