package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pass is one ginkgo run of e2e.test: the parallel specs, or the [Serial]
// ones alone, as upstream runs them.
type pass struct {
	name   string // "parallel", "serial": the JUnit file's prefix
	nodes  int
	specs  []string // full names
	report string   // its JUnit file, once run
	log    string   // ginkgo's output, once run
	// noReport says why the pass wrote no JUnit report (a ginkgo process
	// ended before it reported): its results come from log then.
	noReport string
}

// passes splits specs into a parallel pass and a serial one; an empty
// pass is left out.
func passes(specs []string, nodes int) []*pass {
	par, ser := &pass{name: "parallel", nodes: nodes}, &pass{name: "serial", nodes: 1}
	for _, s := range specs {
		if strings.Contains(s, "[Serial]") {
			ser.specs = append(ser.specs, s)
		} else {
			par.specs = append(par.specs, s)
		}
	}
	var ps []*pass
	for _, p := range []*pass{par, ser} {
		if len(p.specs) > 0 {
			ps = append(ps, p)
		}
	}
	return ps
}

// focus is the ginkgo focus that selects exactly names. Ginkgo matches it
// against a spec's text with its labels appended, so it is not anchored;
// checkFocus makes sure it selects no more.
func focus(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = regexp.QuoteMeta(n)
	}
	return "(?:" + strings.Join(q, "|") + ")"
}

// runConfig is what every pass shares.
type runConfig struct {
	tools      tools
	kubeconfig string
	reportDir  string
	timeout    time.Duration
	log        *slog.Logger
}

// listSpecs returns the full names of e2e.test's [Conformance] specs.
func listSpecs(ctx context.Context, e2eTest string) ([]string, error) {
	out, err := exec.CommandContext(ctx, e2eTest, "--list-tests").Output()
	if err != nil {
		return nil, fmt.Errorf("run: %s --list-tests: %w", e2eTest, err)
	}
	var names []string
	for _, l := range strings.Split(string(out), "\n") {
		// "    k8s.io/kubernetes@v1.33.0/test/e2e/x.go:12: [sig-x] ... [Conformance]"
		_, name, ok := strings.Cut(strings.TrimSpace(l), ": ")
		if ok && strings.Contains(name, "[Conformance]") {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) == 0 {
		return nil, fmt.Errorf("run: %s --list-tests lists no [Conformance] spec", e2eTest)
	}
	return names, nil
}

// checkFocus makes sure p's focus selects exactly its specs (a dry run).
func (c runConfig) checkFocus(ctx context.Context, p *pass) error {
	out, err := exec.CommandContext(ctx, c.tools.e2eTest, "--ginkgo.dry-run", "--ginkgo.no-color",
		"--ginkgo.focus="+focus(p.specs)).CombinedOutput()
	m := regexp.MustCompile(`Ran (\d+) of \d+ Specs`).FindSubmatch(out)
	if m == nil {
		return fmt.Errorf("run: dry run of the %s pass: %v\n%s", p.name, err, tail(out, 20))
	}
	if n, _ := strconv.Atoi(string(m[1])); n != len(p.specs) {
		return fmt.Errorf("run: the %s pass's focus selects %d specs, not its %d", p.name, n, len(p.specs))
	}
	return nil
}

// run runs one pass with ginkgo; its output goes to a log file in the
// report directory. A pass whose specs fail still returns nil: the JUnit
// report tells.
func (c runConfig) run(ctx context.Context, p *pass) error {
	p.report = filepath.Join(c.reportDir, "junit_"+p.name+"_01.xml")
	logPath := filepath.Join(c.reportDir, "ginkgo-"+p.name+".log")
	p.log = logPath
	out, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	defer out.Close()
	home, err := os.MkdirTemp("", "isle-conformance-home-")
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	defer os.RemoveAll(home)
	args := []string{"--nodes=" + strconv.Itoa(p.nodes), "--timeout=" + c.timeout.String(), "--no-color",
		"--focus=" + focus(p.specs), "--poll-progress-after=10m",
		// A process that dies before it reports leaves only its own output
		// to tell why: keep it in the log rather than in the spec reports.
		"--output-interceptor-mode=none"}
	args = append(args, c.tools.e2eTest, "--",
		"--kubeconfig="+c.kubeconfig, "--provider=skeleton", "--kubectl-path=kubectl",
		"--report-dir="+c.reportDir, "--report-prefix="+p.name+"_",
		"--disable-log-dump", "--allowed-not-ready-nodes=0", "--e2e-output-dir="+filepath.Join(c.reportDir, "output"))
	cmd := exec.CommandContext(ctx, c.tools.ginkgo, args...)
	cmd.Env = append(os.Environ(), "HOME="+home, "KUBECONFIG="+c.kubeconfig)
	cmd.Stdout, cmd.Stderr = out, out
	// ginkgo runs a process per node: end them all.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	began := time.Now()
	c.log.Info("run: ginkgo "+p.name+" pass started", "nodes", p.nodes, "log", logPath)
	err = cmd.Run()
	c.log.Info("run: ginkgo "+p.name+" pass ended", "took", time.Since(began).Round(time.Second), "exit", exitCode(err))
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if _, statErr := os.Stat(p.report); statErr != nil {
		p.noReport = fmt.Sprintf("the %s pass wrote no JUnit report (ginkgo exit %d): its results are read from %s", p.name, exitCode(err), logPath)
		c.log.Warn("run: "+p.noReport, "last lines", tailFile(logPath, 30))
	}
	return nil
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return tail(b, n)
}

// readSubset reads a subset file: one spec's full name per line, as the
// summary prints them; blank lines and # comments are ignored. Every name
// must be one of all.
func readSubset(path string, all []string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("subset: %w", err)
	}
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if _, found := slices.BinarySearch(all, l); !found {
			return nil, fmt.Errorf("subset: %s:%d: %q is not the name of a [Conformance] spec of this suite", path, line, l)
		}
		names = append(names, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("subset: %s: %w", path, err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("subset: %s names no spec", path)
	}
	return names, nil
}
