// Package endpoints is the Endpoints controller and the EndpointSlice
// mirroring controller, in one loop keyed by Service.
package endpoints

import (
	"cmp"
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
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/controllers/kit"
	"github.com/isle-cluster/isle/control/registry"
)

// Controller keeps, for each Service of the cluster, what Kubernetes' two
// controllers of core/v1 Endpoints keep:
//   - a Service with a selector has Endpoints of its name made from the
//     EndpointSlices the EndpointSlice controller keeps for it: ready
//     endpoints are its addresses, the others its notReadyAddresses
//     (terminating ones are left out), one subset per set of ports, the
//     addresses in IP order, at most maxAddresses of them (then the
//     over-capacity annotation says "truncated"); they carry the
//     Service's labels, the headless label and managed-by
//     endpoint-controller, and go when the Service goes;
//   - a Service without a selector keeps the Endpoints a user writes, and
//     has them mirrored into EndpointSlices managed by
//     endpointslicemirroring-controller.k8s.io (one per subset and address
//     family, at most maxSliceEndpoints endpoints each, owned by the
//     Endpoints), unless the Endpoints are labelled skip-mirror or hold a
//     leader election record; mirrored slices go when mirroring stops.
//
// It watches Services, Endpoints and EndpointSlices and reconciles from a
// work queue, every Service again every resync.
type Controller struct {
	store *registry.Store
	log   *slog.Logger
}

// New returns the Endpoints controller.
func New(store *registry.Store, log *slog.Logger) *Controller {
	return &Controller{store: store, log: log}
}

// Name is the controller's name in the table.
func (c *Controller) Name() string { return "endpoints" }

const (
	resync    = 30 * time.Second
	workers   = 2
	retryBase = 20 * time.Millisecond
	retryMax  = time.Minute
	// maxAddresses is the most addresses Endpoints of a Service with a
	// selector hold, as upstream's maxCapacity; maxMirrored the most of a
	// subset mirrored; maxSliceEndpoints the most in one mirrored slice.
	maxAddresses      = 1000
	maxMirrored       = 1000
	maxSliceEndpoints = 100

	// managedByLabel and controllerName mark Endpoints of this controller,
	// as upstream's endpoint controller does.
	managedByLabel = "endpoints.kubernetes.io/managed-by"
	controllerName = "endpoint-controller"
	// slicesManagedBy are the slices made from Pods (endpointslice
	// controller), mirroredBy those mirrored from Endpoints.
	slicesManagedBy = "endpointslice-controller.k8s.io"
	mirroredBy      = "endpointslicemirroring-controller.k8s.io"
	// leaderAnnotation marks an Endpoints object used as a leader
	// election lock (client-go's resourcelock), never mirrored.
	leaderAnnotation = "control-plane.alpha.kubernetes.io/leader"
	truncated        = "truncated"
)

var endpointsKind = corev1.SchemeGroupVersion.WithKind("Endpoints")

type run struct {
	*Controller
	services  *registry.Resource
	endpoints *registry.Resource
	slices    *registry.Resource
	queue     *kit.Queue

	mu sync.Mutex
	// gone are the Services seen deleted whose Endpoints are not yet:
	// their Endpoints go whoever wrote them, as upstream's.
	gone map[string]bool
}

// Run reconciles until ctx ends (when this member stops leading).
func (c *Controller) Run(ctx context.Context) {
	r := c.newRun()
	var wg sync.WaitGroup
	wg.Go(func() { r.watch(ctx) })
	kit.RunWorkers(ctx, workers, r.queue, func(key string) { r.work(ctx, key) })
	wg.Wait()
}

func (c *Controller) newRun() *run {
	return &run{Controller: c,
		services:  kit.MustLookup(c.store, corev1.SchemeGroupVersion.WithResource("services")),
		endpoints: kit.MustLookup(c.store, corev1.SchemeGroupVersion.WithResource("endpoints")),
		slices:    kit.MustLookup(c.store, discoveryv1.SchemeGroupVersion.WithResource("endpointslices")),
		queue:     kit.NewQueue(retryBase, retryMax),
		gone:      map[string]bool{}}
}

