package ingress_test

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/isle-cluster/isle/node/ingress"
)

// An Ingress routes hello.example.com to the Service default/hello, whose
// one ready endpoint is a test server standing in for a pod.
func Example() {
	pod := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from the pod, path %s", r.URL.Path)
	}))
	defer pod.Close()
	ip, portStr, _ := net.SplitHostPort(pod.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)

	c, err := ingress.New(ingress.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	isle, prefix, portName, ready := "isle", networkingv1.PathTypePrefix, "http", true
	c.Update(ingress.Snapshot{
		Classes: []*networkingv1.IngressClass{{
			ObjectMeta: metav1.ObjectMeta{Name: "isle"},
			Spec:       networkingv1.IngressClassSpec{Controller: ingress.ControllerName},
		}},
		Ingresses: []*networkingv1.Ingress{{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hello"},
			Spec: networkingv1.IngressSpec{
				IngressClassName: &isle,
				Rules: []networkingv1.IngressRule{{
					Host: "hello.example.com",
					IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
						Paths: []networkingv1.HTTPIngressPath{{
							Path: "/", PathType: &prefix,
							Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
								Name: "hello", Port: networkingv1.ServiceBackendPort{Name: "http"},
							}},
						}},
					}},
				}},
			},
		}},
		Services: []*corev1.Service{{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hello"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
		}},
		Slices: []*discoveryv1.EndpointSlice{{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "hello-x7k2p", Labels: map[string]string{discoveryv1.LabelServiceName: "hello"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: new(int32(port))}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		}},
	})

	for _, url := range []string{"http://hello.example.com/greet", "http://other.example.com/"} {
		rec := httptest.NewRecorder()
		c.Handler().ServeHTTP(rec, httptest.NewRequest("GET", url, nil))
		fmt.Println(rec.Code, rec.Body.String())
	}
	// Output:
	// 200 hello from the pod, path /greet
	// 404 404 page not found
}
