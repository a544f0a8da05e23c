// Package printers renders API objects as rows of a meta.k8s.io/v1 Table,
// the server-side printing that `kubectl get` asks for with
// "Accept: application/json;as=Table;g=meta.k8s.io;v=v1".
//
// For every resource isle serves, Columns gives the column definitions and
// Rows the cells, with the same names, order, types and cell contents as a
// Kubernetes 1.32 API server (pkg/printers/internalversion in Kubernetes).
// Like Kubernetes' API server, rows always carry the `-o wide` columns
// (Priority 1); kubectl hides them unless asked for wide output.
//
// The package is pure: it reads objects of the k8s.io/api types, never
// changes them, and takes the current time as an argument so AGE cells are
// reproducible. The per-type printers are listed in one ordered table,
// handlers (printers.go).
package printers
