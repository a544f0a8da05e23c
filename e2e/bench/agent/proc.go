package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
	"github.com/isle-cluster/isle/node/island"
)

// memoryOf reads the memory of the island's process p.
func memoryOf(p island.Proc) (benchkit.Memory, error) {
	if !p.Alive() {
		return benchkit.Memory{}, fmt.Errorf("PID %d: the process has exited", p.PID)
	}
	return benchkit.ReadMemory(p.PID)
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

// faultsOf reads the minor page faults the island's process p has taken
// from /proc/PID/stat.
func faultsOf(p island.Proc) (uint64, error) {
	b, err := readProc(p, "stat")
	if err != nil {
		return 0, err
	}
	minor, _, err := benchkit.Faults(b)
	if err != nil {
		return 0, fmt.Errorf("page faults of PID %d: %w", p.PID, err)
	}
	return minor, nil
}

// forgetReferences clears the referenced bits of the pages of the island's
// process p (/proc/PID/clear_refs), so that binaryReferenced counts the
// pages it uses from then on.
func forgetReferences(p island.Proc) error {
	if err := os.WriteFile("/proc/"+strconv.Itoa(p.PID)+"/clear_refs", []byte("1"), 0); err != nil {
		return fmt.Errorf("PID %d: %w", p.PID, err)
	}
	return nil
}

// binaryReferenced is how much of the executable's mapped pages the
// island's process p used since forgetReferences. RssFile counts more: the
// kernel maps the pages around each page read (fault-around), and those the
// process used once, at start.
func binaryReferenced(p island.Proc) (uint64, error) {
	exe, err := os.Readlink("/proc/" + strconv.Itoa(p.PID) + "/exe")
	if err != nil {
		return 0, fmt.Errorf("PID %d: %w", p.PID, err)
	}
	smaps, err := readProc(p, "smaps")
	if err != nil {
		return 0, err
	}
	n, err := referenced(smaps, exe)
	if err != nil {
		return 0, fmt.Errorf("PID %d: smaps: %w", p.PID, err)
	}
	return n, nil
}

// referenced sums the Referenced lines of the mappings of the file path in
// a /proc/PID/smaps, in bytes.
func referenced(smaps []byte, path string) (uint64, error) {
	var sum uint64
	in, seen := false, false
	for line := range strings.Lines(string(smaps)) {
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && !strings.HasSuffix(f[0], ":"): // a mapping: range, perms, offset, device, inode, path
			in = len(f) >= 6 && strings.Join(f[5:], " ") == path
			seen = seen || in
		case in && len(f) == 3 && f[0] == "Referenced:" && f[2] == "kB":
			n, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%q: %w", strings.TrimSpace(line), err)
			}
			sum += n << 10
		}
	}
	if !seen {
		return 0, fmt.Errorf("no mapping of %s", path)
	}
	return sum, nil
}

// mappingsOf counts the memory mappings (VMAs) of the island's process p,
// each of which costs the kernel about 200 bytes (a vm_area_struct) that
// no RSS counts: hw/pageout cuts the binary's into pieces.
func mappingsOf(p island.Proc) (int, error) {
	b, err := readProc(p, "maps")
	if err != nil {
		return 0, err
	}
	return strings.Count(string(b), "\n"), nil
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
