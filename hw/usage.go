package hw

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// CPUTimes is the time the board's CPUs have spent since boot, from the
// first line of /proc/stat, in clock ticks summed over the online CPUs.
// Usage is the change between two readings (see CoresSince).
type CPUTimes struct {
	// Busy is user, nice, system, irq, softirq and steal time: everything
	// but idle and iowait (guest time is already inside user and nice).
	Busy uint64
	// Total is Busy plus idle and iowait.
	Total uint64
	// CPUs is the number of online CPUs (the "cpuN" lines).
	CPUs int
}

// ReadCPUTimes reads /proc/stat.
func ReadCPUTimes() (CPUTimes, error) { return readCPUTimes("/proc/stat") }

func readCPUTimes(path string) (CPUTimes, error) {
	var t CPUTimes
	b, err := os.ReadFile(path)
	if err != nil {
		return t, fmt.Errorf("hw: CPU times: %w", err)
	}
	sawTotal := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) > 0 && fields[0] == "cpu":
			// user nice system idle iowait irq softirq steal [guest guest_nice]
			if len(fields) < 9 {
				return t, fmt.Errorf("hw: CPU times: %s: %d fields on the cpu line, want at least 8 numbers", path, len(fields)-1)
			}
			var v [8]uint64
			for i := range v {
				n, err := strconv.ParseUint(fields[i+1], 10, 64)
				if err != nil {
					return t, fmt.Errorf("hw: CPU times: %s: cpu field %d: %w", path, i+1, err)
				}
				v[i] = n
			}
			t.Busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
			t.Total = t.Busy + v[3] + v[4]
			sawTotal = true
		case len(fields) > 0 && strings.HasPrefix(fields[0], "cpu"):
			t.CPUs++
		}
	}
	if !sawTotal || t.CPUs == 0 {
		return t, fmt.Errorf("hw: CPU times: %s has no cpu lines", path)
	}
	return t, nil
}

// CoresSince is the average number of CPUs that were busy between prev and
// t (0.5 is half of one CPU). ok is false when no time has passed between
// them, or the counters went backwards (not two readings of one boot).
func (t CPUTimes) CoresSince(prev CPUTimes) (cores float64, ok bool) {
	if t.Total <= prev.Total || t.Busy < prev.Busy {
		return 0, false
	}
	busy, total := float64(t.Busy-prev.Busy), float64(t.Total-prev.Total)
	// iowait may go backwards on some kernels, so the share is capped.
	return min(busy/total, 1) * float64(t.CPUs), true
}

// ReadMemoryWorkingSet returns the memory the board uses and cannot
// reclaim in a hurry: MemTotal less MemAvailable of /proc/meminfo, in
// bytes. It stands for the kubelet's node working set (what metrics.k8s.io
// reports as a Node's memory usage).
func ReadMemoryWorkingSet() (int64, error) { return memoryWorkingSet("/proc/meminfo") }

func memoryWorkingSet(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("hw: memory usage: %w", err)
	}
	kb := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || (fields[0] != "MemTotal:" && fields[0] != "MemAvailable:") {
			continue
		}
		n, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("hw: memory usage: %s: %s %q", path, fields[0], fields[1])
		}
		kb[fields[0]] = n
	}
	total, okTotal := kb["MemTotal:"]
	avail, okAvail := kb["MemAvailable:"]
	if !okTotal || !okAvail {
		return 0, fmt.Errorf("hw: memory usage: %s lacks MemTotal or MemAvailable (a kernel older than 3.14?)", path)
	}
	return max(total-avail, 0) * 1024, nil
}
