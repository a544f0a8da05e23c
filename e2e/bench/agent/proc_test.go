package main

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/node/island"
)

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
	if m.RSS == 0 || m.Peak < m.RSS || m.Anon == 0 || m.Anon+m.File > m.RSS+m.RSS/2 || m.PSS == 0 {
		t.Errorf("memoryOf(self) = %+v: want RSS > 0, Peak ≥ RSS, Anon > 0, Anon+File about RSS, PSS > 0", m)
	}
	if f, err := faultsOf(p); err != nil || f == 0 {
		t.Errorf("faultsOf(self) = %d, %v: want the faults a Go program takes", f, err)
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

// After clear_refs, the code this test runs from then on counts, and never
// more than its resident file-backed pages.
func TestBinaryReferenced(t *testing.T) {
	p := self(t)
	if err := forgetReferences(p); err != nil {
		t.Fatal(err)
	}
	n, err := binaryReferenced(p)
	if err != nil {
		t.Fatal(err)
	}
	m, err := memoryOf(p)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 || n > m.File {
		t.Errorf("binaryReferenced(self) = %d bytes, want more than none and at most RssFile, %d", n, m.File)
	}
	if _, err := referenced([]byte("00400000-00401000 r-xp 00000000 fe:00 12 /usr/bin/isle\nReferenced: 4 kB\n"), "/no/such/file"); err == nil ||
		!strings.Contains(err.Error(), "no mapping of /no/such/file") {
		t.Errorf("referenced(a file with no mapping) = %v, want an error naming it", err)
	}
}

// mostMemory reads the process until the time is up, and keeps the
// reading of the largest RSS.
func TestMostMemory(t *testing.T) {
	p := self(t)
	began := time.Now()
	m, err := mostMemory(context.Background(), p, 30*time.Millisecond, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < 30*time.Millisecond {
		t.Errorf("mostMemory returned after %v, want 30ms", took)
	}
	if m.RSS == 0 || m.PSS == 0 {
		t.Errorf("mostMemory(self) = %+v, want the process's memory", m)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := mostMemory(ctx, p, time.Hour, time.Minute); err == nil {
		t.Error("mostMemory after its context ended: no error")
	}
}
