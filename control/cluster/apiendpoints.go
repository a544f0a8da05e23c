package cluster

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/isle-cluster/isle/control/controllers/nodelifecycle"
	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/raft"
)

// The leader keeps the EndpointSlice of the kubernetes Service (as
// kube-apiserver's endpoint reconciler does): the API addresses of the
// servers whose boards are alive, the leader always among them, so that
// a pod reaches the API at the Service's address (10.43.0.1:443) and a
// server that went away stops being one of its endpoints.

// apiSliceName is the EndpointSlice's name, as upstream's.
const apiSliceName = "kubernetes"

// apiAddresses are the addresses and port of the API endpoints among
// members: the leader's port, and every server that advertises an IPv4
// address (not loopback: a pod cannot reach it) with it and whose board is
// alive; a server whose API is at another port is left out.
func apiAddresses(members []raft.Member, lead uint64, alive map[string]bool) ([]string, int32, error) {
	var port string
	for _, r := range members {
		if r.ID == lead {
			_, port, _ = net.SplitHostPort(r.ClientAddr)
		}
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return nil, 0, fmt.Errorf("the leader's API address has no port")
	}
	addrs := []string{}
	for _, r := range members {
		host, pt, err := net.SplitHostPort(r.ClientAddr)
		ip, ipErr := netip.ParseAddr(host)
		if err != nil || ipErr != nil || !ip.Is4() || ip.IsLoopback() || ip.IsUnspecified() || ip.IsLinkLocalUnicast() ||
			pt != port || r.ID != lead && !alive[r.Name] {
			continue
		}
		addrs = append(addrs, ip.String())
	}
	slices.Sort(addrs)
	return slices.Compact(addrs), int32(p), nil
}

// syncAPIEndpoints writes the slice when it differs from the endpoints
// (read from this server's copy of the store, so that a slice changed or
// deleted by someone is put back within a tick); logged is what it last
// logged.
func (m *membership) syncAPIEndpoints(ctx context.Context, logged *[]string) {
	alive := map[string]bool{}
	for _, b := range m.boards.Boards() {
		alive[b.Name] = b.State == nodelifecycle.BoardAlive
	}
	addrs, port, err := apiAddresses(m.node.Members(), m.node.Leader(), alive)
	if err != nil {
		m.log.Debug("cluster: the kubernetes Service's endpoints", "err", err)
		return
	}
	res, ok := m.store.Resources().Lookup(discoveryv1.SchemeGroupVersion.WithResource("endpointslices"))
	if !ok {
		return
	}
	want := apiSlice(addrs, port)
	obj, err := m.store.Get(ctx, res, metav1.NamespaceDefault, apiSliceName, metav1.GetOptions{ResourceVersion: "0"})
	switch {
	case apierrors.IsNotFound(err):
		_, err = m.store.Create(ctx, res, metav1.NamespaceDefault, want, registry.WriteOptions{})
	case err == nil && !sameAPISlice(obj.(*discoveryv1.EndpointSlice), want):
		_, err = m.store.Mutate(ctx, res, metav1.NamespaceDefault, apiSliceName, "", func(o runtime.Object) error {
			s := o.(*discoveryv1.EndpointSlice)
			s.Labels, s.AddressType, s.Endpoints, s.Ports = want.Labels, want.AddressType, want.Endpoints, want.Ports
			return nil
		})
	}
	if err == nil {
		err = m.syncAPIEndpointsObject(ctx, addrs, port)
	}
	if err != nil {
		if ctx.Err() == nil {
			m.log.Warn("cluster: the kubernetes Service's endpoints; trying again", "err", err)
		}
		return
	}
	if !slices.Equal(addrs, *logged) {
		m.log.Info("cluster: the kubernetes Service's endpoints", "addresses", addrs, "port", port)
		*logged = addrs
	}
}

// syncAPIEndpointsObject keeps the core/v1 Endpoints of the kubernetes
// Service beside its slice, as kube-apiserver does: labelled skip-mirror,
// since the slice is written here too.
func (m *membership) syncAPIEndpointsObject(ctx context.Context, addrs []string, port int32) error {
	res, ok := m.store.Resources().Lookup(corev1.SchemeGroupVersion.WithResource("endpoints"))
	if !ok {
		return nil
	}
	want := apiEndpoints(addrs, port)
	obj, err := m.store.Get(ctx, res, metav1.NamespaceDefault, apiSliceName, metav1.GetOptions{ResourceVersion: "0"})
	switch {
	case apierrors.IsNotFound(err):
		_, err = m.store.Create(ctx, res, metav1.NamespaceDefault, want, registry.WriteOptions{})
		return err
	case err != nil:
		return err
	}
	have := obj.(*corev1.Endpoints)
	if have.Labels[discoveryv1.LabelSkipMirror] == "true" && equality.Semantic.DeepEqual(have.Subsets, want.Subsets) {
		return nil
	}
	_, err = m.store.Mutate(ctx, res, metav1.NamespaceDefault, apiSliceName, "", func(o runtime.Object) error {
		e := o.(*corev1.Endpoints)
		if e.Labels == nil {
			e.Labels = map[string]string{}
		}
		e.Labels[discoveryv1.LabelSkipMirror] = "true"
		e.Subsets = want.Subsets
		return nil
	})
	return err
}

// apiEndpoints is the kubernetes Service's Endpoints for addrs at port.
func apiEndpoints(addrs []string, port int32) *corev1.Endpoints {
	e := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: apiSliceName, Namespace: metav1.NamespaceDefault,
		Labels: map[string]string{discoveryv1.LabelSkipMirror: "true"}}}
	if len(addrs) == 0 {
		return e
	}
	ss := corev1.EndpointSubset{Ports: []corev1.EndpointPort{{Name: "https", Port: port, Protocol: corev1.ProtocolTCP}}}
	for _, a := range addrs {
		ss.Addresses = append(ss.Addresses, corev1.EndpointAddress{IP: a})
	}
	e.Subsets = []corev1.EndpointSubset{ss}
	return e
}

// apiSlice is the kubernetes Service's EndpointSlice for addrs at port.
func apiSlice(addrs []string, port int32) *discoveryv1.EndpointSlice {
	name, proto, ready := "https", corev1.ProtocolTCP, true
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: apiSliceName, Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Protocol: &proto, Port: &port}},
		Endpoints:   []discoveryv1.Endpoint{},
	}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
	}
	return s
}

func sameAPISlice(have, want *discoveryv1.EndpointSlice) bool {
	if have.AddressType != want.AddressType || have.Labels[discoveryv1.LabelServiceName] != "kubernetes" ||
		len(have.Ports) != 1 || have.Ports[0].Port == nil || *have.Ports[0].Port != *want.Ports[0].Port ||
		len(have.Endpoints) != len(want.Endpoints) {
		return false
	}
	for i, e := range have.Endpoints {
		if !slices.Equal(e.Addresses, want.Endpoints[i].Addresses) || e.Conditions.Ready == nil || !*e.Conditions.Ready {
			return false
		}
	}
	return true
}
