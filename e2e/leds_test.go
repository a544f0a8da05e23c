package e2e

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/isle-cluster/isle/hw/led"
	"github.com/isle-cluster/isle/node/island"
)

// boardLEDs reads the island's virtual LEDs, as `isle status` does.
func boardLEDs(t *testing.T, isl *testIsland) map[string]island.BoardLEDs {
	t.Helper()
	boards, err := island.LEDs(isl.dir)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]island.BoardLEDs, len(boards))
	for _, b := range boards {
		out[b.Name] = b
	}
	return out
}

// status runs `isle status --once`.
func status(t *testing.T, isl *testIsland) string {
	t.Helper()
	out, err := exec.Command(isl.bin, "status", "--once", "--dir", isl.dir).CombinedOutput()
	if err != nil {
		t.Fatalf("isle status: %v\n%s", err, out)
	}
	return string(out)
}

// statusLine is the board's line of `isle status --once`.
func statusLine(t *testing.T, isl *testIsland, board string) string {
	t.Helper()
	out := status(t, isl)
	for l := range strings.Lines(out) {
		if strings.HasPrefix(l, board+" ") {
			return strings.TrimSpace(l)
		}
	}
	t.Fatalf("isle status shows no %s:\n%s", board, out)
	return ""
}

// testRolloutFlashes checks that a rollout flashes the activity LEDs of the
// boards that run the new pods, and of the leader (its controllers act).
func testRolloutFlashes(t *testing.T, isl *testIsland) {
	k := isl.kubectl
	t.Logf("isle status:\n%s", status(t, isl))
	leader := ""
	for name, b := range boardLEDs(t, isl) {
		if !b.Running || b.LEDs.Readiness != led.Ready {
			t.Fatalf("%s before the rollout: %+v, want every board Ready", name, b)
		}
		if b.LEDs.Leader {
			leader = name
		}
	}
	if leader == "" {
		t.Fatal("no board shows the leader's double blink")
	}
	// name node [deletionTimestamp] of each echo pod
	podHosts := func() map[string][]string {
		out := k.ok(t, "get", "pods", "-l", "app=echo",
			"-o", `jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName} {.metadata.deletionTimestamp}{"\n"}{end}`)
		pods := map[string][]string{}
		for l := range strings.Lines(out) {
			if f := strings.Fields(l); len(f) > 0 {
				pods[f[0]] = f[1:]
			}
		}
		return pods
	}
	old := podHosts()
	before := boardLEDs(t, isl)
	k.ok(t, "rollout", "restart", "deploy/echo")
	k.ok(t, "rollout", "status", "deploy/echo", "--timeout=120s")
	after := boardLEDs(t, isl)
	var hosts []string
	for name, f := range podHosts() {
		if _, ok := old[name]; !ok && len(f) == 1 {
			hosts = append(hosts, f[0])
		}
	}
	if len(hosts) != 3 {
		t.Fatalf("new echo pods on %q, want three", hosts)
	}
	boards := append(hosts, leader)
	slices.Sort(boards)
	for _, b := range slices.Compact(boards) {
		n0, n1 := before[b].LEDs.Flashes, after[b].LEDs.Flashes
		if n1 <= n0 {
			t.Errorf("%s's activity LED did not flash in the rollout (%d flashes before, %d after)", b, n0, n1)
		}
		t.Logf("%s: %d activity flashes in the rollout", b, n1-n0)
	}
}

// testRuntimeDownLED kills a board's containerd and checks its readiness
// LED turns to a fast blink within a second, in `isle status` and in the
// Node's annotation.
func testRuntimeDownLED(t *testing.T, isl *testIsland, board string) {
	k := isl.kubectl
	b, err := isl.state.Board(board)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(b.Containerd.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	waitFor(t, 10*time.Second, board+"'s readiness LED blinking fast", func() bool {
		return boardLEDs(t, isl)[board].LEDs.Pattern() == "fast-blink"
	})
	ledTook := time.Since(killed)
	var msg string
	waitFor(t, 10*time.Second, board+" NotReady", func() bool {
		out, _, err := k.run("", "get", "node", board, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].message}`)
		status, m, _ := strings.Cut(out, " ")
		msg = m
		return err == nil && status == "False"
	})
	took := time.Since(killed)
	t.Logf("%s: LED fast blink %v and Node NotReady %v after its containerd was killed: %s",
		board, ledTook.Round(time.Millisecond), took.Round(time.Millisecond), msg)
	// The agent asks twice a second.
	if ledTook > time.Second {
		t.Errorf("%s's LED blinked fast %v after containerd died, want within a second", board, ledTook)
	}
	// kubectl's round trips come on top.
	if took > 2*time.Second || !strings.Contains(msg, "container runtime is down") {
		t.Errorf("%s NotReady after %v with %q, want within a second or so, naming the runtime", board, took, msg)
	}
	if l := statusLine(t, isl, board); !strings.Contains(l, "fast-blink") || !strings.Contains(l, "NotReady") {
		t.Errorf("isle status: %q, want %s blinking fast, NotReady", l, board)
	}
	waitFor(t, 10*time.Second, board+"'s Node annotated fast-blink", func() bool {
		out, _, err := k.run("", "get", "node", board, "-o", `jsonpath={.metadata.annotations.isle\.dev/led-ready}`)
		return err == nil && out == "fast-blink"
	})
}

// testSIGTERMDark stops a board's isle with SIGTERM and checks it leaves
// its LEDs dark.
func testSIGTERMDark(t *testing.T, isl *testIsland, board string) {
	b, err := isl.state.Board(board)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(isl.dir, board, "run", led.StateFileName)
	if st, err := led.ReadStateFile(path); err != nil || st.Readiness == led.Off {
		t.Fatalf("%s before SIGTERM: %+v (%v), want its LEDs on", board, st, err)
	}
	if err := syscall.Kill(b.Isle.PID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, board+"'s isle gone after SIGTERM", func() bool { return !b.Isle.Alive() })
	st, err := led.ReadStateFile(path)
	if err != nil || st.Readiness != led.Off || st.ReadyLit || st.ActivityLit {
		t.Errorf("%s after SIGTERM: LEDs %+v (%v), want both dark", board, st, err)
	}
}
