// Package netns makes, enters and removes the network namespaces of pods.
//
// The agent owns a pod's network namespace (there is no pause container):
// Create unshares a new namespace on a locked OS thread and bind-mounts it
// at a path of the agent's, so it outlives every process in it; containerd's
// containers join it by that path, and Delete unmounts and removes it.
//
// Code of the agent itself reaches into a namespace in two ways: Do runs a
// function on an OS thread switched into it (for netlink or listening
// sockets), and Dialer returns a dial function whose sockets are made inside
// it, so probes reach a pod's loopback or address whatever the pod network.
//
// A namespace is tied to an OS thread, not to a goroutine: goroutines that
// Do's function starts run on other threads, in the agent's namespace.
package netns
