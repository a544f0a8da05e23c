package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestAgentOutageLogsOnce: an agent whose only server is gone logs it once,
// and once when the server answers again; client-go's informers, which
// retry every second or so each, log nothing at info level or above, and
// nothing in klog's own format (issue 21: "agent: no API server known
// yet" once a second, one klog line per informer).
func TestAgentOutageLogsOnce(t *testing.T) {
	isl := startIsland(t, 1, 1)
	waitFor(t, 60*time.Second, "both Nodes Ready", func() bool {
		out, _, err := isl.kubectl.run("", "get", "nodes", "-o", `jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{" "}{end}`)
		return err == nil && out == "True True "
	})
	logPath := filepath.Join(isl.dir, "pi2", "isle.log")
	since := func(off int) string {
		b, err := os.ReadFile(logPath)
		if err != nil {
			t.Fatal(err)
		}
		return string(b[off:])
	}
	before, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	off := len(before)

	isl.killIsle(t, "pi1")
	// The outage lasts: the informers of the old agent logged a line
	// each about every second by now.
	time.Sleep(10 * time.Second)
	outage := since(off)
	lost := regexp.MustCompile(`(?m)^.* level=WARN msg="agent: lost the API servers.*$`).FindAllString(outage, -1)
	if len(lost) != 1 {
		t.Errorf("%d lines saying the servers are lost, want 1:\n%s", len(lost), outage)
	}
	if m := klogLine.FindAllString(outage, -1); len(m) > 0 {
		t.Errorf("klog's own lines in the agent's log:\n%s", outage)
	}
	for _, line := range strings.Split(outage, "\n") {
		if (strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=INFO")) &&
			(strings.Contains(line, "no API server") || strings.Contains(line, "Failed to watch") || strings.Contains(line, "failed to list") ||
				strings.Contains(line, "watch ended with error")) &&
			!strings.Contains(line, "agent: lost the API servers") {
			t.Errorf("a retry logged above debug level: %s", line)
		}
	}

	off += len(outage)
	isl.board(t, "restart", "pi1")
	waitFor(t, 60*time.Second, "the agent to find its server again", func() bool {
		return strings.Contains(since(off), `msg="agent: an API server answers again"`)
	})
	waitFor(t, 60*time.Second, "both Nodes Ready again", func() bool {
		out, _, err := isl.kubectl.run("", "get", "nodes", "-o", `jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{" "}{end}`)
		return err == nil && out == "True True "
	})
	if n := strings.Count(since(off), "agent: an API server answers again"); n != 1 {
		t.Errorf("%d lines saying a server answers again, want 1:\n%s", n, since(off))
	}
}
