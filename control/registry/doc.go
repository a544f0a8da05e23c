// Package registry is the heart of isle's API server: the table of served
// resources (kinds.go, one Resource entry per kind) and the one write path
// every change goes through, whether it comes over HTTP or from an
// in-process controller:
//
//	decode → default → validate → admit → store
//
// Objects are stored as JSON in the replicated store (package raft) under
// /registry/<group>/<resource>/[<namespace>/]<name>; an object's
// resourceVersion is the store revision of its last change, so optimistic
// concurrency is a compare-and-swap on that revision, and a watch resumes
// from any revision the store's history still holds (older: 410 Gone).
//
// The write path has no code of its own for any kind: it calls the
// functions of the kind's entry (its Strategy, Admission, Scale, ...),
// which take runtime.Object, so a kind need not be a Go type.
package registry
