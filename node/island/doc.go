// Package island runs a whole isle cluster on one Linux machine: every
// simulated board is a network namespace with its own address on a shared
// LAN, its own containerd, data directory and isle process, so pods,
// routes, failures and LEDs behave as on real boards (`isle up`).
//
// What an island is made of, all recorded in DIR/island.json before it is
// made, so `isle down` removes it even after a crash:
//
//	switch namespace isle-lan     bridge br0: the LAN (10.77.0.0/24)
//	  port host  <-> host link isle-lan    10.77.0.1, the registry on :5000
//	  port piN   <-> eth0 of board namespace isle-piN
//	board namespace isle-piN      eth0 10.77.0.(10+N), containerd, isle
//	DIR/piN/data                  the board's data directory (/var/lib/isle)
//	DIR/piN/containerd            containerd's root (images, snapshots)
//	DIR/piN/run                   the board's /run: containerd's state,
//	                              runc's, pods' namespaces and FIFOs
//	DIR/registry                  Debian's docker-registry and its data
//	DIR/kubeconfig                an administrator's kubeconfig for the VIP
//	DIR/resolv.conf               the boards' resolver: the host (10.77.0.1)
//
// Servers share a floating API address (the VIP, 10.77.0.10), so kubectl
// keeps working when the Raft leader's board dies. Boards pull images
// named registry.island/... from the island's registry (a registry
// mirror), so nothing needs the internet. The host gets unreachable routes
// for the cluster's pod and service ranges: island traffic never leaves
// the machine.
package island
