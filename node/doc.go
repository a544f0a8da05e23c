// Package node is isle's node agent (the kubelet's role and more): it runs
// the pods bound to its board on containerd, sets up their network with
// netlink, programs Services with nftables, answers cluster DNS, serves
// Ingress and mounts volumes. It reaches the control plane only through
// the Kubernetes API.
//
// It is being built; see ARCHITECTURE.md for what exists today.
package node