// watch follows Services, Endpoints and slices and queues the Services
// they concern, until ctx ends. Endpoints left by a Service deleted while
// no member led are queued when their watch opens and found then.
func (r *run) watch(ctx context.Context) {
	services := kit.NewCache[*corev1.Service]()
	queueAll := func() {
		for _, key := range services.Keys() {
			r.queue.Add(key)
		}
	}
	loop := kit.Loop{Store: r.store, Log: r.log, Name: "endpoints controller", Resync: queueAll, ResyncEvery: resync}
	loop.Run(ctx,
		services.Watch(r.services, nil, func(typ watch.EventType, _, svc *corev1.Service) {
			key := kit.Key(svc)
			if typ == watch.Deleted {
				r.mu.Lock()
				r.gone[key] = true
				r.mu.Unlock()
			}
			r.queue.Add(key)
		}),
		kit.WatchOf(r.endpoints, nil, func(_ watch.EventType, ep *corev1.Endpoints) {
			r.queue.Add(kit.Key(ep))
		}),
		kit.WatchOf(r.slices, nil, func(_ watch.EventType, s *discoveryv1.EndpointSlice) {
			if by := s.Labels[discoveryv1.LabelManagedBy]; by != slicesManagedBy && by != mirroredBy {
				return
			}
			if name := s.Labels[discoveryv1.LabelServiceName]; name != "" {
				r.queue.Add(s.Namespace + "/" + name)
			}
		}))
}

func (r *run) work(ctx context.Context, key string) {
	if err := r.sync(ctx, key); err != nil && ctx.Err() == nil {
		r.log.Warn("endpoints controller: reconcile failed; will retry", "service", key, "err", err)
		r.queue.Retry(key)
	} else {
		r.queue.Forget(key)
	}
}

// errSkip aborts a Mutate of an object no longer the one decided on.
var errSkip = errors.New("endpoints controller: object changed; skipped")

// sync reconciles the Endpoints and mirrored slices of one Service key.
func (r *run) sync(ctx context.Context, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	svc, err := getAs[*corev1.Service](ctx, r.store, r.services, ns, name)
	if err != nil {
		return err
	}
	ep, err := getAs[*corev1.Endpoints](ctx, r.store, r.endpoints, ns, name)
	if err != nil {
		return err
	}
	// The Service's slices alone are decoded, of the namespace's.
	ofService := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name}).String()
	list, err := r.store.List(ctx, r.slices, ns, metav1.ListOptions{ResourceVersion: "0", LabelSelector: ofService})
	if err != nil {
		return err
	}
	var fromPods, mirrored []*discoveryv1.EndpointSlice
	for i := range list.(*discoveryv1.EndpointSliceList).Items {
		s := &list.(*discoveryv1.EndpointSliceList).Items[i]
		if s.Labels[discoveryv1.LabelServiceName] != name {
			continue
		}
		switch s.Labels[discoveryv1.LabelManagedBy] {
		case slicesManagedBy:
			fromPods = append(fromPods, s)
		case mirroredBy:
			mirrored = append(mirrored, s)
		}
	}
	switch {
	case svc == nil:
		// The Endpoints of a deleted Service go: whoever wrote them when the
		// deletion was seen, this controller's when found later.
		gone := r.takeGone(key)
		var errs []error
		if ep != nil && (gone || ep.Labels[managedByLabel] == controllerName) {
			errs = append(errs, r.delete(ctx, r.endpoints, ep))
		}
		return errors.Join(append(errs, r.deleteAll(ctx, mirrored))...)
	case svc.DeletionTimestamp != nil || svc.Spec.Type == corev1.ServiceTypeExternalName:
		return r.deleteAll(ctx, mirrored)
	case len(svc.Spec.Selector) > 0:
		return errors.Join(r.deleteAll(ctx, mirrored), r.writeEndpoints(ctx, svc, ep, fromPods))
	case ep == nil || ep.Labels[discoveryv1.LabelSkipMirror] == "true" || ep.Annotations[leaderAnnotation] != "":
		return r.deleteAll(ctx, mirrored)
	}
	return r.mirror(ctx, ep, mirrored)
}

// takeGone says whether the Service of key was seen deleted, and forgets
// it. Only a sync that found no Service takes it: one that read the
// Service before its deletion was seen leaves it to the sync the deletion
// queued (it took it, and that sync left a user's Endpoints behind).
func (r *run) takeGone(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	gone := r.gone[key]
	delete(r.gone, key)
	return gone
}

