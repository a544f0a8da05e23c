// Package podnet is the Pod network of a board: a bridge, a veth pair and
// an address per pod, host-gw routes to the other boards' pods, and the
// NAT that pods need (masquerade to the world outside the cluster,
// hostPort mappings).
//
// Every board holds one /24 (its pod CIDR) of the cluster CIDR
// (10.42.0.0/16 by default). SetPodCIDR makes the bridge (isle0) with the
// first address of the CIDR as the pods' gateway, enables forwarding on
// it and on the LAN link (the link that holds the board's NodeIP), and
// writes the nftables table ip isle-podnet. Attach gives a pod's network
// namespace an eth0 (the far end of a veth whose near end joins the
// bridge), an address and a default route via the gateway; Detach
// removes them. SetPeers keeps a route to every other board's pod CIDR
// via that board's LAN address; all boards share one LAN, so no
// encapsulation is needed.
//
// # State
//
// Addresses are handed out round robin (the one after the last given,
// wrapping), so an address just freed is not reused at once. Each pod's
// address, namespace and hostPorts are a record file in Config.StateDir,
// written and synced before Attach returns; the nftables table is derived
// from the records, so an agent that restarts rebuilds the same table and
// gives an attached pod the same address. New releases the records of pods
// whose network namespace is gone (a reboot empties /run).
//
// # What is ours
//
// Routes this package makes carry the route protocol 73 (see
// RouteProtocol); the veths and the bridge carry the link alias
// "isle-podnet"; the nftables table is ip isle-podnet. Reconciling and
// Uninstall touch nothing else.
package podnet
