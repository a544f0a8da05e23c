package dns_test

import (
	"fmt"
	"net/netip"

	"github.com/isle-cluster/isle/node/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func ExamplePodResolvConf() {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-0"}}
	host := []byte("nameserver 192.168.1.1\nsearch lan\n")
	rc, err := dns.PodResolvConf(pod, netip.MustParseAddr("10.43.0.10"), "cluster.local", host)
	if err != nil {
		panic(err)
	}
	fmt.Print(string(rc))
	// Output:
	// nameserver 10.43.0.10
	// search shop.svc.cluster.local svc.cluster.local cluster.local lan
	// options ndots:5
}