// getAs reads one object at this member's revision; nil if there is none.
func getAs[T runtime.Object](ctx context.Context, store *registry.Store, res *registry.Resource, ns, name string) (T, error) {
	var zero T
	obj, err := store.Get(ctx, res, ns, name, metav1.GetOptions{ResourceVersion: "0"})
	switch {
	case apierrors.IsNotFound(err):
		return zero, nil
	case err != nil:
		return zero, err
	}
	return obj.(T), nil
}

// delete deletes obj, if it is still the object of that UID.
func (r *run) delete(ctx context.Context, res *registry.Resource, obj metav1.Object) error {
	uid := obj.GetUID()
	_, _, err := r.store.Delete(ctx, res, obj.GetNamespace(), obj.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}

func (r *run) deleteAll(ctx context.Context, ss []*discoveryv1.EndpointSlice) error {
	var errs []error
	for _, s := range ss {
		errs = append(errs, r.delete(ctx, r.slices, s))
	}
	return errors.Join(errs...)
}

// writeEndpoints makes svc's Endpoints those of its slices.
func (r *run) writeEndpoints(ctx context.Context, svc *corev1.Service, ep *corev1.Endpoints, from []*discoveryv1.EndpointSlice) error {
	subsets, cut := subsetsOf(from)
	fill := func(e *corev1.Endpoints) bool {
		labels := maps.Clone(svc.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		if svc.Spec.ClusterIP == corev1.ClusterIPNone {
			labels[corev1.IsHeadlessService] = ""
		} else {
			delete(labels, corev1.IsHeadlessService)
		}
		labels[managedByLabel] = controllerName
		annotations := maps.Clone(e.Annotations)
		if cut {
			if annotations == nil {
				annotations = map[string]string{}
			}
			annotations[corev1.EndpointsOverCapacity] = truncated
		} else {
			delete(annotations, corev1.EndpointsOverCapacity)
		}
		if len(annotations) == 0 {
			annotations = nil
		}
		changed := !maps.Equal(e.Labels, labels) || !maps.Equal(e.Annotations, annotations) || !sameList(e.Subsets, subsets)
		e.Labels, e.Annotations, e.Subsets = labels, annotations, subsets
		return changed
	}
	if ep == nil {
		e := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: svc.Namespace}}
		fill(e)
		_, err := r.store.Create(ctx, r.endpoints, svc.Namespace, e, registry.WriteOptions{})
		if err != nil && (kit.NamespaceTerminating(err) || apierrors.IsAlreadyExists(err)) {
			return nil // the namespace goes; or written meanwhile: its event queues the Service again
		}
		return err
	}
	if !fill(ep.DeepCopy()) {
		return nil
	}
	_, err := r.store.Mutate(ctx, r.endpoints, ep.Namespace, ep.Name, "", func(obj runtime.Object) error {
		cur := obj.(*corev1.Endpoints)
		if cur.UID != ep.UID || !fill(cur) {
			return errSkip
		}
		return nil
	})
	if errors.Is(err, errSkip) || apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// subsetsOf is the Endpoints subsets of a Service's slices, and whether
// addresses beyond maxAddresses were left out.
func subsetsOf(from []*discoveryv1.EndpointSlice) ([]corev1.EndpointSubset, bool) {
	type group struct {
		ports           []corev1.EndpointPort
		ready, notReady map[string]corev1.EndpointAddress
	}
	groups := map[string]*group{}
	for _, s := range from {
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		ports := make([]corev1.EndpointPort, 0, len(s.Ports))
		for _, p := range s.Ports {
			ports = append(ports, corev1.EndpointPort{Name: kit.Deref(p.Name), Port: kit.Deref(p.Port),
				Protocol: cmp.Or(kit.Deref(p.Protocol), corev1.ProtocolTCP), AppProtocol: p.AppProtocol})
		}
		k := portsKey(ports)
		g := groups[k]
		if g == nil {
			g = &group{ports: ports, ready: map[string]corev1.EndpointAddress{}, notReady: map[string]corev1.EndpointAddress{}}
			groups[k] = g
		}
		for _, e := range s.Endpoints {
			if len(e.Addresses) == 0 {
				continue
			}
			a := corev1.EndpointAddress{IP: e.Addresses[0], Hostname: kit.Deref(e.Hostname), NodeName: e.NodeName}
			if e.TargetRef != nil {
				ref := *e.TargetRef
				a.TargetRef = &ref
			}
			id := a.IP
			if a.TargetRef != nil {
				id += "/" + string(a.TargetRef.UID)
			}
			switch {
			case kit.Deref(e.Conditions.Ready):
				g.ready[id] = a
			case !kit.Deref(e.Conditions.Terminating):
				g.notReady[id] = a
			}
		}
	}
	keys := slices.Sorted(maps.Keys(groups))
	var out []corev1.EndpointSubset
	room, cut := maxAddresses, false
	take := func(m map[string]corev1.EndpointAddress) []corev1.EndpointAddress {
		ids := slices.SortedFunc(maps.Keys(m), func(a, b string) int { return compareAddr(m[a], m[b]) })
		if len(ids) > room {
			ids, cut = ids[:room], true
		}
		room -= len(ids)
		var as []corev1.EndpointAddress
		for _, id := range ids {
			as = append(as, m[id])
		}
		return as
	}
	for _, k := range keys {
		g := groups[k]
		ss := corev1.EndpointSubset{Addresses: take(g.ready), NotReadyAddresses: take(g.notReady)}
		if len(ss.Addresses)+len(ss.NotReadyAddresses) == 0 {
			continue
		}
		if len(g.ports) > 0 {
			ss.Ports = g.ports
		}
		out = append(out, ss)
	}
	return out, cut
}

// compareAddr orders addresses by IP (as addresses), then by target UID.
func compareAddr(a, b corev1.EndpointAddress) int {
	x, errX := netip.ParseAddr(a.IP)
	y, errY := netip.ParseAddr(b.IP)
	if errX == nil && errY == nil {
		if c := x.Compare(y); c != 0 {
			return c
		}
	} else if c := strings.Compare(a.IP, b.IP); c != 0 {
		return c
	}
	var ua, ub string
	if a.TargetRef != nil {
		ua = string(a.TargetRef.UID)
	}
	if b.TargetRef != nil {
		ub = string(b.TargetRef.UID)
	}
	return strings.Compare(ua, ub)
}

// portsKey identifies a set of ports, whatever their order.
func portsKey(ports []corev1.EndpointPort) string {
	keys := make([]string, len(ports))
	for i, p := range ports {
		keys[i] = p.Name + "/" + string(p.Protocol) + "/" + strconv.Itoa(int(p.Port)) + "/" + kit.Deref(p.AppProtocol)
	}
	slices.Sort(keys)
	return strings.Join(keys, ";")
}

// mirrorSlice is the content of one mirrored slice.
type mirrorSlice struct {
	addressType discoveryv1.AddressType
	ports       []discoveryv1.EndpointPort
	endpoints   []discoveryv1.Endpoint
}

// mirrorOf is the slices ep mirrors into: per subset (ports merged as
// the subsets are), per address family, at most maxSliceEndpoints each.
// Addresses that are not IPs are left out.
func mirrorOf(ep *corev1.Endpoints) []mirrorSlice {
	var out []mirrorSlice
	for _, ss := range repack(ep.Subsets) {
		ports := make([]discoveryv1.EndpointPort, 0, len(ss.Ports))
		for _, p := range ss.Ports {
			name, port, proto := p.Name, p.Port, cmp.Or(p.Protocol, corev1.ProtocolTCP)
			ports = append(ports, discoveryv1.EndpointPort{Name: &name, Port: &port, Protocol: &proto, AppProtocol: p.AppProtocol})
		}
		byType := map[discoveryv1.AddressType][]discoveryv1.Endpoint{}
		n := 0
		add := func(as []corev1.EndpointAddress, ready bool) {
			for _, a := range as {
				ip, err := netip.ParseAddr(a.IP)
				if err != nil || n == maxMirrored {
					continue
				}
				n++
				t := discoveryv1.AddressTypeIPv4
				if ip.Unmap().Is6() {
					t = discoveryv1.AddressTypeIPv6
				}
				e := discoveryv1.Endpoint{Addresses: []string{ip.Unmap().String()}, Conditions: discoveryv1.EndpointConditions{Ready: &ready},
					NodeName: a.NodeName}
				if a.Hostname != "" {
					h := a.Hostname
					e.Hostname = &h
				}
				if a.TargetRef != nil {
					ref := *a.TargetRef
					e.TargetRef = &ref
				}
				byType[t] = append(byType[t], e)
			}
		}
		add(ss.Addresses, true)
		add(ss.NotReadyAddresses, false)
		for _, t := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
			for eps := range slices.Chunk(byType[t], maxSliceEndpoints) {
				out = append(out, mirrorSlice{addressType: t, ports: ports, endpoints: eps})
			}
		}
	}
	return out
}

