package benchkit

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Proc is a process a benchmark started, its output going to a log file.
type Proc struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error // set before exited is closed
}

// StartProc runs bin with args under name (which messages about it use),
// its output appended to logPath. The process gets a process group of its
// own, so that a terminal's Ctrl-C reaches only the benchmark, which then
// stops it; on Linux it is also killed when the benchmark dies without
// doing so.
func StartProc(name, logPath, bin string, args ...string) (*Proc, error) {
	return StartProcEnv(name, logPath, nil, bin, args...)
}

// StartProcEnv is StartProc with env as the process's environment, for a
// program that takes settings from variables this process may carry. A
// nil env is this process's environment.
func StartProcEnv(name, logPath string, env []string, bin string, args ...string) (*Proc, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: open log: %w", name, err)
	}
	// The child has its own copy of the descriptor once started.
	defer log.Close()
	p := &Proc{name: name, logPath: logPath, cmd: exec.Command(bin, args...), exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = log, log
	p.cmd.Env = env
	p.cmd.SysProcAttr = childAttr()
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { p.waitErr = p.cmd.Wait(); close(p.exited) }()
	return p, nil
}

// Name is the name the process was started under.
func (p *Proc) Name() string { return p.name }

// Pid is the process's id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Dead reports an error, with the end of the log, if the process has
// exited.
func (p *Proc) Dead() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited (%v); its log ends:\n%s", p.name, p.waitErr, p.Tail(15))
	default:
		return nil
	}
}

// Stop sends SIGTERM, kills the process if it has not exited after grace,
// and returns once it has exited.
func (p *Proc) Stop(grace time.Duration) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		p.Kill()
	}
}

// Kill sends SIGKILL and returns once the process has exited.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// Tail returns the last n lines of the process's log, indented.
func (p *Proc) Tail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// Memory returns the process's resident set size and its peak (VmRSS and
// VmHWM of /proc/PID/status), in bytes.
func (p *Proc) Memory() (rss, peak uint64, err error) {
	v, err := p.procFields("status", "VmRSS", "VmHWM")
	if err != nil {
		return 0, 0, fmt.Errorf("read memory of %s: %w", p.name, err)
	}
	return v[0], v[1], nil
}

// WriteBytes returns write_bytes of /proc/PID/io: the bytes the process
// caused to be written to storage, counted when pages are dirtied.
func (p *Proc) WriteBytes() (uint64, error) {
	v, err := p.procFields("io", "write_bytes")
	if err != nil {
		return 0, fmt.Errorf("read io of %s: %w", p.name, err)
	}
	return v[0], nil
}

// procFields reads the "key: N" lines of /proc/PID/file for keys, in that
// order, and returns the Ns in bytes (N KiB where the line ends in kB).
func (p *Proc) procFields(file string, keys ...string) ([]uint64, error) {
	if err := p.Dead(); err != nil {
		return nil, err
	}
	path := "/proc/" + strconv.Itoa(p.Pid()) + "/" + file
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	v, err := ProcFields(b, keys...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// ProcFields returns the values of the "key: N" or "key: N kB" lines of a
// /proc/PID/status (or io) for keys, in that order, in bytes.
func ProcFields(b []byte, keys ...string) ([]uint64, error) {
	found := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v, kB := strings.CutSuffix(strings.TrimSpace(v), " kB")
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			continue // a field that is not a number, such as Name
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
			return nil, fmt.Errorf("no %s line", k)
		}
		out[i] = n
	}
	return out, nil
}

// WaitFor polls cond, each call bounded by two seconds, until it returns
// nil, one of procs exits, ctx ends, or d passes; what names the wait in
// its errors.
func WaitFor(ctx context.Context, d time.Duration, what string, procs []*Proc, cond func(context.Context) error) error {
	deadline := time.Now().Add(d)
	for {
		for _, p := range procs {
			if err := p.Dead(); err != nil {
				return fmt.Errorf("wait for %s: %w", what, err)
			}
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := cond(cctx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("wait for %s: %w", what, ctx.Err())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("wait for %s: timed out after %v: %w", what, d, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// CPUTime returns the CPU time the process has used (user and system,
// from /proc/PID/stat).
func (p *Proc) CPUTime() (time.Duration, error) {
	if err := p.Dead(); err != nil {
		return 0, err
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.Pid()) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("read CPU time of %s: %w", p.name, err)
	}
	d, err := CPUTime(b)
	if err != nil {
		return 0, fmt.Errorf("read CPU time of %s: %w", p.name, err)
	}
	return d, nil
}

// userHZ is the unit of /proc/PID/stat's times on Linux.
const userHZ = 100

// CPUTime is utime + stime of a /proc/PID/stat.
func CPUTime(stat []byte) (time.Duration, error) {
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

// MemorySplit returns the process's resident memory split into anonymous
// (its own: heap, stacks) and file-backed pages (its binary's text and
// data, shared with every process mapping them and dropped by the kernel
// under pressure), from RssAnon and RssFile of /proc/PID/status.
func (p *Proc) MemorySplit() (anon, file uint64, err error) {
	v, err := p.procFields("status", "RssAnon", "RssFile")
	if err != nil {
		return 0, 0, fmt.Errorf("read memory of %s: %w", p.name, err)
	}
	return v[0], v[1], nil
}

// Memory is a process's memory as the kernel counts it, in bytes.
type Memory struct {
	// RSS and Peak are VmRSS and VmHWM of /proc/PID/status: the pages
	// mapped into the process, and the most there were.
	RSS, Peak uint64
	// Anon and File split RSS (RssAnon, RssFile): the process's own pages
	// (heap, stacks) and those of files it maps (its binary's text and
	// data), which are shared with every process mapping them and which
	// the kernel drops and reads again as it needs.
	Anon, File uint64
	// PSS is Pss of /proc/PID/smaps_rollup: RSS with each page shared by
	// n processes counted 1/n. The file-backed pages of one binary run
	// as several processes count once over them.
	PSS uint64
}

// ReadMemory reads the memory of the process pid from /proc/PID/status
// and /proc/PID/smaps_rollup (Linux 4.14 and later).
func ReadMemory(pid int) (Memory, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	status, err := os.ReadFile(dir + "status")
	if err != nil {
		return Memory{}, fmt.Errorf("memory of PID %d: %w", pid, err)
	}
	v, err := ProcFields(status, "VmRSS", "VmHWM", "RssAnon", "RssFile")
	if err != nil {
		return Memory{}, fmt.Errorf("memory of PID %d: status: %w", pid, err)
	}
	rollup, err := os.ReadFile(dir + "smaps_rollup")
	if err != nil {
		return Memory{}, fmt.Errorf("memory of PID %d: %w", pid, err)
	}
	pss, err := ProcFields(rollup, "Pss")
	if err != nil {
		return Memory{}, fmt.Errorf("memory of PID %d: smaps_rollup: %w", pid, err)
	}
	return Memory{RSS: v[0], Peak: v[1], Anon: v[2], File: v[3], PSS: pss[0]}, nil
}

// Faults is minflt and majflt of a /proc/PID/stat: the page faults the
// process has taken that the kernel served from memory (a page already
// in the page cache, a new zeroed page), and those that read from disk.
func Faults(stat []byte) (minor, major uint64, err error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("stat %q: no command in parentheses", stat)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 10 {
		return 0, 0, fmt.Errorf("stat: %d fields after the command, want at least 10", len(f))
	}
	minor, err1 := strconv.ParseUint(f[7], 10, 64)
	major, err2 := strconv.ParseUint(f[9], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("stat: minflt %q, majflt %q: want numbers", f[7], f[9])
	}
	return minor, major, nil
}
