package apiserver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/isle-cluster/isle/control/apiserver"
)

// dialLog maps the pod addresses the API server dials to one test server
// on loopback, and remembers them.
type dialLog struct {
	mu      sync.Mutex
	dialed  []string
	backend string
	refuse  map[string]bool
}

func (d *dialLog) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.dialed = append(d.dialed, addr)
	refused := d.refuse[addr]
	d.mu.Unlock()
	if refused {
		return nil, errors.New("connect: connection refused")
	}
	return (&net.Dialer{}).DialContext(ctx, network, d.backend)
}

func (d *dialLog) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.dialed)
}

func (d *dialLog) last() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.dialed) == 0 {
		return ""
	}
	return d.dialed[len(d.dialed)-1]
}

func TestPodAndServiceProxy(t *testing.T) {
	// The "pods": one server that says what it was asked.
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "method=%s path=%s query=%s body=%s auth=%q", r.Method, r.URL.EscapedPath(), r.URL.RawQuery, body, r.Header.Get("Authorization"))
	}))
	t.Cleanup(backend.Close)
	d := &dialLog{backend: backend.Listener.Addr().String(), refuse: map[string]bool{"10.42.0.9:8080": true}}
	e := newEnv(t, func(c *apiserver.Config) { c.ProxyDial = d.dial })

	pod := func(name, ip string) {
		p := corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{NodeName: "pi2", Containers: []corev1.Container{{Name: "c", Image: "busybox",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}}}
		mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/pods", toJSON(t, p)), 201)
		if ip != "" {
			mustCode(t, e.admin(t, "PATCH", "/api/v1/namespaces/default/pods/"+name+"/status",
				`{"status":{"phase":"Running","podIP":"`+ip+`","podIPs":[{"ip":"`+ip+`"}]}}`, "Content-Type", "application/merge-patch+json"), 200)
		}
	}
	pod("web", "10.42.0.5")
	pod("pending", "")
	pod("sneaky", "127.0.0.1")
	pod("down", "10.42.0.9")
	pod("proxy", "10.42.0.6")                                                                       // a name that is also the subresource's
	mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/pods", podJSON("bare", "pi2")), 201) // declares no port
	mustCode(t, e.admin(t, "PATCH", "/api/v1/namespaces/default/pods/bare/status",
		`{"status":{"phase":"Running","podIP":"10.42.0.4","podIPs":[{"ip":"10.42.0.4"}]}}`, "Content-Type", "application/merge-patch+json"), 200)

	svc := func(name string, addrs map[string]bool) {
		s := corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}, ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)},
				{Name: "metrics", Port: 9090, TargetPort: intstr.FromInt32(9091)}}}}
		mustCode(t, e.admin(t, "POST", "/api/v1/namespaces/default/services", toJSON(t, s)), 201)
		var eps []discoveryv1.Endpoint
		for a, ready := range addrs {
			eps = append(eps, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
		}
		http, metrics, p1, p2 := "http", "metrics", int32(8080), int32(9091)
		es := discoveryv1.EndpointSlice{TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
			ObjectMeta:  metav1.ObjectMeta{Name: name + "-abc", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps,
			Ports: []discoveryv1.EndpointPort{{Name: &http, Port: &p1}, {Name: &metrics, Port: &p2}}}
		mustCode(t, e.admin(t, "POST", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", toJSON(t, es)), 201)
	}
	svc("web", map[string]bool{"10.42.0.7": true, "10.42.0.8": false})
	svc("empty", map[string]bool{"10.42.0.3": false})

	const pods, svcs = "/api/v1/namespaces/default/pods/", "/api/v1/namespaces/default/services/"
	tests := []struct {
		name, method, path, token string
		code                      int
		want                      string // in the body
		dialed                    string // the address dialed, if any
	}{
		{"pod, the first port it declares", "GET", pods + "web/proxy/hello/a%2Fb?x=1&y=2", adminToken, 200, "method=GET path=/hello/a%2Fb query=x=1&y=2 body= auth=\"\"", "10.42.0.5:8080"},
		{"pod declaring no port: 80", "GET", pods + "bare/proxy/x", adminToken, 200, "path=/x ", "10.42.0.4:80"},
		{"pod called proxy", "GET", pods + "proxy/proxy/proxy/x", adminToken, 200, "path=/proxy/x ", "10.42.0.6:8080"},
		{"pod, named port", "GET", pods + "web:http/proxy/", adminToken, 200, "path=/ ", "10.42.0.5:8080"},
		{"pod, no path: redirected", "GET", pods + "web:8080/proxy?method=GET", adminToken, 301, "", ""},
		{"pod, no path, POST", "POST", pods + "web:8080/proxy", adminToken, 200, "path=/ ", "10.42.0.5:8080"},
		{"pod, POST with a body", "POST", pods + "web:8080/proxy/echo", adminToken, 200, "method=POST path=/echo query= body={}", "10.42.0.5:8080"},
		{"pod, OPTIONS", "OPTIONS", pods + "http:web:8080/proxy/x", adminToken, 200, "method=OPTIONS", "10.42.0.5:8080"},
		{"pod, DELETE", "DELETE", pods + "web:8080/proxy/x", adminToken, 200, "method=DELETE", "10.42.0.5:8080"},
		{"pod, unknown port name", "GET", pods + "web:nope/proxy/", adminToken, 400, `pod web has no container port named \"nope\"`, ""},
		{"pod, bad scheme", "GET", pods + "ftp:web:80/proxy/", adminToken, 400, `invalid proxy scheme \"ftp\"`, ""},
		{"pod without an IP", "GET", pods + "pending/proxy/", adminToken, 503, "pod pending: no IP address yet", ""},
		{"pod on loopback", "GET", pods + "sneaky/proxy/", adminToken, 503, "address 127.0.0.1 not allowed", ""},
		{"pod not answering", "GET", pods + "down/proxy/", adminToken, 503, "error trying to reach pod: connect: connection refused", "10.42.0.9:8080"},
		{"missing pod", "GET", pods + "absent/proxy/", adminToken, 404, `pods \"absent\" not found`, ""},
		{"service by port name", "GET", svcs + "web:http/proxy/p?q=1", adminToken, 200, "path=/p query=q=1", "10.42.0.7:8080"},
		{"service by port number", "PUT", svcs + "web:9090/proxy/", adminToken, 200, "method=PUT", "10.42.0.7:9091"},
		{"service, port needed", "GET", svcs + "web/proxy/", adminToken, 503, `no service port \"\" found for service \"web\"`, ""},
		{"service without ready endpoints", "GET", svcs + "empty:80/proxy/", adminToken, 503, `no endpoints available for service \"empty\"`, ""},
		{"a node reaches no pod", "GET", pods + "web/proxy/x/y", nodeAToken, 403, `cannot get resource \"pods/proxy\"`, ""},
		{"nobody reaches no service", "GET", svcs + "web:http/proxy/", nobodyToken, 403, `cannot get resource \"services/proxy\"`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := d.count()
			body := ""
			if tc.method == "POST" {
				body = "{}"
			}
			r := e.do(t, req{method: tc.method, path: tc.path, token: tc.token, body: body})
			if r.code != tc.code || !strings.Contains(string(r.body), tc.want) {
				t.Fatalf("%d %s, want %d with %q", r.code, r, tc.code, tc.want)
			}
			if tc.code == 301 {
				if loc := r.header.Get("Location"); !strings.HasSuffix(loc, "/proxy/?method=GET") {
					t.Errorf("Location %q, want .../proxy/?method=GET", loc)
				}
			}
			if tc.code >= 400 && tc.method != "HEAD" {
				if st := r.status(t); st.Code != int32(tc.code) {
					t.Fatalf("Status code %d, want %d", st.Code, tc.code)
				}
			}
			switch got := d.last(); {
			case tc.dialed != "" && (got != tc.dialed || d.count() != before+1):
				t.Errorf("dialed %q (%d dials), want %q once", got, d.count()-before, tc.dialed)
			case tc.dialed == "" && d.count() != before:
				t.Errorf("dialed %q, want no dial", got)
			}
		})
	}
}
