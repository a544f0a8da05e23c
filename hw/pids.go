package hw

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// PIDs is how many process IDs are in use and how many the kernel hands
// out.
type PIDs struct {
	// Used is the number of tasks, processes and their threads (each takes
	// an ID): the total of the fourth field of /proc/loadavg.
	Used int64
	// Max is /proc/sys/kernel/pid_max, where IDs wrap around.
	Max int64
}

// ReadPIDs reads /proc/loadavg and /proc/sys/kernel/pid_max.
func ReadPIDs() (PIDs, error) { return readPIDs("/proc/loadavg", "/proc/sys/kernel/pid_max") }

func readPIDs(loadavgPath, pidMaxPath string) (PIDs, error) {
	var p PIDs
	b, err := os.ReadFile(pidMaxPath)
	if err != nil {
		return p, fmt.Errorf("hw: PIDs: %w", err)
	}
	if p.Max, err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err != nil || p.Max <= 0 {
		return p, fmt.Errorf("hw: PIDs: %s: %q is not a positive number", pidMaxPath, strings.TrimSpace(string(b)))
	}
	if b, err = os.ReadFile(loadavgPath); err != nil {
		return p, fmt.Errorf("hw: PIDs: %w", err)
	}
	// "0.20 0.18 0.12 1/80 11206": the fourth field is runnable/total tasks.
	fields := strings.Fields(string(b))
	if len(fields) < 4 {
		return p, fmt.Errorf("hw: PIDs: %s: %d fields, want at least 4", loadavgPath, len(fields))
	}
	_, total, ok := strings.Cut(fields[3], "/")
	if !ok {
		return p, fmt.Errorf("hw: PIDs: %s: fourth field %q is not runnable/total", loadavgPath, fields[3])
	}
	if p.Used, err = strconv.ParseInt(total, 10, 64); err != nil || p.Used < 0 {
		return p, fmt.Errorf("hw: PIDs: %s: task total %q is not a number", loadavgPath, total)
	}
	return p, nil
}
