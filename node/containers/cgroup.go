package containers

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cgroupRoot is where the cgroup hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// Usage is what a cgroup (a container's or a pod's) used.
type Usage struct {
	// CPUNanos is the CPU time used since the cgroup was made.
	CPUNanos uint64
	// WorkingSet is the memory in use less inactive file pages, as the
	// kubelet reports it.
	WorkingSet uint64
}

// unified reports whether the machine uses cgroup v2 only.
func unified() bool {
	_, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers"))
	return err == nil
}

// CgroupUsage reads the usage of the cgroup at path (as in Spec's
// CgroupParent, or a container's Cgroup), from cgroup v1 or v2.
func CgroupUsage(path string) (Usage, error) {
	var u Usage
	if unified() {
		dir := filepath.Join(cgroupRoot, path)
		stat, err := readKeyed(filepath.Join(dir, "cpu.stat"))
		if err != nil {
			return u, fmt.Errorf("containers: cgroup %s: %w", path, err)
		}
		u.CPUNanos = stat["usage_usec"] * 1000
		cur, err := readUint(filepath.Join(dir, "memory.current"))
		if err != nil {
			return u, fmt.Errorf("containers: cgroup %s: %w", path, err)
		}
		mem, err := readKeyed(filepath.Join(dir, "memory.stat"))
		if err != nil {
			return u, fmt.Errorf("containers: cgroup %s: %w", path, err)
		}
		u.WorkingSet = sub(cur, mem["inactive_file"])
		return u, nil
	}
	cpu, err := readUint(filepath.Join(cgroupRoot, "cpuacct", path, "cpuacct.usage"))
	if err != nil {
		return u, fmt.Errorf("containers: cgroup %s: %w", path, err)
	}
	u.CPUNanos = cpu
	cur, err := readUint(filepath.Join(cgroupRoot, "memory", path, "memory.usage_in_bytes"))
	if err != nil {
		return u, fmt.Errorf("containers: cgroup %s: %w", path, err)
	}
	mem, err := readKeyed(filepath.Join(cgroupRoot, "memory", path, "memory.stat"))
	if err != nil {
		return u, fmt.Errorf("containers: cgroup %s: %w", path, err)
	}
	u.WorkingSet = sub(cur, mem["total_inactive_file"])
	return u, nil
}

func sub(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}

// cgroupOOMKilled reports whether the kernel's OOM killer killed a
// process of the cgroup at path (read before the cgroup is removed).
func cgroupOOMKilled(path string) bool {
	file := filepath.Join(cgroupRoot, "memory", path, "memory.oom_control")
	if unified() {
		file = filepath.Join(cgroupRoot, path, "memory.events")
	}
	kv, err := readKeyed(file)
	return err == nil && kv["oom_kill"] > 0
}

// RemoveCgroup removes the (empty) cgroup directory at path from every
// hierarchy: runc leaves a container's parent behind.
func RemoveCgroup(path string) error {
	if path == "" || path == "/" {
		return nil
	}
	dirs := []string{filepath.Join(cgroupRoot, path)}
	if !unified() {
		ents, err := os.ReadDir(cgroupRoot)
		if err != nil {
			return fmt.Errorf("containers: cgroups: %w", err)
		}
		dirs = dirs[:0]
		for _, e := range ents {
			if e.IsDir() {
				dirs = append(dirs, filepath.Join(cgroupRoot, e.Name(), path))
			}
		}
	}
	var errs []error
	for _, d := range dirs {
		if err := removeCgroupDir(d); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("containers: remove cgroup %s: %w", path, errors.Join(errs...))
	}
	return nil
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// readKeyed reads a file of "key value" lines (memory.stat, cpu.stat).
func readKeyed(path string) (map[string]uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]uint64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, sc.Err()
}

// removeCgroupDir removes a cgroup directory and the (empty) cgroups
// below it, deepest first; cgroup directories hold only kernel files,
// which go with them.
func removeCgroupDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.IsDir() {
			if err := removeCgroupDir(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
