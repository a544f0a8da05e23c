package registry_test

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/isle-cluster/isle/control/registry"
	"github.com/isle-cluster/isle/raft"
)

func newService(name string, typ corev1.ServiceType) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			Type:     typ,
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80}},
		},
	}
}

// claimed reports whether the store holds the claim of a cluster IP.
func (e *env) claimed(ip string) bool {
	_, ok, _ := e.node.KV().Get("/registry/ranges/serviceips/" + ip)
	return ok
}

func TestServiceClusterIPsConcurrent(t *testing.T) {
	e := newEnv(t)
	svcs := e.res(t, "", "v1", "services")
	const n = 30
	ips := make([]string, n)
	errs := make([]error, n)
	var retries atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			for {
				out, err := e.Create(e.ctx, svcs, "default", newService(fmt.Sprintf("s%02d", i), ""), registry.WriteOptions{})
				if apierrors.IsConflict(err) && strings.Contains(err.Error(), "is already allocated; try again") {
					// Two creates drew the same free address; see
					// TestServiceClusterIPsSmallRange. The claim kept them
					// apart, which is what this test checks.
					retries.Add(1)
					continue
				}
				if err == nil {
					ips[i] = out.(*corev1.Service).Spec.ClusterIP
				}
				errs[i] = err
				return
			}
		})
	}
	wg.Wait()
	if r := retries.Load(); r > 0 {
		t.Logf("%d creates lost an address race and were retried", r)
	}
	seen := map[string]string{}
	for i, ip := range ips {
		name := fmt.Sprintf("s%02d", i)
		if errs[i] != nil {
			t.Errorf("create %s: %v", name, errs[i])
			continue
		}
		addr, err := netip.ParseAddr(ip)
		if err != nil || !registry.DefaultServiceCIDR.Contains(addr) {
			t.Errorf("%s: cluster IP %q is not in %s", name, ip, registry.DefaultServiceCIDR)
		}
		if other, dup := seen[ip]; dup {
			t.Errorf("%s and %s both got %s", other, name, ip)
		}
		seen[ip] = name
		got := e.get(t, svcs, "default", name).(*corev1.Service)
		if got.Spec.ClusterIP != ip || len(got.Spec.ClusterIPs) != 1 || got.Spec.ClusterIPs[0] != ip {
			t.Errorf("%s: stored clusterIP %q clusterIPs %v, create said %s", name, got.Spec.ClusterIP, got.Spec.ClusterIPs, ip)
		}
		if !e.claimed(ip) {
			t.Errorf("%s: no claim for %s", name, ip)
		}
	}
	if t.Failed() {
		return
	}

	// Deleting a Service frees its address.
	ip := ips[0]
	if _, deleted, err := e.Delete(e.ctx, svcs, "default", "s00", metav1.DeleteOptions{}); err != nil || !deleted {
		t.Fatalf("delete: deleted=%v err=%v", deleted, err)
	}
	if e.claimed(ip) {
		t.Fatalf("claim of %s survived the Service's deletion", ip)
	}
	again := newService("again", "")
	again.Spec.ClusterIP = ip
	if _, err := e.Create(e.ctx, svcs, "default", again, registry.WriteOptions{}); err != nil {
		t.Fatalf("reuse of the freed %s: %v", ip, err)
	}
}

