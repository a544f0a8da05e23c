package benchkit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startSh runs a shell script as a Proc, stopped when the test ends.
func startSh(t *testing.T, script string) *Proc {
	t.Helper()
	p, err := StartProc("sh", filepath.Join(t.TempDir(), "sh.log"), "/bin/sh", "-c", script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(time.Second) })
	return p
}

func TestProcReadsProc(t *testing.T) {
	p := startSh(t, "exec sleep 60")
	rss, peak, err := p.Memory()
	if err != nil {
		t.Fatal(err)
	}
	if rss == 0 || peak < rss {
		t.Fatalf("Memory() = %d, %d: want a resident set, and a peak at least as large", rss, peak)
	}
	if rss%1024 != 0 {
		t.Fatalf("Memory() = %d: want kB scaled to bytes", rss)
	}
	if _, err := p.WriteBytes(); err != nil {
		t.Fatal(err)
	}
}

func TestReadMemory(t *testing.T) {
	m, err := ReadMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// The test's binary is mapped (file pages), its heap is its own.
	if m.RSS == 0 || m.Peak < m.RSS || m.Anon == 0 || m.File == 0 || m.Anon+m.File > m.RSS+m.RSS/2 || m.PSS == 0 || m.PSS > m.RSS {
		t.Errorf("ReadMemory(self) = %+v: want RSS > 0, Peak ≥ RSS, Anon and File > 0 adding up to about RSS, 0 < PSS ≤ RSS", m)
	}
	p := startSh(t, "exit 0")
	p.Stop(time.Second)
	if _, err := ReadMemory(p.Pid()); err == nil {
		t.Error("ReadMemory of an exited process: no error")
	}
}

func TestProcDeadShowsLog(t *testing.T) {
	p := startSh(t, "echo one; echo two; exit 3")
	err := WaitFor(context.Background(), 10*time.Second, "the exit", []*Proc{p}, func(context.Context) error {
		return errors.New("still waiting")
	})
	if err == nil || !strings.Contains(err.Error(), "sh exited (exit status 3)") || !strings.Contains(err.Error(), "  one\n  two") {
		t.Fatalf("WaitFor = %v, want the exit and the log", err)
	}
	if _, _, err := p.Memory(); err == nil {
		t.Fatal("Memory of an exited process: no error")
	}
}

func TestProcStop(t *testing.T) {
	for _, tc := range []struct {
		name, script string
	}{
		{"ends on SIGTERM", "echo ready; exec sleep 60"},
		{"ignores SIGTERM", "trap '' TERM; echo ready; while :; do sleep 0.1; done"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startSh(t, tc.script)
			err := WaitFor(context.Background(), 10*time.Second, "ready", []*Proc{p}, func(context.Context) error {
				if !strings.Contains(p.Tail(1), "ready") {
					return errors.New("not yet")
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { p.Stop(200 * time.Millisecond); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Stop did not return")
			}
			if p.Dead() == nil {
				t.Fatal("the process runs after Stop")
			}
		})
	}
}

func TestWaitForTimesOut(t *testing.T) {
	p := startSh(t, "exec sleep 60")
	err := WaitFor(context.Background(), 100*time.Millisecond, "nothing", []*Proc{p}, func(context.Context) error {
		return errors.New("never")
	})
	if err == nil || !strings.Contains(err.Error(), "wait for nothing: timed out after 100ms: never") {
		t.Fatalf("WaitFor = %v, want a timeout", err)
	}
}

func TestStartProcEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"nil: this process's environment", nil, "[inherited]"},
		{"given environment", []string{"BENCHKIT_TEST=given"}, "[given]"},
		{"empty environment", []string{}, "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("BENCHKIT_TEST", "inherited")
			p, err := StartProcEnv("sh", filepath.Join(t.TempDir(), "sh.log"), tc.env, "/bin/sh", "-c", `echo "[$BENCHKIT_TEST]"; exec sleep 60`)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Stop(time.Second) })
			if p.Name() != "sh" {
				t.Fatalf("Name() = %q, want sh", p.Name())
			}
			err = WaitFor(context.Background(), 10*time.Second, "the echo", []*Proc{p}, func(context.Context) error {
				if got := strings.TrimSpace(p.Tail(1)); got != tc.want {
					return fmt.Errorf("log says %q, want %q", got, tc.want)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
