package main

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/node/island"
)

func TestStatusFields(t *testing.T) {
	status := []byte("Name:\tisle\nState:\tS (sleeping)\nVmHWM:\t   30000 kB\nVmRSS:\t   20480 kB\nRssAnon:\t    8192 kB\nRssFile:\t   12288 kB\nThreads:\t9\n")
	got, err := statusFields(status, "VmRSS", "RssAnon", "Threads")
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint64{20480 << 10, 8192 << 10, 9}; !slices.Equal(got, want) {
		t.Errorf("statusFields = %v, want %v", got, want)
	}
	if _, err := statusFields(status, "VmRSS", "VmSwap"); err == nil || !strings.Contains(err.Error(), "VmSwap") {
		t.Errorf("statusFields without a VmSwap line: err = %v, want one naming VmSwap", err)
	}
}

func TestCPUTime(t *testing.T) {
	for _, c := range []struct {
		name, stat string
		want       time.Duration
		err        bool
	}{
		{"plain", "42 (isle) S 1 42 42 0 -1 4194560 100 0 0 0 250 130 0 0 20 0 9 0 1234", 3800 * time.Millisecond, false},
		{"command with spaces and parentheses", "42 (a b) c)) S 1 42 42 0 -1 0 0 0 0 0 7 3 0 0", 100 * time.Millisecond, false},
		{"no command", "42 isle S 1", 0, true},
		{"too short", "42 (isle) S 1 42", 0, true},
		{"not numbers", "42 (isle) S 1 42 42 0 -1 0 0 0 0 0 x y 0 0", 0, true},
	} {
		got, err := cpuTime([]byte(c.stat))
		if (err != nil) != c.err || got != c.want {
			t.Errorf("%s: cpuTime = %v, %v; want %v, error %v", c.name, got, err, c.want, c.err)
		}
	}
}

// self is this test process as the island records its processes. It is
// read by its PID, as island.Proc reads it (under qemu-user, /proc/self
// is the emulator's own view).
func self(t *testing.T) island.Proc {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(os.Getpid()) + "/stat")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if f[0] < "A" {
		// qemu-user answers for its guest with a stat of zeros: no state,
		// no CPU times (the native run of these tests reads the real one).
		t.Skipf("/proc/%d/stat is emulated (state %q): nothing to measure", os.Getpid(), f[0])
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		t.Fatalf("/proc/%d/stat: starttime %q: %v", os.Getpid(), f[19], err)
	}
	return island.Proc{PID: os.Getpid(), Start: start}
}

func TestOfRunningProcess(t *testing.T) {
	p := self(t)
	m, err := memoryOf(p)
	if err != nil {
		t.Fatal(err)
	}
	if m.rss == 0 || m.peak < m.rss || m.anon == 0 || m.anon+m.file > m.rss+m.rss/2 {
		t.Errorf("memoryOf(self) = %+v: want rss > 0, peak ≥ rss, anon > 0, anon+file about rss", m)
	}
	deadline := time.Now().Add(5 * time.Second)
	for n := 0; ; n++ { // burn CPU until the kernel counts a tick
		d, err := cpuTimeOf(p)
		if err != nil {
			t.Fatal(err)
		}
		if d > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cpuTimeOf(self) = 0 after %d reads", n)
		}
	}
}

func TestOfExitedProcess(t *testing.T) {
	p := self(t)
	p.Start++ // another process with the same PID
	if _, err := memoryOf(p); err == nil || !strings.Contains(err.Error(), "exited") {
		t.Errorf("memoryOf(a process that is gone) = %v, want an error saying it exited", err)
	}
	if _, err := cpuTimeOf(island.Proc{}); err == nil {
		t.Error("cpuTimeOf(no process) succeeded")
	}
}
