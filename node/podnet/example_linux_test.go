package podnet_test

import (
	"context"
	"log"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/isle-cluster/isle/node/podnet"
)

// A board's Pod network as the agent wires it: the pod CIDR from its
// Node, the other Nodes as peers, and the pods manager attaching pods.
func Example() {
	n, err := podnet.New(podnet.Config{
		NodeIP:   netip.MustParseAddr("192.168.1.21"),
		StateDir: "/var/lib/isle/podnet",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer n.Close()
	if err := n.SetPodCIDR(netip.MustParsePrefix("10.42.1.0/24")); err != nil {
		log.Fatal(err)
	}
	if err := n.SetPeers([]podnet.Peer{
		{Name: "pi-2", Addr: netip.MustParseAddr("192.168.1.22"), PodCIDR: netip.MustParsePrefix("10.42.2.0/24")},
	}); err != nil {
		log.Print(err) // the routes that could be made are made
	}
	// A pod from the API server; node/netns made its namespace.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "0b9a4c2e-1111-4d8e-9d3a-7c1f6f0e0a01"}}
	ips, err := n.Attach(context.Background(), pod, "/run/isle/netns/"+string(pod.UID))
	if err != nil {
		log.Fatal(err)
	}
	log.Print("pod IP ", ips[0])
}
