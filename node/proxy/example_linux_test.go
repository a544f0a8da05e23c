package proxy_test

import (
	"log"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/isle-cluster/isle/node/proxy"
)

// The proxy of board pi1, whose pods are 10.42.1.0/24 and whose DNS server
// listens on its bridge address; Sync runs whenever a Service or an
// EndpointSlice changes.
func Example() {
	px, err := proxy.New(proxy.Config{
		NodeName: "pi1",
		PodCIDR:  netip.MustParsePrefix("10.42.1.0/24"),
		DNS: proxy.DNSRedirect{ServiceIP: netip.MustParseAddr("10.43.0.10"),
			Target: netip.MustParseAddr("10.42.1.1")},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer px.Close()
	prometheus.MustRegister(px.Collector())

	var svcs []*corev1.Service              // from an informer
	var slices []*discoveryv1.EndpointSlice // from an informer
	if err := px.Sync(svcs, slices); err != nil {
		log.Print(err) // the next Sync writes the whole table again
	}
}
