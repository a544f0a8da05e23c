// Package control is isle's control plane: the Kubernetes-compatible API
// server (the single entry point: authentication, authorization,
// validation, storage in the replicated store of package raft), the
// scheduler and the controllers, which run on the Raft leader only.
//
// It is being built; see ARCHITECTURE.md for what exists today.
package control
