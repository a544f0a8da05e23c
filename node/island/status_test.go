package island

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/isle-cluster/isle/hw/led"
)

// statusIsland is an island of three boards in a temporary directory whose
// "isle" is a sleeping child process on pi1 and pi2, and no process on pi3.
// (Not this process: qemu-user, which runs the ARM tests, makes up what
// /proc says of the process it emulates.)
func statusIsland(t *testing.T) (*State, func(board string, st led.State)) {
	t.Helper()
	s := plan(Config{Dir: t.TempDir(), Servers: 1, Agents: 2})
	for i := range s.Boards[:2] {
		sleep := exec.Command("sleep", "60")
		if err := sleep.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = sleep.Process.Kill()
			_ = sleep.Wait()
		})
		start, err := startTime(sleep.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		s.Boards[i].Isle, s.Boards[i].Down = Proc{PID: sleep.Process.Pid, Start: start}, false
	}
	if err := s.save(); err != nil {
		t.Fatal(err)
	}
	write := func(board string, st led.State) {
		t.Helper()
		b, err := s.Board(board)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(s.runDir(b), 0o755); err != nil {
			t.Fatal(err)
		}
		led.StateFile(filepath.Join(s.runDir(b), led.StateFileName), slog.Default())(st)
	}
	return s, write
}

func TestStatusOnce(t *testing.T) {
	s, write := statusIsland(t)
	write("pi1", led.State{Readiness: led.Ready, Leader: true, ReadyLit: true, ActivityLit: true})
	write("pi3", led.State{Readiness: led.Ready, ReadyLit: true}) // left by an isle that died
	var out bytes.Buffer
	// One second into the leader's 3 s cycle: lit.
	if err := Status(t.Context(), s.Dir, &out, StatusOptions{Now: func() time.Time { return time.Unix(1, 0) }}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"BOARD   ROLE    READY  ACT  PATTERN       MEANING",
		"pi1     server  ●      ○    solid-leader  Ready, the store's leader",
		"pi2     agent   ○      ○    off           isle starting or stopping", // no state file yet
		"pi3     agent   ○      ○    off           isle is not running",
	}
	if got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("status:\n%s\nwant:\n%s", out.String(), strings.Join(want, "\n"))
	}

	write("pi2", led.State{Readiness: led.NotReady})
	boards, err := LEDs(s.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if b := boards[1]; !b.Running || b.LEDs.Pattern() != "fast-blink" || b.LEDs.ReadyLit {
		t.Errorf("pi2: %+v, want running, fast-blink, in a dark phase", b)
	}

	if err := os.WriteFile(filepath.Join(s.Dir, "pi2", "run", led.StateFileName), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LEDs(s.Dir); err == nil || !strings.Contains(err.Error(), "board pi2") {
		t.Errorf("a damaged state file: %v, want an error naming the board", err)
	}
	if _, err := LEDs(t.TempDir()); err == nil {
		t.Error("a directory without an island: no error")
	}
}

// Live, the table is redrawn in place, and a flash shorter than a frame
// still shows in one.
func TestStatusLive(t *testing.T) {
	s, write := statusIsland(t)
	write("pi1", led.State{Readiness: led.Ready, ReadyLit: true})
	ctx, cancel := context.WithCancel(t.Context())
	out := &syncWriter{}
	done := make(chan error, 1)
	go func() {
		done <- Status(ctx, s.Dir, out, StatusOptions{Live: true, Interval: 10 * time.Millisecond, Color: true})
	}()
	waitOut := func(what string, ok func(string) bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !ok(out.String()); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("status never showed %s:\n%q", what, out.String())
			}
		}
	}
	waitOut("a redraw", func(s string) bool { return strings.Contains(s, "\x1b[4A") })
	// A flash that began and ended between two frames: the counter moved.
	write("pi1", led.State{Readiness: led.Ready, ReadyLit: true, Flashes: 1})
	amber := "\x1b[1;33m●\x1b[0m"
	waitOut("the flash", func(s string) bool { return strings.Contains(s, amber) })
	if !strings.Contains(out.String(), "\x1b[1;32m●\x1b[0m") {
		t.Errorf("the lit readiness LED is not green:\n%q", out.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// syncWriter is an output Status writes and the test reads.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
