// Command conformance is `make conformance`: upstream's conformance suite
// (the [Conformance] specs of k8s.io/kubernetes/test/e2e, for the
// Kubernetes version isle reports) run on an island.
//
// It builds e2e.test, the ginkgo CLI and the test images' Go programs from
// the Go module proxy in a cache outside the repository (or reuses them),
// starts an island (3 servers, 2 agents) whose boards pull registry.k8s.io's
// images from the island's registry, makes the images the specs use from
// source and Debian's packages and pushes them there, runs the specs (in
// parallel, then the [Serial] ones alone), writes the JUnit reports and a
// summary, and removes the island.
//
// With -subset FILE it runs only the specs FILE names and fails unless
// every one passes: make test's regression check.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/isle-cluster/isle/control/apiserver"
	"github.com/isle-cluster/isle/e2e/bench/islandbench"
	"github.com/isle-cluster/isle/node/island"
)

func hostArch() string { return runtime.GOARCH }

type options struct {
	isle, cache, dir, arch, subset, doc, reportDir, version string
	nodes, servers, agents                                  int
	timeout                                                 time.Duration
	keep, pushOnly, imagesOnly                              bool
}

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var o options
	fs := flag.NewFlagSet("conformance", flag.ContinueOnError)
	fs.StringVar(&o.isle, "isle", "out/isle", "the isle binary the boards run")
	fs.StringVar(&o.cache, "cache", "/var/cache/isle-conformance", "where the suite's scratch module, builds and Debian roots are kept between runs (a real disk: the build cache grows by ~14 GB)")
	fs.StringVar(&o.dir, "dir", "/var/lib/isle-conformance", "the island's directory")
	fs.StringVar(&o.arch, "arch", hostArch(), "the boards' architecture the images are made for: amd64, arm64 or arm/v7")
	fs.StringVar(&o.subset, "subset", "", "a file naming the specs to run, one per line; the run fails unless every one passes")
	fs.StringVar(&o.doc, "doc", "", "a document (docs/conformance.md) whose latest-run section gets the summary")
	fs.StringVar(&o.reportDir, "report", "", "where the JUnit reports, ginkgo's logs and summary.md go (default CACHE/reports/TIME)")
	fs.StringVar(&o.version, "version", apiserver.KubeVersion, "the suite's Kubernetes version: the one isle reports")
	fs.IntVar(&o.nodes, "nodes", 4, "ginkgo processes of the parallel pass")
	fs.IntVar(&o.servers, "servers", 3, "the island's servers")
	fs.IntVar(&o.agents, "agents", 2, "the island's agents (the suite needs two schedulable nodes at least)")
	// A spec that waits for something isle does not serve may wait for
	// ever (the endpoints-latency spec waits on core/v1 Endpoints with no
	// deadline of its own): ginkgo stops such a pass at its timeout and
	// reports the spec as timed out.
	fs.DurationVar(&o.timeout, "timeout", 70*time.Minute, "the longest a pass may run: ginkgo then stops the specs still running and reports them timed out")
	fs.BoolVar(&o.keep, "keep", false, "leave the island running after the run")
	fs.BoolVar(&o.pushOnly, "push-only", false, "only make the images and push them to the island running in -dir (one kept with -keep, say)")
	fs.BoolVar(&o.imagesOnly, "images-only", false, "only make the images (for -arch) and print their digests and sizes: no island")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ok, err := run(ctx, o, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

// run does the whole run; ok is false when a subset's spec did not pass.
func run(ctx context.Context, o options, log *slog.Logger) (ok bool, err error) {
	began, commit := time.Now(), gitCommit() // the commit tested, not the one checked out when the run ends
	p, err := lookupPlatform(o.arch)
	if err != nil {
		return false, err
	}
	if o.isle, err = filepath.Abs(o.isle); err != nil {
		return false, err
	}
	if err := islandbench.Preflight(ctx, o.isle, o.dir, "conformance"); err != nil {
		return false, err
	}
	for _, tool := range []string{"containerd", "runc", "docker-registry", "mmdebstrap"} {
		if _, err := exec.LookPath(tool); err != nil {
			return false, fmt.Errorf("needs %s in PATH: make setup installs it", tool)
		}
	}
	if o.reportDir == "" {
		o.reportDir = filepath.Join(o.cache, "reports", time.Now().UTC().Format("20060102-150405"))
	}
	if err := os.MkdirAll(filepath.Join(o.reportDir, "output"), 0o755); err != nil {
		return false, err
	}

	s := &suite{version: o.version, dir: filepath.Join(o.cache, o.version), log: log}
	t, err := s.prepare(ctx, p.goarch)
	if err != nil {
		return false, err
	}
	all, err := listSpecs(ctx, t.e2eTest)
	if err != nil {
		return false, err
	}
	selected := all
	if o.subset != "" {
		if selected, err = readSubset(o.subset, all); err != nil {
			return false, err
		}
	}
	cfg := runConfig{tools: t, reportDir: o.reportDir, timeout: o.timeout, log: log}
	ps := passes(selected, o.nodes)
	for _, pass := range ps {
		if err := cfg.checkFocus(ctx, pass); err != nil {
			return false, err
		}
	}
	log.Info("conformance: specs selected", "of", len(all), "run", len(selected), "suite", o.version)

	imgs := &imageSet{p: p, cacheDir: o.cache, kubeDir: s.kubeDir, tools: t, log: log}
	specs, err := imgs.build(ctx)
	if err != nil {
		return false, err
	}

	if o.imagesOnly {
		return true, describe(p, specs, os.Stdout)
	}
	if o.pushOnly {
		st, err := island.Load(o.dir)
		if err != nil {
			return false, err
		}
		return true, push(ctx, st.RegistryAddr(), p, specs, log)
	}
	// The binary's version now: it may be rebuilt while the suite runs.
	version := isleVersion(ctx, o.isle)
	isl := &islandbench.Island{Bin: o.isle, Dir: o.dir, Servers: o.servers, Agents: o.agents, Mirrors: []string{"registry.k8s.io"}}
	took, err := isl.Up(ctx)
	if !o.keep {
		defer func() {
			if derr := isl.Down(); derr != nil {
				err = errors.Join(err, derr)
			}
		}()
	}
	if err != nil {
		return false, err
	}
	log.Info("conformance: island up", "servers", o.servers, "agents", o.agents, "took", took.Round(time.Millisecond))
	st, err := island.Load(o.dir)
	if err != nil {
		return false, err
	}
	if err := push(ctx, st.RegistryAddr(), p, specs, log); err != nil {
		return false, err
	}
	cfg.kubeconfig = st.Kubeconfig()

	var reports []map[string]result
	var suiteFailures []string
	for _, pass := range ps {
		if err := cfg.run(ctx, pass); err != nil {
			return false, err
		}
		res, sf, err := passResults(pass)
		if err != nil {
			return false, err
		}
		reports = append(reports, res)
		suiteFailures = append(suiteFailures, sf...)
	}

	sum := summary{commit: commit, isleVersion: version, suite: o.version, date: began,
		wall: time.Since(began), results: collect(selected, reports), suiteFailures: suiteFailures,
		island: fmt.Sprintf("%d servers, %d agents (%s); %d ginkgo processes, then the [Serial] specs alone", o.servers, o.agents, p.machine, o.nodes)}
	var b strings.Builder
	sum.markdown(&b)
	if err := os.WriteFile(filepath.Join(o.reportDir, "summary.md"), []byte(b.String()), 0o644); err != nil {
		return false, err
	}
	fmt.Print(b.String())
	fmt.Printf("reports in %s\n", o.reportDir)
	if o.doc != "" {
		if err := writeDoc(o.doc, sum); err != nil {
			return false, err
		}
	}
	if o.subset == "" {
		return true, nil // a full run's failures are its findings
	}
	_, c := sum.bySIG()
	return c.passed == c.total() && len(suiteFailures) == 0, nil
}

func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func isleVersion(ctx context.Context, bin string) string {
	out, err := exec.CommandContext(ctx, bin, "version").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
}

// passResults reads a pass's results from its JUnit report, or from
// ginkgo's log when it wrote none (saying so among the suite's failures).
func passResults(pass *pass) (map[string]result, []string, error) {
	if pass.noReport != "" {
		f, err := os.Open(pass.log)
		if err != nil {
			return nil, nil, err
		}
		defer f.Close()
		res, err := readGinkgoLog(f, pass.specs)
		return res, []string{pass.noReport}, err
	}
	// Each report lists every spec; a pass's own are its results.
	want := map[string]bool{}
	for _, n := range pass.specs {
		want[n] = true
	}
	f, err := os.Open(pass.report)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	res, sf, err := readJUnit(f, want)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", pass.report, err)
	}
	return res, sf, nil
}
