// Package printers renders API objects as rows of a meta.k8s.io/v1 Table,
// the server-side printing that `kubectl get` asks for with
// "Accept: application/json;as=Table;g=meta.k8s.io;v=v1".
//
// Every resource isle serves has a Printer (Pods, Deployments, ...), which
// the registry's table of kinds names in the resource's entry: its Columns
// give the column definitions and its Rows the cells, with the same names,
// order, types and cell contents as a Kubernetes 1.32 API server
// (pkg/printers/internalversion in Kubernetes).
// Like Kubernetes' API server, rows always carry the `-o wide` columns
// (Priority 1); kubectl hides them unless asked for wide output.
//
// The package is pure: it reads objects of the k8s.io/api types, never
// changes them, and takes the current time as an argument so AGE cells are
// reproducible.
package printers
