package registry

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
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

// admitCreate runs the admission checks of a create: the namespace must
// exist and not be terminating; then the kind's own admission.
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
	if a := r.Admission; a != nil && a.Create != nil {
		return a.Create(ctx, s, obj)
	}
	return nil
}

// admitUpdate runs the kind's admission of an update of the main resource.
func (s *Store) admitUpdate(ctx context.Context, r *Resource, obj, old runtime.Object) error {
	if a := r.Admission; a != nil && a.Update != nil {
		return a.Update(ctx, s, obj, old)
	}
	return nil
}

// ServiceAdmission allocates a Service's cluster IP and node ports, as
// Kubernetes' Service registry does; they are claimed under keys of their
// own, so two Services never get the same.
var ServiceAdmission = &Admission{
	Create: func(_ context.Context, s *Store, obj runtime.Object) error {
		return s.allocateService(obj.(*corev1.Service))
	},
	Update: func(_ context.Context, s *Store, obj, old runtime.Object) error {
		svc, prev := obj.(*corev1.Service), old.(*corev1.Service)
		carryAllocations(svc, prev)
		return s.updateAllocations(svc, prev)
	},
	Claims: serviceClaims,
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

// serviceClaims lists the cluster IP and node ports a Service holds.
func serviceClaims(obj runtime.Object) []Claim {
	svc := obj.(*corev1.Service)
	var claims []Claim
	owner := []byte(svc.Namespace + "/" + svc.Name)
	if svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone {
		claims = append(claims, Claim{Key: serviceIPClaims + svc.Spec.ClusterIP, Owner: owner})
	}
	for _, p := range svc.Spec.Ports {
		if p.NodePort != 0 {
			claims = append(claims, Claim{Key: nodePortClaims + strconv.Itoa(int(p.NodePort)), Owner: owner})
		}
	}
	return claims
}

// claimsOf lists the claim keys a new object takes, created in the same
// transaction (IfModRev 0: a concurrent claim makes the create fail).
func claimsOf(r *Resource, obj runtime.Object) []kv.Op {
	if r.Admission == nil || r.Admission.Claims == nil {
		return nil
	}
	var ops []kv.Op
	for _, c := range r.Admission.Claims(obj) {
		ops = append(ops, kv.Op{Type: kv.OpPut, Key: c.Key, Value: c.Owner, IfModRev: 0})
	}
	return ops
}

// releasesOf lists the claims an object gives back when it is removed.
func releasesOf(r *Resource, obj runtime.Object) []kv.Op {
	var ops []kv.Op
	for _, c := range claimsOf(r, obj) {
		ops = append(ops, kv.Op{Type: kv.OpDelete, Key: c.Key, IfModRev: -1})
	}
	return ops
}

// carryAllocations keeps what the server allocated to a Service (cluster
// IPs, node ports) when an update leaves it out, as Kubernetes does.
func carryAllocations(svc, prev *corev1.Service) {
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
func (s *Store) updateAllocations(svc, prev *corev1.Service) error {
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
func claimChanges(r *Resource, old, obj runtime.Object) []kv.Op {
	had := map[string]bool{}
	for _, c := range claimsOf(r, old) {
		had[c.Key] = true
	}
	var ops []kv.Op
	for _, c := range claimsOf(r, obj) {
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
func requested(r *Resource, orig runtime.Object, key string) bool {
	for _, c := range claimsOf(r, orig) {
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
