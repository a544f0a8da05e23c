// Package registry is the heart of isle's API server: the table of served
// resources and the one write path every change goes through, whether it
// comes over HTTP or from an in-process controller:
//
//	decode → default → validate → admit → store
//
// Objects are stored as JSON in the replicated store (package raft) under
// /registry/<group>/<resource>/[<namespace>/]<name>; an object's
// resourceVersion is the store revision of its last change, so optimistic
// concurrency is a compare-and-swap on that revision, and a watch resumes
// from any revision the store's history still holds (older: 410 Gone).
package registry