func TestServiceAllocation(t *testing.T) {
	e := newEnv(t)
	svcs := e.res(t, "", "v1", "services")
	taken := e.create(t, svcs, "default", newService("first", "")).(*corev1.Service).Spec.ClusterIP

	tests := []struct {
		name  string
		svc   func() *corev1.Service
		errIs func(error) bool
		check func(t *testing.T, s *corev1.Service)
	}{
		{name: "explicit address", svc: func() *corev1.Service {
			s := newService("explicit", "")
			s.Spec.ClusterIP = "10.43.200.7"
			return s
		}, check: func(t *testing.T, s *corev1.Service) {
			if s.Spec.ClusterIP != "10.43.200.7" || !e.claimed("10.43.200.7") {
				t.Errorf("clusterIP %s claimed %v", s.Spec.ClusterIP, e.claimed("10.43.200.7"))
			}
		}},
		{name: "address taken", svc: func() *corev1.Service {
			s := newService("dup", "")
			s.Spec.ClusterIP = taken
			return s
		}, errIs: apierrors.IsInvalid},
		{name: "address out of range", svc: func() *corev1.Service {
			s := newService("outside", "")
			s.Spec.ClusterIP = "192.168.1.1"
			return s
		}, errIs: apierrors.IsInvalid},
		{name: "headless", svc: func() *corev1.Service {
			s := newService("headless", "")
			s.Spec.ClusterIP = corev1.ClusterIPNone
			return s
		}, check: func(t *testing.T, s *corev1.Service) {
			if s.Spec.ClusterIP != "None" || len(s.Spec.ClusterIPs) != 1 || s.Spec.ClusterIPs[0] != "None" {
				t.Errorf("clusterIP %q clusterIPs %v", s.Spec.ClusterIP, s.Spec.ClusterIPs)
			}
		}},
		{name: "node port", svc: func() *corev1.Service { return newService("np", corev1.ServiceTypeNodePort) },
			check: func(t *testing.T, s *corev1.Service) {
				if p := s.Spec.Ports[0].NodePort; p < 30000 || p > 32767 {
					t.Errorf("nodePort %d", p)
				}
				if s.Spec.ClusterIP == "" {
					t.Errorf("no cluster IP")
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := e.Create(e.ctx, svcs, "default", tc.svc(), registry.WriteOptions{})
			if tc.errIs != nil {
				if !tc.errIs(err) {
					t.Fatalf("got %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, out.(*corev1.Service))
		})
	}

	t.Run("update keeps the allocation", func(t *testing.T) {
		np := e.get(t, svcs, "default", "np").(*corev1.Service)
		upd := newService("np", corev1.ServiceTypeNodePort) // no clusterIP, no nodePort
		upd.Labels = map[string]string{"changed": "yes"}
		out, err := e.Update(e.ctx, svcs, "default", "np", "", upd, registry.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s := out.(*corev1.Service)
		if s.Spec.ClusterIP != np.Spec.ClusterIP || s.Spec.Ports[0].NodePort != np.Spec.Ports[0].NodePort {
			t.Fatalf("update moved %s:%d to %s:%d", np.Spec.ClusterIP, np.Spec.Ports[0].NodePort, s.Spec.ClusterIP, s.Spec.Ports[0].NodePort)
		}
	})
}

// TestServiceClusterIPsSmallRange creates Services concurrently in a range
// with room for all of them: each create must succeed (a client cannot
// know that its 409 "already allocated" came from a race of the server's
// own allocator with another create).
func TestServiceClusterIPsSmallRange(t *testing.T) {
	e := newEnv(t, func(_ *raft.Config, rc *registry.Config) { rc.ServiceCIDR = netip.MustParsePrefix("10.44.0.0/26") })
	svcs := e.res(t, "", "v1", "services")
	const n = 12 // of the 52 assignable addresses of a /26
	for round := range 5 {
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				_, errs[i] = e.Create(e.ctx, svcs, "default", newService(fmt.Sprintf("r%d-s%02d", round, i), ""), registry.WriteOptions{})
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: create %d: %v", round, i, err)
			}
		}
		if _, err := e.DeleteCollection(e.ctx, svcs, "default", metav1.ListOptions{}, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// nodePortClaimed reports whether the store holds the claim of a node port.
func (e *env) nodePortClaimed(port int32) bool {
	_, ok, _ := e.node.KV().Get(fmt.Sprintf("/registry/ranges/nodeports/%d", port))
	return ok
}

// TestServiceUpdateMovesNodePortClaim changes a Service's node port: the
// new port must be claimed (no other Service may get it) and the old one
// given back.
func TestServiceUpdateMovesNodePortClaim(t *testing.T) {
	e := newEnv(t)
	svcs := e.res(t, "", "v1", "services")
	a := newService("a", corev1.ServiceTypeNodePort)
	a.Spec.Ports[0].NodePort = 30100
	e.create(t, svcs, "default", a)
	if _, err := e.Mutate(e.ctx, svcs, "default", "a", "", func(o runtime.Object) error {
		o.(*corev1.Service).Spec.Ports[0].NodePort = 30101
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b := newService("b", corev1.ServiceTypeNodePort)
	b.Spec.Ports[0].NodePort = 30101
	if _, err := e.Create(e.ctx, svcs, "default", b, registry.WriteOptions{}); err == nil {
		t.Errorf("Services a and b were both given node port 30101")
	}
	if e.nodePortClaimed(30100) {
		t.Errorf("node port 30100, no longer used by a, is still claimed")
	}
}

// TestServiceUpdateToNodePortAllocates changes a ClusterIP Service to
// NodePort, as `kubectl patch -p '{"spec":{"type":"NodePort"}}'` does: the
// port must get a node port, as on Kubernetes.
func TestServiceUpdateToNodePortAllocates(t *testing.T) {
	e := newEnv(t)
	svcs := e.res(t, "", "v1", "services")
	e.create(t, svcs, "default", newService("s", ""))
	out, _, err := e.Patch(e.ctx, svcs, "default", "s", "", types.StrategicMergePatchType, []byte(`{"spec":{"type":"NodePort"}}`),
		registry.FieldValidationStrict, registry.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	port := out.(*corev1.Service).Spec.Ports[0].NodePort
	if port < 30000 || port > 32767 || !e.nodePortClaimed(port) {
		t.Fatalf("nodePort %d (claimed %v), want an allocated port in 30000-32767", port, e.nodePortClaimed(port))
	}
}

// TestServiceUpdateReleasesDroppedAllocations: an update that drops an
// allocation (a node port on a change to ClusterIP, the cluster IP on a
// change to ExternalName) must give it back; so must the later delete.
func TestServiceUpdateReleasesDroppedAllocations(t *testing.T) {
	e := newEnv(t)
	svcs := e.res(t, "", "v1", "services")

	np := newService("np", corev1.ServiceTypeNodePort)
	np.Spec.Ports[0].NodePort = 30200
	e.create(t, svcs, "default", np)
	if _, err := e.Mutate(e.ctx, svcs, "default", "np", "", func(o runtime.Object) error {
		s := o.(*corev1.Service)
		s.Spec.Type = corev1.ServiceTypeClusterIP
		s.Spec.Ports[0].NodePort = 0
		s.Spec.ExternalTrafficPolicy = ""
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Delete(e.ctx, svcs, "default", "np", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if e.nodePortClaimed(30200) {
		t.Errorf("node port 30200 still claimed after its Service dropped it and was deleted")
	}

	ip := e.create(t, svcs, "default", newService("en", "")).(*corev1.Service).Spec.ClusterIP
	if _, err := e.Mutate(e.ctx, svcs, "default", "en", "", func(o runtime.Object) error {
		s := o.(*corev1.Service)
		s.Spec.Type = corev1.ServiceTypeExternalName
		s.Spec.ExternalName = "example.com"
		s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil
		s.Spec.Selector, s.Spec.IPFamilies, s.Spec.IPFamilyPolicy, s.Spec.InternalTrafficPolicy = nil, nil, nil, nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Delete(e.ctx, svcs, "default", "en", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if e.claimed(ip) {
		t.Errorf("cluster IP %s still claimed after its Service dropped it and was deleted", ip)
	}
}

// TestServiceTypeChangeToClusterIP changes a NodePort Service's type only,
// as `kubectl patch -p '{"spec":{"type":"ClusterIP"}}'` or an apply of the
// edited manifest does. Kubernetes drops the fields the new type does not
// use (node ports, externalTrafficPolicy) when the client left them as
// they were (dropTypeDependentFields); isle refuses the update.
func TestServiceTypeChangeToClusterIP(t *testing.T) {
	e := newEnv(t)
	svcs := e.res(t, "", "v1", "services")
	e.create(t, svcs, "default", newService("s", corev1.ServiceTypeNodePort))
	out, _, err := e.Patch(e.ctx, svcs, "default", "s", "", types.StrategicMergePatchType, []byte(`{"spec":{"type":"ClusterIP"}}`),
		registry.FieldValidationStrict, registry.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := out.(*corev1.Service)
	if s.Spec.Ports[0].NodePort != 0 || s.Spec.ExternalTrafficPolicy != "" {
		t.Errorf("nodePort %d externalTrafficPolicy %q kept", s.Spec.Ports[0].NodePort, s.Spec.ExternalTrafficPolicy)
	}
}
