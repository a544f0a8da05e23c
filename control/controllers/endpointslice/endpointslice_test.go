package endpointslice_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/isle-cluster/isle/control/controllers/internal/tabletest"
	"github.com/isle-cluster/isle/control/registry"
)

type esEnv struct {
	*tabletest.Env
	t        *testing.T
	ns       string
	services *registry.Resource
	pods     *registry.Resource
	slices   *registry.Resource
}

func newESEnv(t *testing.T) *esEnv {
	e := tabletest.New(t)
	e.Namespace(t, "web")
	return &esEnv{Env: e, t: t, ns: "web",
		services: e.Res(t, "", "v1", "services"),
		pods:     e.Res(t, "", "v1", "pods"),
		slices:   e.Res(t, "discovery.k8s.io", "v1", "endpointslices")}
}

func (e *esEnv) service(name string, selector map[string]string, change func(*corev1.Service)) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{
		Selector: selector,
		Ports:    []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}},
	}}
	if change != nil {
		change(svc)
	}
	return e.MustCreate(e.t, e.services, e.ns, svc).(*corev1.Service)
}

func (e *esEnv) pod(name string, lbls map[string]string, ports ...corev1.ContainerPort) *corev1.Pod {
	return e.MustCreate(e.t, e.pods, e.ns, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Spec: corev1.PodSpec{NodeName: "pi-1", Containers: []corev1.Container{{Name: "c", Image: "busybox", Ports: ports}}}}).(*corev1.Pod)
}

// status sets a pod's IP and readiness.
func (e *esEnv) status(name, ip string, ready bool) {
	e.t.Helper()
	_, err := e.Mutate(e.Ctx, e.pods, e.ns, name, "status", func(obj runtime.Object) error {
		p := obj.(*corev1.Pod)
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIP = ip
		p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
		return nil
	})
	if err != nil {
		e.t.Fatalf("pod %s status: %v", name, err)
	}
}

