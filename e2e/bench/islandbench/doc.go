// Package islandbench is what the benchmark commands that run an island
// (`isle up`, node/island) share: making and removing the bench's island
// with the isle binary, pushing the hello image (deploy/hello) to the
// island's registry, running pods with kubectl and waiting for them, and
// the order and medians of measurement trials that take turns.
//
// It drives the isle and kubectl binaries as a user would; the benchmarks
// (node/netbench, node/trafficbench) measure on what it starts.
package islandbench
