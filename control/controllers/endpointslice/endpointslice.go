// Package endpointslice is the EndpointSlice controller.
package endpointslice

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/registry"
)

// Controller keeps the discovery.k8s.io/v1 EndpointSlices of every
// Service with a selector, as Kubernetes' EndpointSlice controller
// (simplified):
//   - the endpoints are the pods of the Service's namespace that match its
//     selector, have an IPv4 pod IP and have not finished; each has the
//     ready, serving and terminating conditions, nodeName and targetRef;
//   - the ports are the Service's ports with targetPort resolved per pod
//     (a named port that a pod does not declare is left out for that pod),
//     and pods with the same resolved ports share slices of at most
//     esMaxEndpoints endpoints; endpoints stay in the slice they are in;
//   - a Service without endpoints has one empty placeholder slice;
//   - slices are written only when their content changes; slices no longer
//     needed are deleted; slices managed by others are left alone; the
//     slices of a deleted Service go with it (garbage collector).
//
// It watches Services, pods and EndpointSlices and reconciles Services from
// a work queue, every Service again every esResync.
type Controller struct {
	store *registry.Store
	log   *slog.Logger
}

// New returns the EndpointSlice controller.
func New(store *registry.Store, log *slog.Logger) *Controller {
	return &Controller{store: store, log: log}
}

// Name is the controller's name in the table.
func (c *Controller) Name() string { return "endpointslice" }

const (
	esResync       = 30 * time.Second
	esWorkers      = 2
	esMaxEndpoints = 100
	esRetryBase    = 20 * time.Millisecond
	esRetryMax     = time.Minute
	// esManagedBy is the value of discoveryv1.LabelManagedBy on the slices
	// this controller owns.
	esManagedBy = "endpointslice-controller.k8s.io"
)

var esServiceKind = corev1.SchemeGroupVersion.WithKind("Service")

type esRun struct {
	*Controller
	services *registry.Resource
	pods     *registry.Resource
	slices   *registry.Resource
	queue    *kit.Queue
}

// Run reconciles until ctx ends (when this member stops leading).
func (c *Controller) Run(ctx context.Context) {
	r := &esRun{Controller: c,
		services: kit.MustLookup(c.store, corev1.SchemeGroupVersion.WithResource("services")),
		pods:     kit.MustLookup(c.store, corev1.SchemeGroupVersion.WithResource("pods")),
		slices:   kit.MustLookup(c.store, discoveryv1.SchemeGroupVersion.WithResource("endpointslices")),
		queue:    kit.NewQueue(esRetryBase, esRetryMax)}
	var wg sync.WaitGroup
	wg.Go(func() { r.watch(ctx) })
	kit.RunWorkers(ctx, esWorkers, r.queue, func(key string) { r.work(ctx, key) })
	wg.Wait()
}

// watch follows Services, pods and slices and queues the Services they
// concern, until ctx ends.
func (r *esRun) watch(ctx context.Context) {
	services := kit.NewCache[*corev1.Service]()
	pods := kit.NewMetaCache()
	queueAll := func() {
		for _, svc := range services.All() {
			if esWanted(svc) {
				r.queue.Add(kit.Key(svc))
			}
		}
	}
	queueMatching := func(ns string, sets ...labels.Set) {
		for _, svc := range services.List(ns) {
			if !esWanted(svc) {
				continue
			}
			sel := labels.SelectorFromSet(svc.Spec.Selector)
			for _, set := range sets {
				if set != nil && sel.Matches(set) {
					r.queue.Add(kit.Key(svc))
					break
				}
			}
		}
	}
	loop := kit.Loop{Store: r.store, Log: r.log, Name: "endpointslice controller", Resync: queueAll, ResyncEvery: esResync}
	loop.Run(ctx,
		services.Watch(r.services, nil, func(_ watch.EventType, _, svc *corev1.Service) {
			// A Service that lost its selector has its slices removed.
			r.queue.Add(kit.Key(svc))
		}),
		kit.WatchMeta(pods, r.pods, queueAll, func(typ watch.EventType, old, pod *metav1.PartialObjectMetadata) {
			var prev labels.Set
			if old != nil {
				prev = old.Labels
			}
			cur := labels.Set(pod.Labels)
			queueMatching(pod.Namespace, prev, cur)
		}),
		kit.WatchOf(r.slices, nil, func(_ watch.EventType, s *discoveryv1.EndpointSlice) {
			if s.Labels[discoveryv1.LabelManagedBy] != esManagedBy {
				return
			}
			if name := s.Labels[discoveryv1.LabelServiceName]; name != "" {
				r.queue.Add(s.Namespace + "/" + name)
			}
		}))
}