// slicesOf lists a Service's slices as kubectl -l kubernetes.io/service-name=<name> does.
func (e *esEnv) slicesOf(name string) []discoveryv1.EndpointSlice {
	e.t.Helper()
	list, err := e.List(e.Ctx, e.slices, e.ns, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
	if err != nil {
		e.t.Fatal(err)
	}
	return list.(*discoveryv1.EndpointSliceList).Items
}

// endpoints are a Service's endpoints by pod name.
func (e *esEnv) endpoints(name string) map[string]discoveryv1.Endpoint {
	out := map[string]discoveryv1.Endpoint{}
	for _, s := range e.slicesOf(name) {
		for _, ep := range s.Endpoints {
			out[ep.TargetRef.Name] = ep
		}
	}
	return out
}

type esCond struct{ ready, serving, terminating bool }

func epCond(ep discoveryv1.Endpoint) esCond {
	b := func(p *bool) bool { return p != nil && *p }
	return esCond{b(ep.Conditions.Ready), b(ep.Conditions.Serving), b(ep.Conditions.Terminating)}
}

// waitConds waits until a Service's endpoints are exactly want.
func (e *esEnv) waitConds(svc string, want map[string]esCond) {
	e.t.Helper()
	tabletest.Eventually(e.t, svc+" endpoints are "+formatConds(want), func() bool {
		eps := e.endpoints(svc)
		if len(eps) != len(want) {
			return false
		}
		for n, c := range want {
			ep, ok := eps[n]
			if !ok || epCond(ep) != c {
				return false
			}
		}
		return true
	})
}

func formatConds(m map[string]esCond) string {
	var s []string
	for n, c := range m {
		s = append(s, n+":"+map[bool]string{true: "R", false: "r"}[c.ready]+map[bool]string{true: "S", false: "s"}[c.serving]+map[bool]string{true: "T", false: "t"}[c.terminating])
	}
	slices.Sort(s)
	return "[" + strings.Join(s, " ") + "]"
}

func TestEndpointSliceLifecycle(t *testing.T) {
	e := newESEnv(t)
	app := map[string]string{"app": "hello"}
	e.service("nosel", nil, nil)
	svc := e.service("hello", app, nil)
	e.pod("p1", app)
	e.pod("p2", app)
	e.pod("p3", app) // never gets an IP
	e.pod("other", map[string]string{"app": "other"})
	e.status("p1", "10.1.0.1", false)
	e.status("p2", "10.1.0.2", false)
	e.status("other", "10.1.0.9", true)

	e.waitConds("hello", map[string]esCond{"p1": {}, "p2": {}})
	got := e.slicesOf("hello")
	if len(got) != 1 {
		t.Fatalf("hello has %d slices, want 1", len(got))
	}
	s := got[0]
	if s.GenerateName != "hello-" || len(s.Name) != len("hello-")+5 {
		t.Errorf("slice name %q (generateName %q), want hello-<5 chars>", s.Name, s.GenerateName)
	}
	if s.Labels[discoveryv1.LabelManagedBy] != "endpointslice-controller.k8s.io" || s.AddressType != discoveryv1.AddressTypeIPv4 {
		t.Errorf("slice labels %v, addressType %s", s.Labels, s.AddressType)
	}
	if ref := metav1.GetControllerOf(&s); ref == nil || ref.UID != svc.UID || ref.Kind != "Service" {
		t.Errorf("slice controller %+v, want Service hello", ref)
	}
	if len(s.Ports) != 1 || *s.Ports[0].Port != 8080 || *s.Ports[0].Name != "http" || *s.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("slice ports %+v, want http 8080/TCP", s.Ports)
	}
	for _, ep := range s.Endpoints {
		if ep.NodeName == nil || *ep.NodeName != "pi-1" || ep.TargetRef.Kind != "Pod" || ep.TargetRef.Namespace != "web" || ep.TargetRef.UID == "" || len(ep.Addresses) != 1 {
			t.Errorf("endpoint %+v", ep)
		}
	}
	if n := len(e.slicesOf("nosel")); n != 0 {
		t.Errorf("a Service without selector has %d slices", n)
	}

	// Readiness flips ready and serving.
	e.status("p1", "10.1.0.1", true)
	e.waitConds("hello", map[string]esCond{"p1": {true, true, false}, "p2": {}})

	// A reconcile that changes nothing writes nothing: a no-op pod change
	// and then a real one give exactly one write of the slice.
	rv := e.slicesOf("hello")[0].ResourceVersion
	events, err := e.Watch(e.Ctx, e.slices, e.ns, metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Mutate(e.Ctx, e.pods, e.ns, "p2", "", func(obj runtime.Object) error {
		obj.(*corev1.Pod).Annotations = map[string]string{"touched": "yes"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.status("p2", "10.1.0.2", true)
	e.waitConds("hello", map[string]esCond{"p1": {true, true, false}, "p2": {true, true, false}})
	writes := 0
	timeout := time.After(tabletest.Wait)
	for done := false; !done; {
		select {
		case ev := <-events:
			if s, ok := ev.Object.(*discoveryv1.EndpointSlice); ok && s.Labels[discoveryv1.LabelServiceName] == "hello" {
				writes++
				if ev.Type != watch.Modified {
					t.Errorf("slice event %s, want MODIFIED", ev.Type)
				}
				if len(s.Endpoints) == 2 && epCond(s.Endpoints[0]).ready && epCond(s.Endpoints[1]).ready {
					done = true
				}
			}
		case <-timeout:
			t.Fatal("the final slice write was not seen")
		}
	}
	if writes != 1 {
		t.Errorf("%d slice writes, want 1", writes)
	}

	// A terminating pod: not ready, serving as its readiness, terminating.
	if _, _, err := e.Delete(e.Ctx, e.pods, e.ns, "p1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitConds("hello", map[string]esCond{"p1": {false, true, true}, "p2": {true, true, false}})

	// publishNotReadyAddresses makes not-ready pods ready.
	e.service("pub", app, func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true })
	e.status("p2", "10.1.0.2", false)
	e.waitConds("pub", map[string]esCond{"p1": {true, true, true}, "p2": {true, false, false}})
	e.waitConds("hello", map[string]esCond{"p1": {false, true, true}, "p2": {false, false, false}})

	// Deleting the Service removes its slices.
	if _, _, err := e.Delete(e.Ctx, e.services, e.ns, "hello", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	tabletest.Eventually(t, "hello's slices are removed", func() bool { return len(e.slicesOf("hello")) == 0 })
	if n := len(e.slicesOf("pub")); n != 1 {
		t.Errorf("pub has %d slices, want 1", n)
	}

	// A Service that loses its selector loses its slices (its Endpoints
	// stay, now the user's, and are mirrored, as upstream's).
	if _, err := e.Mutate(e.Ctx, e.services, e.ns, "pub", "", func(obj runtime.Object) error {
		obj.(*corev1.Service).Spec.Selector = nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	tabletest.Eventually(t, "pub's slices are removed", func() bool {
		for _, s := range e.slicesOf("pub") {
			if s.Labels[discoveryv1.LabelManagedBy] == "endpointslice-controller.k8s.io" {
				return false
			}
		}
		return true
	})
}

func TestEndpointSliceNamedTargetPort(t *testing.T) {
	e := newESEnv(t)
	app := map[string]string{"app": "named"}
	e.service("named", app, func(s *corev1.Service) {
		s.Spec.Ports = []corev1.ServicePort{
			{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("web")},
			{Name: "metrics", Port: 9100, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(9100)},
		}
	})
	e.pod("a", app, corev1.ContainerPort{Name: "web", ContainerPort: 8080, Protocol: corev1.ProtocolTCP})
	e.pod("b", app, corev1.ContainerPort{Name: "web", ContainerPort: 9090, Protocol: corev1.ProtocolTCP})
	e.pod("c", app)
	e.pod("d", app, corev1.ContainerPort{Name: "web", ContainerPort: 8080, Protocol: corev1.ProtocolTCP})
	for i, n := range []string{"a", "b", "c", "d"} {
		e.status(n, "10.2.0."+string(rune('1'+i)), true)
	}
	ready := esCond{true, true, false}
	e.waitConds("named", map[string]esCond{"a": ready, "b": ready, "c": ready, "d": ready})
	tabletest.Eventually(t, "three slices, one per resolved port set", func() bool { return len(e.slicesOf("named")) == 3 })
	for _, s := range e.slicesOf("named") {
		var names []string
		for _, ep := range s.Endpoints {
			names = append(names, ep.TargetRef.Name)
		}
		slices.Sort(names)
		ports := map[string]int32{}
		for _, p := range s.Ports {
			ports[*p.Name] = *p.Port
		}
		want := map[string]map[string]int32{
			"a,d": {"http": 8080, "metrics": 9100},
			"b":   {"http": 9090, "metrics": 9100},
			"c":   {"metrics": 9100},
		}[strings.Join(names, ",")]
		if want == nil || len(want) != len(ports) {
			t.Errorf("slice with %v has ports %v", names, ports)
			continue
		}
		for k, v := range want {
			if ports[k] != v {
				t.Errorf("slice with %v has ports %v, want %v", names, ports, want)
			}
		}
	}
}

func TestEndpointSliceMaxEndpoints(t *testing.T) {
	e := newESEnv(t)
	app := map[string]string{"app": "many"}
	e.service("many", app, nil)
	want := map[string]esCond{}
	for i := range 105 {
		name := "p" + strconv.Itoa(i)
		e.pod(name, app)
		e.status(name, "10.3."+strconv.Itoa(i/200)+"."+strconv.Itoa(i%200+1), true)
		want[name] = esCond{true, true, false}
	}
	e.waitConds("many", want)
	tabletest.Eventually(t, "two slices of at most 100 endpoints", func() bool {
		got := e.slicesOf("many")
		if len(got) != 2 {
			return false
		}
		for _, s := range got {
			if len(s.Endpoints) > 100 {
				t.Fatalf("slice %s has %d endpoints", s.Name, len(s.Endpoints))
			}
		}
		return true
	})
	// Removing the pods of one slice deletes it and leaves the other as it is.
	got := e.slicesOf("many")
	if len(got[0].Endpoints) < len(got[1].Endpoints) {
		got[0], got[1] = got[1], got[0]
	}
	keep, drop := got[0], got[1]
	for _, ep := range drop.Endpoints {
		if _, _, err := e.Delete(e.Ctx, e.pods, e.ns, ep.TargetRef.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
	}
	tabletest.Eventually(t, "only the fuller slice is left", func() bool {
		got := e.slicesOf("many")
		return len(got) == 1 && got[0].Name == keep.Name
	})
	if rv := e.slicesOf("many")[0].ResourceVersion; rv != keep.ResourceVersion {
		t.Errorf("the untouched slice was written: resourceVersion %s, was %s", rv, keep.ResourceVersion)
	}
}
