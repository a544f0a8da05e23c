package ingress

import (
	"bytes"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// t0 is the creation time of the oldest test Ingress.
var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

type ingOpt func(*networkingv1.Ingress)

// newIngress returns an Ingress of class isle created age minutes after t0.
func newIngress(ns, name string, age int, opts ...ingOpt) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(age) * time.Minute))},
		Spec:       networkingv1.IngressSpec{IngressClassName: ptr("isle")},
	}
	for _, o := range opts {
		o(ing)
	}
	return ing
}

func rule(host string, paths ...networkingv1.HTTPIngressPath) ingOpt {
	return func(ing *networkingv1.Ingress) {
		ing.Spec.Rules = append(ing.Spec.Rules, networkingv1.IngressRule{
			Host:             host,
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}},
		})
	}
}

func defaultBackend(svc string, port any) ingOpt {
	return func(ing *networkingv1.Ingress) { ing.Spec.DefaultBackend = ptr(svcBackend(svc, port)) }
}

func className(name string) ingOpt {
	return func(ing *networkingv1.Ingress) {
		ing.Spec.IngressClassName = nil
		if name != "" {
			ing.Spec.IngressClassName = &name
		}
	}
}

func annotation(k, v string) ingOpt {
	return func(ing *networkingv1.Ingress) {
		if ing.Annotations == nil {
			ing.Annotations = map[string]string{}
		}
		ing.Annotations[k] = v
	}
}

func tlsFor(secret string, hosts ...string) ingOpt {
	return func(ing *networkingv1.Ingress) {
		ing.Spec.TLS = append(ing.Spec.TLS, networkingv1.IngressTLS{Hosts: hosts, SecretName: secret})
	}
}

// path returns an HTTP path of type typ ("" for none) to svc's port (a
// number or a name).
func path(typ, p, svc string, port any) networkingv1.HTTPIngressPath {
	hp := networkingv1.HTTPIngressPath{Path: p, Backend: svcBackend(svc, port)}
	if typ != "" {
		hp.PathType = ptr(networkingv1.PathType(typ))
	}
	return hp
}

func svcBackend(svc string, port any) networkingv1.IngressBackend {
	sb := &networkingv1.IngressServiceBackend{Name: svc}
	switch p := port.(type) {
	case int:
		sb.Port.Number = int32(p)
	case string:
		sb.Port.Name = p
	}
	return networkingv1.IngressBackend{Service: sb}
}

func newClass(name, controller string, isDefault bool) *networkingv1.IngressClass {
	ic := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.IngressClassSpec{Controller: controller}}
	if isDefault {
		ic.Annotations = map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}
	}
	return ic
}

// isleClasses are the classes of most tests: isle (this controller's,
// the default) and nginx (another controller's).
func isleClasses() []*networkingv1.IngressClass {
	return []*networkingv1.IngressClass{
		newClass("isle", ControllerName, true),
		newClass("nginx", "k8s.io/ingress-nginx", false),
	}
}

func service(ns, name string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{Ports: ports}}
}

func svcPort(name string, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, Protocol: corev1.ProtocolTCP}
}

// endpointSlice returns a slice of svc whose port portName is port, with
// the endpoints at ips; an IP prefixed "!" is not ready.
func endpointSlice(ns, svc, name, portName string, port int32, ips ...string) *discoveryv1.EndpointSlice {
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr(portName), Port: ptr(port), Protocol: ptr(corev1.ProtocolTCP)}},
	}
	for _, ip := range ips {
		ready := true
		if ip[0] == '!' {
			ip, ready = ip[1:], false
		}
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
	}
	return sl
}

// slicesFor returns one EndpointSlice per address (ip:port), as loopback
// test servers share an IP and differ by port; an address prefixed "!" is
// not ready.
func slicesFor(t testing.TB, ns, svc, portName string, addrs ...string) []*discoveryv1.EndpointSlice {
	t.Helper()
	var out []*discoveryv1.EndpointSlice
	for i, a := range addrs {
		not := ""
		if a[0] == '!' {
			not, a = "!", a[1:]
		}
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(port)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, endpointSlice(ns, svc, svc+"-"+strconv.Itoa(i), portName, int32(n), not+host))
	}
	return out
}

// testEnv returns a proxyEnv that logs to t.
func testEnv(t testing.TB) *proxyEnv { return newProxyEnv(testLogger(t)) }

// testLogger logs to t's log at debug level.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimSpace(p)))
	return len(p), nil
}

// logBuffer is a concurrency-safe log sink whose text tests can search.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newController returns a started Controller on loopback, closed at the
// end of the test.
func newController(t testing.TB, log *slog.Logger) *Controller {
	t.Helper()
	if log == nil {
		log = testLogger(t)
	}
	c, err := New(Config{HTTPAddr: "127.0.0.1:0", HTTPSAddr: "127.0.0.1:0", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// backendServer is a test endpoint that answers its name and counts
// requests.
func backendServer(t testing.TB, name string) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(nameHandler(name))
	t.Cleanup(s.Close)
	return s
}

// nameHandler answers every request with name.
func nameHandler(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend", name)
		_, _ = w.Write([]byte(name))
	})
}

// addr returns a test server's ip:port.
func addr(s *httptest.Server) string { return s.Listener.Addr().String() }

// waitFor waits up to 5 s for cond.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
