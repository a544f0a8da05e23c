package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/isle-cluster/isle/node/island"
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
	v, err := statusFields(b, "VmRSS", "VmHWM", "RssAnon", "RssFile")
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
	d, err := cpuTime(b)
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

// statusFields returns the values of the "key: N" or "key: N kB" lines of
// a /proc/PID/status for keys, in that order, in bytes.
func statusFields(status []byte, keys ...string) ([]uint64, error) {
	found := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v, kB := strings.CutSuffix(strings.TrimSpace(v), " kB")
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			continue // not a number, such as Name
		}
		if kB {
			n <<= 10
		}
		found[k] = n
	}
	out := make([]uint64, len(keys))
	for i, k := range keys {
		n, ok := found[k]
		if !ok {
			return nil, fmt.Errorf("status has no %s line", k)
		}
		out[i] = n
	}
	return out, nil
}

// userHZ is the unit of /proc/PID/stat's times on Linux.
const userHZ = 100

// cpuTime is utime + stime of a /proc/PID/stat.
func cpuTime(stat []byte) (time.Duration, error) {
	// The fields after the command, which may hold spaces and ")".
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat %q: no command in parentheses", stat)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("stat: %d fields after the command, want at least 13", len(f))
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("stat: utime %q, stime %q: want numbers", f[11], f[12])
	}
	return time.Duration(utime+stime) * time.Second / userHZ, nil
}
