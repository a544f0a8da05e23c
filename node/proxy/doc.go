// Package proxy is the Service data plane of a board, kube-proxy's part:
// traffic to a Service's cluster IP, node port or external IP goes to one
// of its endpoints, by DNAT in an nftables table of the board, ip
// isle-proxy (IPv4 only, as the Pod network). There is no proxying in
// user space and no iptables.
//
// Sync takes all Services and EndpointSlices and makes the table program
// them, in one nftables transaction, sending only the chains, sets and
// map elements that changed (all of them after New or a failed Sync).
// Objects it cannot program (a bad address, port 0, SCTP...) are left out
// with a warning, logged once.
//
// # Semantics
//
// As kube-proxy's: ClusterIP, NodePort and LoadBalancer Services (the
// last as NodePort ones; headless and ExternalName ones are not the
// proxy's); endpoints from the slices labelled with the Service's name,
// the ready ones, or if none is ready the serving terminating ones; the
// slice port of the service port's name and protocol; random balancing,
// or ClientIP session affinity; internalTrafficPolicy and
// externalTrafficPolicy Local (local: an endpoint whose nodeName is
// Config.NodeName); a port without endpoints rejected at once (ICMP port
// unreachable: connect fails with ECONNREFUSED), as is any other port of a
// cluster IP. Masqueraded are: traffic from outside the cluster CIDR to a
// cluster IP (the board's own processes), node port traffic with
// externalTrafficPolicy Cluster, and a pod reaching itself (hairpin). The
// mark bit MasqueradeMark (0x4000) is the proxy's.
//
// A pod reaching an endpoint on its own bridge gets the reply over the
// bridge, where only br_netfilter lets conntrack undo the DNAT: New turns
// bridge-nf-call-iptables on (loading br_netfilter if it must), and if it
// cannot, masquerades traffic from the pod CIDR to local endpoints, so
// that replies come back through the board. A pod reaching itself needs
// hairpin mode on its bridge port.
//
// The cluster DNS Service IP, if Config.DNS is set, is sent to the board's
// DNS server (UDP and TCP port 53) instead.
//
// Traffic to a cluster IP from the board itself needs a route for it
// (any, such as the default route): the kernel picks the route before the
// table's DNAT. So does the rejection of pods' traffic to a port without
// endpoints, which happens on the forward path.
//
// # The table
//
// In nft's words (C the cluster CIDR, P a service port, A an endpoint):
//
//	table ip isle-proxy {
//	  map service-ips { type ipv4_addr . inet_proto . inet_service : verdict   # cluster and external IPs
//	    10.43.0.10 . udp . 53 : goto cluster-dns, 10.43.0.20 . tcp . 80 : goto svc-P, ... }
//	  map service-nodeports { type inet_proto . inet_service : verdict
//	    tcp . 30080 : goto ext-P, ... }
//	  map no-endpoint-services { ... : verdict }   # CLUSTERIP . tcp . 80 : goto reject (or drop: iTP Local, none here)
//	  map no-endpoint-nodeports { ... : verdict }
//	  set cluster-ips { type ipv4_addr }
//	  map endpoint-counters { ... : verdict }     # A . tcp . 8080 : goto cnt-P
//	  map all-P { type 0 : verdict; 0 : goto ep-P/A1, 1 : goto ep-P/A2, ... }   # and local-P
//	  set aff-P/A { type ipv4_addr; flags dynamic,timeout; timeout 3h }          # ClientIP affinity
//	  counter P { packets 0 bytes 0 }
//
//	  chain nat-prerouting { type nat hook prerouting priority dstnat; jump services }
//	  chain nat-output { type nat hook output priority dstnat; jump services }
//	  chain nat-postrouting { type nat hook postrouting priority srcnat; jump masquerading }
//	  chain services {
//	    ip daddr . meta l4proto . th dport vmap @service-ips
//	    ip daddr != 127.0.0.0/8 fib daddr type local meta l4proto . th dport vmap @service-nodeports
//	  }
//	  chain svc-P {                                   # to the cluster IP
//	    ip saddr != C jump mark-for-masquerade
//	    [ip saddr @aff-P/A goto ep-P/A ...]
//	    numgen random mod 2 vmap @all-P               # or local-P; one endpoint: goto ep-P/A
//	  }
//	  chain ext-P {                                   # to the node port and external IPs
//	    jump mark-for-masquerade                      # externalTrafficPolicy Cluster
//	    numgen random mod 2 vmap @all-P
//	    # Local: ip saddr C ... vmap @all-P; fib saddr type local jump mark-for-masquerade;
//	    #        fib saddr type local ... vmap @all-P; numgen ... vmap @local-P (or drop)
//	  }
//	  chain ep-P/A {
//	    ip saddr A jump mark-for-masquerade           # hairpin (without br_netfilter: ip saddr P-CIDR)
//	    [update @aff-P/A { ip saddr }]
//	    meta l4proto tcp dnat to A
//	  }
//	  chain cluster-dns { meta l4proto udp dnat to TARGET:53; meta l4proto tcp dnat to TARGET:53 }
//	  chain masquerading {
//	    meta mark & 0x4000 == 0 return
//	    meta mark set meta mark ^ 0x4000
//	    masquerade fully-random
//	  }
//	  chain mark-for-masquerade { meta mark set meta mark | 0x4000 }
//
//	  chain filter-input { type filter hook input priority -110; ct state new jump endpoints-check }
//	  chain filter-forward { type filter hook forward priority -110
//	    ct state new jump endpoints-check
//	    ct state new ip daddr @cluster-ips reject     # a port no service has
//	  }
//	  chain filter-output { type filter hook output priority dstnat + 10
//	    jump count; ct state new jump endpoints-check; ct state new ip daddr @cluster-ips reject
//	  }
//	  chain endpoints-check {
//	    ip daddr . meta l4proto . th dport vmap @no-endpoint-services
//	    ip daddr != 127.0.0.0/8 fib daddr type local meta l4proto . th dport vmap @no-endpoint-nodeports
//	  }
//	  chain reject { reject }
//
//	  chain filter-prerouting { type filter hook prerouting priority dstnat + 10; jump count }
//	  chain count {
//	    ct status ! dnat return
//	    ct direction original ip daddr . meta l4proto . th dport vmap @endpoint-counters
//	    ct direction reply ip saddr . meta l4proto . th sport vmap @endpoint-counters
//	  }
//	  chain cnt-P { counter name "P" }
//	}
//
// P is readable with a short hash, "default/web/tcp/http-95253a"; an
// endpoint's chain adds its address, "ep-default/web/tcp/http/10.42.1.5:8080-707a25".
//
// The counters count, both ways, the packets of connections this board
// DNATed, by their endpoint: an endpoint of two Services counts for the
// first (by namespace and name). The numbers a balancing map holds are
// host-order integers, which nft shows as "type 0".
//
// # Updates
//
// The Proxy keeps the hash of every chain's rules and of every set's
// elements it wrote last. A Sync sends: the sets, counters and chains that
// are new; a flush and the rules of every chain that changed; a flush and
// the elements of every set that changed; then the removal of what is
// gone, once nothing refers to it. Affinity sets of endpoints that stay
// keep their clients; the name of an affinity set holds its timeout, so
// another timeout is another set. One transaction is one netlink message,
// answered part by part: the socket's buffers are raised to hold a large
// one.
//
// When an endpoint leaves a UDP service port, the Sync that removes it
// then deletes the conntrack entries of the UDP flows DNATed to it through
// that port (the cluster IP, a node port or an external IP), as kube-proxy
// does: a UDP flow has no end, and conntrack would keep sending a client
// that never stops to the endpoint that is gone. It knows what it
// programmed since New; entries from before a restart time out.
//
// # NetworkPolicies
//
// Policies enforces the NetworkPolicies on the board's pods, in a table of
// its own, ip isle-policy, written by the same code as the Service table
// (only what changed is sent). Its Sync takes every NetworkPolicy, pod and
// Namespace of the cluster. A pod of the board that a policy selects is
// isolated in that policy's directions: only what one of the rules of the
// policies selecting it allows passes. Peers are the pods a podSelector
// chooses in the policy's namespace, or in the namespaces a
// namespaceSelector chooses, and ipBlocks without their exceptions (pod
// addresses included); ports are a protocol (TCP by default), a number, a
// range up to endPort, or a name, resolved on the pod that listens: the
// isolated pod for ingress, each peer pod for egress. Pods on the host's
// network are neither isolated nor peers, and ended pods are not peers.
//
// The rules sit on the forward hook at the usual filter priority, after
// the Service DNAT: a Service's traffic meets them with the endpoint's
// address and port. Packets of established and related connections pass
// first, so that connections made before a policy change keep going; the
// first packet of a new connection goes through the egress chain of its
// source, if that pod is isolated for egress, then the ingress chain of
// its destination. A connection a policy refuses is dropped (it times
// out). Traffic between a pod and its own board (the input and output
// hooks: probes, the cluster DNS on the bridge address) is never
// filtered, as upstream documents for a pod's node. Bridged traffic
// between two pods of the board meets the rules through br_netfilter (see
// above).
package proxy
