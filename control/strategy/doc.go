// Package strategy defaults and validates the Kubernetes objects isle serves,
// the way the Kubernetes API server does it for the same types: the defaulting
// of k8s.io/kubernetes pkg/apis/*/v1 (plus the few defaults that Kubernetes'
// registry strategies and default admission plugins apply to every object, such
// as Service IP family policy and Pod priority), and the create, update and
// status-update validation of pkg/apis/*/validation, with Kubernetes' field
// paths, error types and messages.
//
// The entry points are Default, ValidateCreate, ValidateUpdate and
// ValidateStatusUpdate; they take pointers to k8s.io/api types. The per-type
// functions live in one ordered table (table.go). Types not in the table are
// left alone by Default and reported as internal errors by the validators.
//
// The package keeps no state and is safe for concurrent use.
package strategy
