package probe_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/isle-cluster/isle/node/probe"
)

// An httpGet probe of a named port; with no PodIP and no Dial, it goes to
// 127.0.0.1 in the caller's network namespace (a hostNetwork pod).
func ExampleDo() {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
		}
	}))
	defer s.Close()
	u, _ := url.Parse(s.URL)
	port, _ := strconv.Atoi(u.Port())

	p := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
		HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")},
	}}
	t := probe.Target{Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}}
	r, msg := probe.Do(context.Background(), p, t, nil)
	fmt.Printf("%v %q\n", r, msg)

	p.HTTPGet.Path = "/missing"
	r, msg = probe.Do(context.Background(), p, t, nil)
	fmt.Printf("%v %q\n", r, msg)
	// Output:
	// Success ""
	// Failure "HTTP probe failed with statuscode: 404"
}
