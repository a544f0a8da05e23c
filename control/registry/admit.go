package registry

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/isle-cluster/isle/raft/kv"
)

// Keys under which allocations are claimed in the same transaction as the
// object that holds them, so two creates can never get the same address.
const (
	serviceIPClaims = "/registry/ranges/serviceips/"
	nodePortClaims  = "/registry/ranges/nodeports/"
)

// NodePort range, as Kubernetes' default.
const (
	nodePortMin = 30000
	nodePortMax = 32767
)

// prepareStatusOnCreate sets what the server owns in a new object's status.
func prepareStatusOnCreate(obj runtime.Object) {
	switch o := obj.(type) {
	case *corev1.Pod:
		o.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: qosClass(o)}
	case *corev1.Namespace:
		o.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
		if len(o.Spec.Finalizers) == 0 {
			o.Spec.Finalizers = []corev1.FinalizerName{FinalizerNamespace}
		}
	case *corev1.PersistentVolume:
		o.Status = corev1.PersistentVolumeStatus{Phase: corev1.VolumePending}
	case *corev1.PersistentVolumeClaim:
		o.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}
	case *corev1.Node:
		// The node agent reports its status with the Node: keep it.
	default:
		clearStatus(obj) // controllers own the status of everything else
	}
}

// clearStatus zeroes an object's status, if it has one.
func clearStatus(obj runtime.Object) {
	if st := reflect.ValueOf(obj).Elem().FieldByName("Status"); st.IsValid() && st.CanSet() {
		st.Set(reflect.Zero(st.Type()))
	}
}

// qosClass computes a pod's quality-of-service class as Kubernetes does.
func qosClass(p *corev1.Pod) corev1.PodQOSClass {
	requests, limits := 0, 0
	guaranteed := true
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, hasReq := c.Resources.Requests[name]
			lim, hasLim := c.Resources.Limits[name]
			if hasReq && !req.IsZero() {
				requests++
			}
			if hasLim && !lim.IsZero() {
				limits++
			}
			if !hasLim || (hasReq && req.Cmp(lim) != 0) {
				guaranteed = false
			}
		}
	}
	switch {
	case requests == 0 && limits == 0:
		return corev1.PodQOSBestEffort
	case guaranteed:
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

// admitCreate runs the admission checks of a create: the namespace must
// exist and not be terminating; a Service gets its cluster IP and node ports;
// volumes and claims get the storage admission (admit_storage.go), an
// Ingress naming no class the default IngressClass (admit_networking.go).
func (s *Store) admitCreate(ctx context.Context, r *Resource, obj runtime.Object) error {
	m, _ := meta.Accessor(obj)
	if r.Namespaced {
		nsr, _ := s.resources.Lookup(corev1.SchemeGroupVersion.WithResource("namespaces"))
		nsObj, err := s.Get(ctx, nsr, "", m.GetNamespace(), metav1.GetOptions{ResourceVersion: "0"})
		if apierrors.IsNotFound(err) {
			return apierrors.NewNotFound(nsr.GroupVersionResource.GroupResource(), m.GetNamespace())
		}
		if err != nil {
			return err
		}
		if nsObj.(*corev1.Namespace).Status.Phase == corev1.NamespaceTerminating {
			return apierrors.NewForbidden(r.GroupVersionResource.GroupResource(), m.GetName(),
				fmt.Errorf("unable to create new content in namespace %s because it is being terminated", m.GetNamespace()))
		}
	}
	switch o := obj.(type) {
	case *corev1.Service:
		return s.allocateService(o)
	case *corev1.PersistentVolume:
		o.Finalizers = addFinalizer(o.Finalizers, FinalizerPVProtection)
	case *corev1.PersistentVolumeClaim:
		o.Finalizers = addFinalizer(o.Finalizers, FinalizerPVCProtection)
		return s.admitDefaultStorageClass(ctx, o)
	case *networkingv1.Ingress:
		return s.admitDefaultIngressClass(ctx, o)
	}
	return nil
}

// allocateService gives a Service a cluster IP from the service range
// (unless headless, ExternalName or given one) and node ports to
// NodePort and LoadBalancer ports that lack one.
func (s *Store) allocateService(svc *corev1.Service) error {
	path := field.NewPath("spec")
	if svc.Spec.Type != corev1.ServiceTypeExternalName && svc.Spec.ClusterIP != corev1.ClusterIPNone {
		if svc.Spec.ClusterIP == "" {
			ip, err := s.freeServiceIP()
			if err != nil {
				return err
			}
			svc.Spec.ClusterIP = ip
		} else if addr, err := netip.ParseAddr(svc.Spec.ClusterIP); err != nil || !s.ServiceCIDR().Contains(addr) {
			return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), svc.Name, field.ErrorList{
				field.Invalid(path.Child("clusterIP"), svc.Spec.ClusterIP, "must be an address in the service range "+s.ServiceCIDR().String())})
		}
		svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		svc.Spec.ClusterIPs = []string{corev1.ClusterIPNone}
	}
	if needsNodePorts(svc.Spec.Type) {
		return s.fillNodePorts(svc)
	}
	return nil
}