// repack merges the subsets with the same ports, as upstream's
// RepackSubsets: one subset per set of ports, in a stable order.
func repack(in []corev1.EndpointSubset) []corev1.EndpointSubset {
	byPorts := map[string]*corev1.EndpointSubset{}
	var order []string
	for _, ss := range in {
		k := portsKey(ss.Ports)
		g := byPorts[k]
		if g == nil {
			g = &corev1.EndpointSubset{Ports: ss.Ports}
			byPorts[k] = g
			order = append(order, k)
		}
		g.Addresses = append(g.Addresses, ss.Addresses...)
		g.NotReadyAddresses = append(g.NotReadyAddresses, ss.NotReadyAddresses...)
	}
	out := make([]corev1.EndpointSubset, 0, len(order))
	for _, k := range order {
		out = append(out, *byPorts[k])
	}
	return out
}

// mirror makes the mirrored slices of ep those of mirrorOf, reusing the
// existing ones of the same address type in name order.
func (r *run) mirror(ctx context.Context, ep *corev1.Endpoints, existing []*discoveryv1.EndpointSlice) error {
	slices.SortFunc(existing, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	used := map[*discoveryv1.EndpointSlice]bool{}
	var errs []error
	for _, w := range mirrorOf(ep) {
		var old *discoveryv1.EndpointSlice
		for _, s := range existing {
			if !used[s] && s.AddressType == w.addressType {
				old, used[s] = s, true
				break
			}
		}
		errs = append(errs, r.writeMirror(ctx, ep, old, w))
	}
	for _, s := range existing {
		if !used[s] {
			errs = append(errs, r.delete(ctx, r.slices, s))
		}
	}
	return errors.Join(errs...)
}

// fillMirror sets s to the mirrored slice w of ep; it reports whether
// anything changed.
func fillMirror(s *discoveryv1.EndpointSlice, ep *corev1.Endpoints, w mirrorSlice) bool {
	labels := maps.Clone(ep.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[discoveryv1.LabelServiceName] = ep.Name
	labels[discoveryv1.LabelManagedBy] = mirroredBy
	annotations := maps.Clone(ep.Annotations)
	delete(annotations, corev1.EndpointsLastChangeTriggerTime)
	delete(annotations, corev1.LastAppliedConfigAnnotation)
	if len(annotations) == 0 {
		annotations = nil
	}
	owners := []metav1.OwnerReference{*metav1.NewControllerRef(ep, endpointsKind)}
	changed := !maps.Equal(s.Labels, labels) || !maps.Equal(s.Annotations, annotations) ||
		!equality.Semantic.DeepEqual(s.OwnerReferences, owners) || s.AddressType != w.addressType ||
		!sameList(s.Ports, w.ports) || !sameList(s.Endpoints, w.endpoints)
	s.Labels, s.Annotations, s.OwnerReferences = labels, annotations, owners
	s.AddressType, s.Ports, s.Endpoints = w.addressType, w.ports, w.endpoints
	return changed
}

// sameList compares lists, an empty one equal to nil.
func sameList[T any](a, b []T) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return equality.Semantic.DeepEqual(a, b)
}

// writeMirror creates a mirrored slice (old nil) or updates old if it
// differs from w.
func (r *run) writeMirror(ctx context.Context, ep *corev1.Endpoints, old *discoveryv1.EndpointSlice, w mirrorSlice) error {
	if old == nil {
		s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{GenerateName: ep.Name + "-", Namespace: ep.Namespace}}
		fillMirror(s, ep, w)
		_, err := r.store.Create(ctx, r.slices, ep.Namespace, s, registry.WriteOptions{})
		if err != nil && kit.NamespaceTerminating(err) {
			return nil
		}
		return err
	}
	if !fillMirror(old.DeepCopy(), ep, w) {
		return nil
	}
	_, err := r.store.Mutate(ctx, r.slices, old.Namespace, old.Name, "", func(obj runtime.Object) error {
		cur := obj.(*discoveryv1.EndpointSlice)
		if cur.UID != old.UID || cur.DeletionTimestamp != nil || !fillMirror(cur, ep, w) {
			return errSkip
		}
		return nil
	})
	if errors.Is(err, errSkip) || apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