// esWanted reports whether a Service gets slices from this controller.
func esWanted(svc *corev1.Service) bool {
	return len(svc.Spec.Selector) > 0 && svc.Spec.Type != corev1.ServiceTypeExternalName
}

// work reconciles one queued Service.
func (r *esRun) work(ctx context.Context, key string) {
	if err := r.sync(ctx, key); err != nil && ctx.Err() == nil {
		r.log.Warn("endpointslice controller: reconcile failed; will retry", "service", key, "err", err)
		r.queue.Retry(key)
	} else {
		r.queue.Forget(key)
	}
}

// esSkip aborts a Mutate of a slice that is no longer the one decided on.
var esSkip = errors.New("endpointslice controller: slice changed; skipped")

// sync reconciles the slices of one Service.
func (r *esRun) sync(ctx context.Context, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	var svc *corev1.Service
	obj, err := r.store.Get(ctx, r.services, ns, name, metav1.GetOptions{ResourceVersion: "0"})
	switch {
	case apierrors.IsNotFound(err):
		return nil // its slices go with it (garbage collector)
	case err != nil:
		return err
	}
	svc = obj.(*corev1.Service)
	if svc.DeletionTimestamp != nil {
		return nil
	}
	// Its slices and its pods alone are decoded, of the namespace's.
	ours := labels.SelectorFromSet(labels.Set{discoveryv1.LabelManagedBy: esManagedBy, discoveryv1.LabelServiceName: name})
	list, err := r.store.List(ctx, r.slices, ns, metav1.ListOptions{ResourceVersion: "0", LabelSelector: ours.String()})
	if err != nil {
		return err
	}
	var existing []*discoveryv1.EndpointSlice
	var stale []*discoveryv1.EndpointSlice
	for i := range list.(*discoveryv1.EndpointSliceList).Items {
		s := &list.(*discoveryv1.EndpointSliceList).Items[i]
		if s.Labels[discoveryv1.LabelManagedBy] != esManagedBy || s.Labels[discoveryv1.LabelServiceName] != name {
			continue // someone else's, or another Service's
		}
		ref := metav1.GetControllerOf(s)
		if ref != nil && ref.UID != svc.UID || s.AddressType != discoveryv1.AddressTypeIPv4 || !esWanted(svc) {
			stale = append(stale, s)
			continue
		}
		existing = append(existing, s)
	}
	var errs []error
	if esWanted(svc) {
		selector := labels.SelectorFromSet(svc.Spec.Selector)
		podList, err := r.store.List(ctx, r.pods, ns, metav1.ListOptions{ResourceVersion: "0", LabelSelector: selector.String()})
		if err != nil {
			return err
		}
		var pods []*corev1.Pod
		for i := range podList.(*corev1.PodList).Items {
			pod := &podList.(*corev1.PodList).Items[i]
			if selector.Matches(labels.Set(pod.Labels)) {
				pods = append(pods, pod)
			}
		}
		want, unused := esPlan(svc, pods, existing)
		stale = append(stale, unused...)
		for _, w := range want {
			if err := r.write(ctx, svc, w); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, s := range stale {
		uid := s.UID
		_, _, err := r.store.Delete(ctx, r.slices, s.Namespace, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// esSlice is one slice as it should be: old is the stored slice it
// replaces (nil: a new one).
type esSlice struct {
	old       *discoveryv1.EndpointSlice
	ports     []discoveryv1.EndpointPort
	endpoints []discoveryv1.Endpoint
}

// esGroup is the pods with the same resolved ports.
type esGroup struct {
	ports     []discoveryv1.EndpointPort
	endpoints map[string]discoveryv1.Endpoint // by pod name
	order     []string
}

// esPlan returns the slices svc should have, reusing the existing ones
// where possible (endpoints stay in the slice they are in), and the
// existing slices no longer needed.
func esPlan(svc *corev1.Service, pods []*corev1.Pod, existing []*discoveryv1.EndpointSlice) (want []esSlice, unused []*discoveryv1.EndpointSlice) {
	groups := map[string]*esGroup{}
	var groupOrder []string
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	for _, pod := range pods {
		ep, ok := esEndpoint(svc, pod)
		if !ok {
			continue
		}
		ports := esPorts(svc, pod)
		k := esPortsKey(ports)
		g := groups[k]
		if g == nil {
			g = &esGroup{ports: ports, endpoints: map[string]discoveryv1.Endpoint{}}
			groups[k] = g
			groupOrder = append(groupOrder, k)
		}
		g.endpoints[pod.Name] = ep
		g.order = append(g.order, pod.Name)
	}
	// Oldest slices first, so that endpoints gather in the same ones.
	existing = slices.Clone(existing)
	slices.SortStableFunc(existing, func(a, b *discoveryv1.EndpointSlice) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	used := map[*discoveryv1.EndpointSlice]bool{}
	for _, k := range groupOrder {
		g := groups[k]
		placed := map[string]bool{}
		var mine []esSlice
		// Keep the endpoints that are in a slice of these ports there.
		for _, s := range existing {
			if used[s] || esPortsKey(s.Ports) != k {
				continue
			}
			var eps []discoveryv1.Endpoint
			for _, old := range s.Endpoints {
				if old.TargetRef == nil {
					continue
				}
				n := old.TargetRef.Name
				if ep, ok := g.endpoints[n]; ok && !placed[n] && len(eps) < esMaxEndpoints {
					eps = append(eps, ep)
					placed[n] = true
				}
			}
			if len(eps) > 0 {
				used[s] = true
				mine = append(mine, esSlice{old: s, ports: g.ports, endpoints: eps})
			}
		}
		// The rest fill the slices with room, then new ones.
		for _, n := range g.order {
			if placed[n] {
				continue
			}
			i := slices.IndexFunc(mine, func(s esSlice) bool { return len(s.endpoints) < esMaxEndpoints })
			if i < 0 {
				mine = append(mine, esSlice{ports: g.ports})
				i = len(mine) - 1
			}
			mine[i].endpoints = append(mine[i].endpoints, g.endpoints[n])
			placed[n] = true
		}
		want = append(want, mine...)
	}
	if len(want) == 0 {
		// A placeholder: no endpoints, no ports.
		want = []esSlice{{}}
	}
	// New slices take the place of unused existing ones (fewer deletions
	// and creations).
	for i := range want {
		if want[i].old != nil {
			continue
		}
		for _, s := range existing {
			if !used[s] {
				used[s] = true
				want[i].old = s
				break
			}
		}
	}
	for _, s := range existing {
		if !used[s] {
			unused = append(unused, s)
		}
	}
	return want, unused
}

// esEndpoint is pod's endpoint in svc's slices; false if it has none.
func esEndpoint(svc *corev1.Service, pod *corev1.Pod) (discoveryv1.Endpoint, bool) {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return discoveryv1.Endpoint{}, false
	}
	ip := esPodIPv4(pod)
	if ip == "" {
		return discoveryv1.Endpoint{}, false
	}
	serving := kit.PodReady(pod)
	terminating := pod.DeletionTimestamp != nil
	ready := svc.Spec.PublishNotReadyAddresses || serving && !terminating
	ep := discoveryv1.Endpoint{
		Addresses: []string{ip},
		Conditions: discoveryv1.EndpointConditions{
			Ready: &ready, Serving: &serving, Terminating: &terminating,
		},
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
	}
	if pod.Spec.NodeName != "" {
		node := pod.Spec.NodeName
		ep.NodeName = &node
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone && pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name {
		host := pod.Spec.Hostname
		ep.Hostname = &host
	}
	return ep, true
}

// esPodIPv4 is pod's IPv4 address ("" if it has none).
func esPodIPv4(pod *corev1.Pod) string {
	ips := []string{pod.Status.PodIP}
	for _, p := range pod.Status.PodIPs {
		ips = append(ips, p.IP)
	}
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
			return a.String()
		}
	}
	return ""
}

// esPorts is svc's ports as pod serves them; ports with a target port name
// pod does not declare are left out.
func esPorts(svc *corev1.Service, pod *corev1.Pod) []discoveryv1.EndpointPort {
	var out []discoveryv1.EndpointPort
	for _, sp := range svc.Spec.Ports {
		num, ok := esTargetPort(sp, pod)
		if !ok {
			continue
		}
		name, proto := sp.Name, sp.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		p := discoveryv1.EndpointPort{Name: &name, Port: &num, Protocol: &proto}
		if sp.AppProtocol != nil {
			ap := *sp.AppProtocol
			p.AppProtocol = &ap
		}
		out = append(out, p)
	}
	return out
}

func esTargetPort(sp corev1.ServicePort, pod *corev1.Pod) (int32, bool) {
	tp := sp.TargetPort
	switch {
	case tp.Type == intstr.String && tp.StrVal != "":
		proto := sp.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		for _, c := range pod.Spec.Containers {
			for _, cp := range c.Ports {
				cpProto := cp.Protocol
				if cpProto == "" {
					cpProto = corev1.ProtocolTCP
				}
				if cp.Name == tp.StrVal && cpProto == proto {
					return cp.ContainerPort, true
				}
			}
		}
		return 0, false
	case tp.Type == intstr.Int && tp.IntVal != 0:
		return tp.IntVal, true
	case tp.Type == intstr.String:
		// An empty name: the service port.
	}
	return sp.Port, true
}

// esPortsKey identifies a list of ports.
func esPortsKey(ports []discoveryv1.EndpointPort) string {
	var b strings.Builder
	for _, p := range ports {
		b.WriteString(kit.Deref(p.Name))
		b.WriteByte('/')
		b.WriteString(string(kit.Deref(p.Protocol)))
		b.WriteByte('/')
		if p.Port != nil {
			b.WriteString(strconv.Itoa(int(*p.Port)))
		}
		b.WriteByte('/')
		b.WriteString(kit.Deref(p.AppProtocol))
		b.WriteByte(';')
	}
	return b.String()
}

// esLabels are the labels of svc's slices: the Service's own, and the
// controller's.
func esLabels(svc *corev1.Service) map[string]string {
	l := maps.Clone(svc.Labels)
	if l == nil {
		l = map[string]string{}
	}
	l[discoveryv1.LabelServiceName] = svc.Name
	l[discoveryv1.LabelManagedBy] = esManagedBy
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		l[corev1.IsHeadlessService] = ""
	} else {
		delete(l, corev1.IsHeadlessService)
	}
	return l
}

// esFill sets the content of a slice of svc to w; it reports whether
// anything changed.
func esFill(s *discoveryv1.EndpointSlice, svc *corev1.Service, w esSlice) bool {
	want := discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Labels:          esLabels(svc),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(svc, esServiceKind)},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   w.endpoints,
		Ports:       w.ports,
	}
	changed := false
	if !maps.Equal(s.Labels, want.Labels) {
		s.Labels, changed = want.Labels, true
	}
	if !equality.Semantic.DeepEqual(s.OwnerReferences, want.OwnerReferences) {
		s.OwnerReferences, changed = want.OwnerReferences, true
	}
	if s.AddressType != want.AddressType {
		s.AddressType, changed = want.AddressType, true
	}
	if !esEqual(s.Endpoints, want.Endpoints) {
		s.Endpoints, changed = want.Endpoints, true
	}
	if !esEqual(s.Ports, want.Ports) {
		s.Ports, changed = want.Ports, true
	}
	return changed
}

// esEqual compares lists, an empty one equal to nil.
func esEqual[T any](a, b []T) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return equality.Semantic.DeepEqual(a, b)
}

// write creates or updates one slice, only if its content changes.
func (r *esRun) write(ctx context.Context, svc *corev1.Service, w esSlice) error {
	if w.old == nil {
		s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{GenerateName: svc.Name + "-", Namespace: svc.Namespace}}
		esFill(s, svc, w)
		_, err := r.store.Create(ctx, r.slices, svc.Namespace, s, registry.WriteOptions{})
		if err != nil && kit.NamespaceTerminating(err) {
			return nil
		}
		return err
	}
	if !esFill(w.old.DeepCopy(), svc, w) {
		return nil
	}
	_, err := r.store.Mutate(ctx, r.slices, w.old.Namespace, w.old.Name, "", func(obj runtime.Object) error {
		cur := obj.(*discoveryv1.EndpointSlice)
		if cur.UID != w.old.UID || cur.DeletionTimestamp != nil {
			return esSkip
		}
		if !esFill(cur, svc, w) {
			return esSkip
		}
		return nil
	})
	if errors.Is(err, esSkip) || apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