func needsNodePorts(t corev1.ServiceType) bool {
	return t == corev1.ServiceTypeNodePort || t == corev1.ServiceTypeLoadBalancer
}

// fillNodePorts gives a free node port to every port of svc without one.
func (s *Store) fillNodePorts(svc *corev1.Service) error {
	used := map[int32]bool{}
	for _, p := range svc.Spec.Ports {
		used[p.NodePort] = true
	}
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].NodePort != 0 {
			continue
		}
		port, err := s.freeNodePort(used)
		if err != nil {
			return err
		}
		used[port] = true
		svc.Spec.Ports[i].NodePort = port
	}
	return nil
}

// ServiceCIDR is the range cluster IPs come from.
func (s *Store) ServiceCIDR() netip.Prefix { return s.serviceRange }

// DefaultServiceCIDR is the default service range; its first address is
// the kubernetes Service and its tenth the cluster DNS.
var DefaultServiceCIDR = netip.MustParsePrefix("10.43.0.0/16")

func (s *Store) freeServiceIP() (string, error) {
	p := s.ServiceCIDR()
	base := p.Addr().As4()
	size := uint32(1) << (32 - p.Bits())
	start := binary.BigEndian.Uint32(base[:])
	for try := 0; try < 64; try++ {
		off := 11 + rand.Uint32N(size-12) // skip the network, .1 (kubernetes) to .10 (DNS), broadcast
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], start+off)
		ip := netip.AddrFrom4(b).String()
		if _, taken, _ := s.node.KV().Get(serviceIPClaims + ip); !taken {
			return ip, nil
		}
	}
	return "", apierrors.NewInternalError(fmt.Errorf("no free cluster IP found in %s", p))
}

func (s *Store) freeNodePort(used map[int32]bool) (int32, error) {
	for try := 0; try < 64; try++ {
		port := int32(nodePortMin + rand.IntN(nodePortMax-nodePortMin+1))
		if used[port] {
			continue
		}
		if _, taken, _ := s.node.KV().Get(nodePortClaims + strconv.Itoa(int(port))); !taken {
			return port, nil
		}
	}
	return 0, apierrors.NewInternalError(fmt.Errorf("no free node port found in %d-%d", nodePortMin, nodePortMax))
}

// claimsOf lists the claim keys a new object takes, created in the same
// transaction (IfModRev 0: a concurrent claim makes the create fail).
func claimsOf(obj runtime.Object) []kv.Op {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return nil
	}
	var ops []kv.Op
	owner := []byte(svc.Namespace + "/" + svc.Name)
	if svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone {
		ops = append(ops, kv.Op{Type: kv.OpPut, Key: serviceIPClaims + svc.Spec.ClusterIP, Value: owner, IfModRev: 0})
	}
	for _, p := range svc.Spec.Ports {
		if p.NodePort != 0 {
			ops = append(ops, kv.Op{Type: kv.OpPut, Key: nodePortClaims + strconv.Itoa(int(p.NodePort)), Value: owner, IfModRev: 0})
		}
	}
	return ops
}

// releasesOf lists the claims an object gives back when it is removed.
func releasesOf(obj runtime.Object) []kv.Op {
	var ops []kv.Op
	for _, c := range claimsOf(obj) {
		ops = append(ops, kv.Op{Type: kv.OpDelete, Key: c.Key, IfModRev: -1})
	}
	return ops
}

