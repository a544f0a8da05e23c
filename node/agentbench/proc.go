package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/isle-cluster/isle/node/island"
	"github.com/isle-cluster/isle/raft/benchkit"
)

// memory is a process's resident memory, in bytes.
type memory struct {
	rss, peak  uint64 // VmRSS, VmHWM
	anon, file uint64 // RssAnon (heap, stacks), RssFile (the binary's pages)
}

// memoryOf reads the memory of the island's process p from
// /proc/PID/status.
func memoryOf(p island.Proc) (memory, error) {
	b, err := readProc(p, "status")
	if err != nil {
		return memory{}, err
	}
	v, err := benchkit.ProcFields(b, "VmRSS", "VmHWM", "RssAnon", "RssFile")
	if err != nil {
		return memory{}, fmt.Errorf("memory of PID %d: %w", p.PID, err)
	}
	return memory{rss: v[0], peak: v[1], anon: v[2], file: v[3]}, nil
}

// cpuTimeOf reads the CPU time (user and system) the island's process p
// has used from /proc/PID/stat.
func cpuTimeOf(p island.Proc) (time.Duration, error) {
	b, err := readProc(p, "stat")
	if err != nil {
		return 0, err
	}
	d, err := benchkit.CPUTime(b)
	if err != nil {
		return 0, fmt.Errorf("CPU time of PID %d: %w", p.PID, err)
	}
	return d, nil
}

// readProc reads /proc/PID/file of p, if p still runs.
func readProc(p island.Proc, file string) ([]byte, error) {
	if !p.Alive() {
		return nil, fmt.Errorf("PID %d: the process has exited", p.PID)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/" + file)
	if err != nil {
		return nil, fmt.Errorf("PID %d: %w", p.PID, err)
	}
	return b, nil
}
