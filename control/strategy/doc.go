// Package strategy defaults and validates the Kubernetes objects isle serves,
// the way the Kubernetes API server does it for the same types: the defaulting
// of k8s.io/kubernetes pkg/apis/*/v1 (plus the few defaults that Kubernetes'
// registry strategies and default admission plugins apply to every object, such
// as Service IP family policy and Pod priority), and the create, update and
// status-update validation of pkg/apis/*/validation, with Kubernetes' field
// paths, error types and messages.
//
// Each served type has one exported strategy, a Kind (Pod, Deployment, ...),
// that the registry's table of kinds pairs with its resource; with it come
// the type's field selectors (PodFields, ...) and, for kinds with a scale
// subresource or two served versions, their replicas and conversion.
//
// The package keeps no state and is safe for concurrent use.
package strategy