// carryAllocations keeps what the server allocated to a Service (cluster
// IPs, node ports) when an update leaves it out, as Kubernetes does.
func carryAllocations(obj, old runtime.Object) {
	svc, ok := obj.(*corev1.Service)
	prev, ok2 := old.(*corev1.Service)
	if !ok || !ok2 {
		return
	}
	if svc.Spec.ClusterIP == "" && svc.Spec.Type != corev1.ServiceTypeExternalName {
		svc.Spec.ClusterIP = prev.Spec.ClusterIP
		svc.Spec.ClusterIPs = prev.Spec.ClusterIPs
	}
	if len(svc.Spec.ClusterIPs) == 0 && svc.Spec.ClusterIP == prev.Spec.ClusterIP {
		svc.Spec.ClusterIPs = prev.Spec.ClusterIPs
	}
	if !needsNodePorts(svc.Spec.Type) {
		return
	}
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if p.NodePort != 0 {
			continue
		}
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		for _, q := range prev.Spec.Ports {
			if q.Port == p.Port && q.Protocol == proto && q.NodePort != 0 {
				p.NodePort = q.NodePort
			}
		}
	}
}

// updateAllocations applies a Service update's type change as Kubernetes
// does: fields that only the old type needs are dropped when the client
// left them as they were, and what the new type needs (node ports, a
// cluster IP) is allocated.
func (s *Store) updateAllocations(obj, old runtime.Object) error {
	svc, ok := obj.(*corev1.Service)
	prev, ok2 := old.(*corev1.Service)
	if !ok || !ok2 {
		return nil
	}
	if !needsNodePorts(svc.Spec.Type) && needsNodePorts(prev.Spec.Type) {
		for i := range svc.Spec.Ports {
			for _, q := range prev.Spec.Ports {
				if svc.Spec.Ports[i].NodePort == q.NodePort {
					svc.Spec.Ports[i].NodePort = 0
				}
			}
		}
		if svc.Spec.ExternalTrafficPolicy == prev.Spec.ExternalTrafficPolicy {
			svc.Spec.ExternalTrafficPolicy = ""
		}
		if svc.Spec.HealthCheckNodePort == prev.Spec.HealthCheckNodePort {
			svc.Spec.HealthCheckNodePort = 0
		}
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer && prev.Spec.Type == corev1.ServiceTypeLoadBalancer &&
		svc.Spec.AllocateLoadBalancerNodePorts != nil && prev.Spec.AllocateLoadBalancerNodePorts != nil &&
		*svc.Spec.AllocateLoadBalancerNodePorts == *prev.Spec.AllocateLoadBalancerNodePorts {
		svc.Spec.AllocateLoadBalancerNodePorts = nil
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName && prev.Spec.Type != corev1.ServiceTypeExternalName &&
		svc.Spec.ClusterIP == prev.Spec.ClusterIP {
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "", nil
		svc.Spec.IPFamilies, svc.Spec.IPFamilyPolicy = nil, nil
	}
	if svc.Spec.Type != corev1.ServiceTypeExternalName && prev.Spec.Type == corev1.ServiceTypeExternalName && svc.Spec.ClusterIP == "" {
		ip, err := s.freeServiceIP()
		if err != nil {
			return err
		}
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs = ip, []string{ip}
	}
	if needsNodePorts(svc.Spec.Type) {
		return s.fillNodePorts(svc)
	}
	return nil
}

// claimChanges lists the claim operations of an update: new allocations
// claimed (IfModRev 0), dropped ones released.
func claimChanges(old, obj runtime.Object) []kv.Op {
	had := map[string]bool{}
	for _, c := range claimsOf(old) {
		had[c.Key] = true
	}
	var ops []kv.Op
	for _, c := range claimsOf(obj) {
		if had[c.Key] {
			delete(had, c.Key)
			continue
		}
		ops = append(ops, c)
	}
	for key := range had {
		ops = append(ops, kv.Op{Type: kv.OpDelete, Key: key, IfModRev: -1})
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].Key < ops[j].Key }) // deterministic requests
	return ops
}

// requested reports whether the client asked for the allocation under key
// (a cluster IP or node port it gave), rather than the allocator picking it.
func requested(orig runtime.Object, key string) bool {
	for _, c := range claimsOf(orig) {
		if c.Key == key {
			return true
		}
	}
	return false
}

// allocationInvalid is Kubernetes' answer to a requested address or port
// that is taken.
func allocationInvalid(r *Resource, name, key string) error {
	var path *field.Path
	var value, what string
	switch {
	case strings.HasPrefix(key, serviceIPClaims):
		path, value, what = field.NewPath("spec", "clusterIPs"), strings.TrimPrefix(key, serviceIPClaims), "IP"
	default:
		path, value, what = field.NewPath("spec", "ports").Child("nodePort"), strings.TrimPrefix(key, nodePortClaims), "node port"
	}
	return apierrors.NewInvalid(r.GVK().GroupKind(), name, field.ErrorList{
		field.Invalid(path, value, fmt.Sprintf("failed to allocate %s %s: provided %s is already allocated", what, value, what))})
}
