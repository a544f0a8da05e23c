package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestBoardClockBehind starts an agent whose clock is a year behind the
// cluster's (ISLE_TEST_CLOCK_OFFSET shifts isle's own clock: a time
// namespace cannot shift CLOCK_REALTIME, and a test must not set the
// machine's clock). At a year behind every certificate of the cluster is
// not yet valid: the board joins only because it takes the servers' time
// first, and says so; restarted, still a year behind, it does it again
// before its agent talks to the API. A lone server restarted a year
// behind takes the time it knows it is not before: its CA's.
func TestBoardClockBehind(t *testing.T) {
	bs := newBoards(t)
	s1 := bs.add("k1", "server", "127.0.0.81", "--init")
	bs.waitToken(s1)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if out, err := bs.run("kubeconfig", "--data-dir", s1.dir, "-o", kc); err != nil {
		t.Fatalf("kubeconfig: %v\n%s", err, out)
	}
	cs := kubeClient(t, kc)

	yearAgo := time.Now().AddDate(-1, 0, 0).UTC().Format("2006-01-02T")
	today := time.Now().UTC().Format("2006-01-02T")
	corrections := func(b *board) []string {
		data, _ := os.ReadFile(b.logPath)
		var lines []string
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "clock: system time "+yearAgo) {
				lines = append(lines, line)
			}
		}
		return lines
	}
	corrected := func(b *board) int {
		n := 0
		for _, line := range corrections(b) {
			if strings.Contains(line, "is behind the cluster's "+today) && strings.Contains(line, "server=127.0.0.81:6443") {
				n++
			}
		}
		return n
	}
	registered := func(b *board) int {
		data, _ := os.ReadFile(b.logPath)
		return strings.Count(string(data), "agent: Node registered")
	}

	k2 := bs.addWithEnv([]string{"ISLE_TEST_CLOCK_OFFSET=-8760h"}, "k2", "agent", "127.0.0.82", "--join", "127.0.0.81", "--token", bs.token)
	waitNodes(t, cs, "k2 Ready", func(n map[string]*corev1.Node) bool { return ready(n["k2"]) })
	if corrected(k2) != 1 {
		t.Fatalf("k2 did not log one correction of its clock from a year ago (%s…) to the cluster's (%s…)", yearAgo, today)
	}
	if n := corrected(s1); n != 0 {
		t.Fatalf("k1, whose clock is right, logged %d corrections", n)
	}

	// Restarted, a year behind again: the clock is set before the agent's
	// API client checks a server's certificate.
	k2.kill(t)
	k2.start(t)
	waitFor(t, 60*time.Second, "k2 registered again after its restart", func() bool { return registered(k2) == 2 })
	if corrected(k2) != 2 {
		t.Fatalf("k2 restarted without correcting its clock first")
	}
	waitNodes(t, cs, "k2 Ready after its restart", func(n map[string]*corev1.Node) bool { return ready(n["k2"]) })

	// The only server restarted a year behind: no other server tells it
	// the time, so it takes the CA's start of validity (an hour before
	// the cluster began) before it issues its serving certificate, which
	// would otherwise have lapsed already.
	s1.kill(t)
	s1.env = []string{"ISLE_TEST_CLOCK_OFFSET=-8760h"}
	s1.start(t)
	waitFor(t, 60*time.Second, "k1 corrects its clock by its CA", func() bool {
		lines := corrections(s1)
		return len(lines) == 1 && strings.Contains(lines[0], "is behind the start of validity of the certificate of isle-ca")
	})
	waitFor(t, 60*time.Second, "k1's API answers with a valid certificate", func() bool {
		_, err := cs.Discovery().ServerVersion()
		return err == nil
	})
	waitNodes(t, cs, "k1 and k2 Ready after k1's restart", func(n map[string]*corev1.Node) bool { return ready(n["k1"]) && ready(n["k2"]) })
	t.Logf("the corrections:\n%s\n%s", strings.Join(corrections(k2), "\n"), strings.Join(corrections(s1), "\n"))
}
