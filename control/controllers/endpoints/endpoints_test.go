package endpoints_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/isle-cluster/isle/control/controllers/internal/tabletest"
	"github.com/isle-cluster/isle/control/registry"
)

type env struct {
	*tabletest.Env
	t                                 *testing.T
	services, pods, endpoints, slices *registry.Resource
}

func newEnv(t *testing.T) *env {
	e := tabletest.New(t)
	e.Namespace(t, "web")
	return &env{Env: e, t: t,
		services:  e.Res(t, "", "v1", "services"),
		pods:      e.Res(t, "", "v1", "pods"),
		endpoints: e.Res(t, "", "v1", "endpoints"),
		slices:    e.Res(t, "discovery.k8s.io", "v1", "endpointslices")}
}

func (e *env) service(name string, selector map[string]string, change func(*corev1.Service)) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"team": "a"}}, Spec: corev1.ServiceSpec{
		Selector: selector,
		Ports:    []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}},
	}}
	if change != nil {
		change(svc)
	}
	return e.MustCreate(e.t, e.services, "web", svc).(*corev1.Service)
}

// pod creates a running pod with ip, ready or not.
func (e *env) pod(name, ip string, ready bool, lbls map[string]string) *corev1.Pod {
	e.t.Helper()
	p := e.MustCreate(e.t, e.pods, "web", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Spec: corev1.PodSpec{NodeName: "pi-1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}).(*corev1.Pod)
	if _, err := e.Mutate(e.Ctx, e.pods, "web", name, "status", func(obj runtime.Object) error {
		p := obj.(*corev1.Pod)
		p.Status.Phase, p.Status.PodIP, p.Status.PodIPs = corev1.PodRunning, ip, []corev1.PodIP{{IP: ip}}
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *env) getEndpoints(name string) (*corev1.Endpoints, bool) {
	obj, ok := e.Exists(e.t, e.endpoints, "web", name)
	if !ok {
		return nil, false
	}
	return obj.(*corev1.Endpoints), true
}

func (e *env) slicesOf(name string) []discoveryv1.EndpointSlice {
	e.t.Helper()
	list, err := e.List(e.Ctx, e.slices, "web", metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
	if err != nil {
		e.t.Fatal(err)
	}
	return list.(*discoveryv1.EndpointSliceList).Items
}

func addr(ip string, pod *corev1.Pod) corev1.EndpointAddress {
	a := corev1.EndpointAddress{IP: ip}
	if pod != nil {
		node := pod.Spec.NodeName
		a.NodeName = &node
		a.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
	}
	return a
}

func TestEndpointsOfAServiceWithASelector(t *testing.T) {
	e := newEnv(t)
	app := map[string]string{"app": "hello"}
	e.service("hello", app, nil)
	e.service("headless", app, func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone })
	// Addresses in IP order, not name order; 10.1.0.10 after 10.1.0.9.
	p1 := e.pod("p1", "10.1.0.10", true, app)
	p2 := e.pod("p2", "10.1.0.9", true, app)
	p3 := e.pod("p3", "10.1.0.3", false, app)
	e.pod("other", "10.1.0.4", true, map[string]string{"app": "other"})

	want := []corev1.EndpointSubset{{
		Addresses:         []corev1.EndpointAddress{addr("10.1.0.9", p2), addr("10.1.0.10", p1)},
		NotReadyAddresses: []corev1.EndpointAddress{addr("10.1.0.3", p3)},
		Ports:             []corev1.EndpointPort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}},
	}}
	var got *corev1.Endpoints
	tabletest.Eventually(t, "the Endpoints of hello hold its three pods", func() bool {
		ep, ok := e.getEndpoints("hello")
		got = ep
		return ok && equality.Semantic.DeepEqual(ep.Subsets, want)
	})
	if got.Labels["team"] != "a" || got.Labels["endpoints.kubernetes.io/managed-by"] != "endpoint-controller" {
		t.Errorf("labels %v: want the Service's and managed-by endpoint-controller", got.Labels)
	}
	if _, ok := got.Labels[corev1.IsHeadlessService]; ok {
		t.Errorf("a Service with a cluster IP: labels %v", got.Labels)
	}
	tabletest.Eventually(t, "the headless Service's Endpoints, labelled headless", func() bool {
		ep, ok := e.getEndpoints("headless")
		_, headless := ep.Labels[corev1.IsHeadlessService]
		return ok && headless && len(ep.Subsets) == 1 && len(ep.Subsets[0].Addresses) == 2
	})
	// Nothing mirrored from the controller's own Endpoints.
	for _, s := range e.slicesOf("hello") {
		if s.Labels[discoveryv1.LabelManagedBy] != "endpointslice-controller.k8s.io" {
			t.Errorf("slice %s managed by %s", s.Name, s.Labels[discoveryv1.LabelManagedBy])
		}
	}

	// A terminating pod leaves; a deleted Endpoints comes back.
	if _, _, err := e.Delete(e.Ctx, e.pods, "web", "p1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	tabletest.Eventually(t, "p1 gone from the Endpoints once terminating", func() bool {
		ep, ok := e.getEndpoints("hello")
		return ok && len(ep.Subsets) == 1 && equality.Semantic.DeepEqual(ep.Subsets[0].Addresses, []corev1.EndpointAddress{addr("10.1.0.9", p2)})
	})
	if _, _, err := e.Delete(e.Ctx, e.endpoints, "web", "hello", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	tabletest.Eventually(t, "the Endpoints written again", func() bool {
		_, ok := e.getEndpoints("hello")
		return ok
	})

	// The Endpoints go with their Service.
	if _, _, err := e.Delete(e.Ctx, e.services, "web", "hello", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	tabletest.Eventually(t, "the Endpoints deleted with the Service", func() bool {
		_, ok := e.getEndpoints("hello")
		return !ok
	})
}

func TestEndpointsMirroredIntoSlices(t *testing.T) {
	e := newEnv(t)
	e.service("db", nil, nil)
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "db", Labels: map[string]string{"team": "b"},
		Annotations: map[string]string{corev1.LastAppliedConfigAnnotation: "{}", "note": "kept"}},
		Subsets: []corev1.EndpointSubset{
			{Addresses: []corev1.EndpointAddress{{IP: "192.0.2.7", Hostname: "db-0"}}, NotReadyAddresses: []corev1.EndpointAddress{{IP: "192.0.2.8"}},
				Ports: []corev1.EndpointPort{{Name: "pg", Port: 5432}}},
			{Addresses: []corev1.EndpointAddress{{IP: "2001:db8::1"}}, Ports: []corev1.EndpointPort{{Name: "pg", Port: 5432}}},
		}}
	created := e.MustCreate(t, e.endpoints, "web", ep).(*corev1.Endpoints)
	if p := created.Subsets[0].Ports[0].Protocol; p != corev1.ProtocolTCP {
		t.Errorf("port protocol defaulted to %q, want TCP", p)
	}
	var got []discoveryv1.EndpointSlice
	tabletest.Eventually(t, "an IPv4 and an IPv6 slice mirrored", func() bool {
		got = e.slicesOf("db")
		return len(got) == 2
	})
	for _, s := range got {
		if s.Labels[discoveryv1.LabelManagedBy] != "endpointslicemirroring-controller.k8s.io" || s.Labels["team"] != "b" {
			t.Errorf("slice %s labels %v", s.Name, s.Labels)
		}
		if s.Annotations["note"] != "kept" || s.Annotations[corev1.LastAppliedConfigAnnotation] != "" {
			t.Errorf("slice %s annotations %v: want note kept and last-applied left out", s.Name, s.Annotations)
		}
		if ref := metav1.GetControllerOf(&s); ref == nil || ref.Kind != "Endpoints" || ref.UID != created.UID {
			t.Errorf("slice %s controller %+v, want the Endpoints", s.Name, ref)
		}
		if len(s.Ports) != 1 || *s.Ports[0].Port != 5432 || *s.Ports[0].Name != "pg" || *s.Ports[0].Protocol != corev1.ProtocolTCP {
			t.Errorf("slice %s ports %+v", s.Name, s.Ports)
		}
		switch s.AddressType {
		case discoveryv1.AddressTypeIPv4:
			if len(s.Endpoints) != 2 || s.Endpoints[0].Addresses[0] != "192.0.2.7" || !*s.Endpoints[0].Conditions.Ready ||
				*s.Endpoints[0].Hostname != "db-0" || s.Endpoints[1].Addresses[0] != "192.0.2.8" || *s.Endpoints[1].Conditions.Ready {
				t.Errorf("IPv4 slice endpoints %+v", s.Endpoints)
			}
		case discoveryv1.AddressTypeIPv6:
			if len(s.Endpoints) != 1 || s.Endpoints[0].Addresses[0] != "2001:db8::1" {
				t.Errorf("IPv6 slice endpoints %+v", s.Endpoints)
			}
		}
	}

	// An update is mirrored, in place.
	name := ""
	for _, s := range got {
		if s.AddressType == discoveryv1.AddressTypeIPv4 {
			name = s.Name
		}
	}
	if _, err := e.Mutate(e.Ctx, e.endpoints, "web", "db", "", func(obj runtime.Object) error {
		obj.(*corev1.Endpoints).Subsets = []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "192.0.2.9"}}, Ports: []corev1.EndpointPort{{Port: 5432}}}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	tabletest.Eventually(t, "the update mirrored into the same slice", func() bool {
		got = e.slicesOf("db")
		return len(got) == 1 && got[0].Name == name && len(got[0].Endpoints) == 1 && got[0].Endpoints[0].Addresses[0] == "192.0.2.9"
	})

	// 250 addresses: three slices of at most 100.
	if _, err := e.Mutate(e.Ctx, e.endpoints, "web", "db", "", func(obj runtime.Object) error {
		var as []corev1.EndpointAddress
		for i := range 250 {
			as = append(as, corev1.EndpointAddress{IP: fmt.Sprintf("10.9.%d.%d", i/200, 1+i%200)})
		}
		obj.(*corev1.Endpoints).Subsets = []corev1.EndpointSubset{{Addresses: as, Ports: []corev1.EndpointPort{{Port: 5432}}}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	tabletest.Eventually(t, "250 addresses in slices of 100, 100 and 50", func() bool {
		got = e.slicesOf("db")
		n := map[int]int{}
		for _, s := range got {
			n[len(s.Endpoints)]++
		}
		return len(got) == 3 && n[100] == 2 && n[50] == 1
	})

	// skip-mirror stops the mirroring: the slices go.
	if _, err := e.Mutate(e.Ctx, e.endpoints, "web", "db", "", func(obj runtime.Object) error {
		obj.(*corev1.Endpoints).Labels[discoveryv1.LabelSkipMirror] = "true"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	tabletest.Eventually(t, "no slice once skip-mirror is set", func() bool { return len(e.slicesOf("db")) == 0 })

	// A user's Endpoints of a Service without a selector are left alone
	// while it lives, and go when it goes.
	if ep, ok := e.getEndpoints("db"); !ok || len(ep.Subsets) != 1 || len(ep.Subsets[0].Addresses) != 250 {
		t.Fatalf("the user's Endpoints changed: %v", ep)
	}
	if _, _, err := e.Delete(e.Ctx, e.services, "web", "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	tabletest.Eventually(t, "the Endpoints deleted with the Service", func() bool {
		_, ok := e.getEndpoints("db")
		return !ok
	})
}

func TestEndpointsValidation(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		name string
		ss   corev1.EndpointSubset
		want string
	}{
		{"no address", corev1.EndpointSubset{Ports: []corev1.EndpointPort{{Port: 80}}}, "subsets[0]: Required value: must specify `addresses` or `notReadyAddresses`"},
		{"loopback", corev1.EndpointSubset{Addresses: []corev1.EndpointAddress{{IP: "127.0.0.1"}}}, "subsets[0].addresses[0].ip: Invalid value: \"127.0.0.1\": may not be in the loopback range"},
		{"not an IP", corev1.EndpointSubset{Addresses: []corev1.EndpointAddress{{IP: "db.example"}}}, "subsets[0].addresses[0].ip: Invalid value: \"db.example\""},
		{"two ports, one unnamed", corev1.EndpointSubset{Addresses: []corev1.EndpointAddress{{IP: "192.0.2.1"}},
			Ports: []corev1.EndpointPort{{Name: "a", Port: 80}, {Port: 81}}}, "subsets[0].ports[1].name: Required value"},
		{"port 0", corev1.EndpointSubset{Addresses: []corev1.EndpointAddress{{IP: "192.0.2.1"}}, Ports: []corev1.EndpointPort{{Port: 0}}},
			"subsets[0].ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive"},
		{"protocol", corev1.EndpointSubset{Addresses: []corev1.EndpointAddress{{IP: "192.0.2.1"}}, Ports: []corev1.EndpointPort{{Port: 80, Protocol: "ICMP"}}},
			"subsets[0].ports[0].protocol: Unsupported value: \"ICMP\""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := e.Create(e.Ctx, e.endpoints, "web", &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
				Subsets: []corev1.EndpointSubset{c.ss}}, registry.WriteOptions{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("create: %v, want an error with %q", err, c.want)
			}
		})
	}
}
