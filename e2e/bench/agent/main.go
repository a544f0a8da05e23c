// Command agentbench is `make bench-agent`: pods on the agent board of an
// island (`isle up --servers 1 --agents 1`: server pi1, agent pi2, each a
// network namespace with its own containerd), so the Pod network the agent
// builds stays inside the board's namespace and `isle down` removes it.
//
// The pods' image (a static busybox) is pushed to the island's registry;
// a first pod pulls it onto the agent board and is deleted, so the
// measured pods find it present. The bench measures how long pods take
// from being bound to the board (created with spec.nodeName) to Running,
// the memory of the board's isle process with those pods running, and the
// CPU it uses while they idle. The island is removed at the end, also on
// errors, SIGINT and SIGTERM.
//
// The peers' figures: the kubelet's pod start SLO is 5 s p99 (image
// present); a k3s agent takes ~270 MB on a Pi 4.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
	"github.com/isle-cluster/isle/e2e/bench/islandbench"
	"github.com/isle-cluster/isle/node/containers/ctrtest"
	"github.com/isle-cluster/isle/node/island"
)

// options are agentbench's command line.
type options struct {
	isle     string        // -isle: the isle binary
	dir      string        // -dir: the island's directory, absolute
	pods     int           // -pods: pods run on the agent board
	interval time.Duration // -interval: time between two pods' creations
	idle     time.Duration // -idle: how long the idle CPU is measured
}

func main() {
	benchkit.Main("agentbench", parse, run)
}

func parse(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("agentbench", flag.ContinueOnError)
	fs.StringVar(&o.isle, "isle", "out/isle", "the isle binary")
	fs.StringVar(&o.dir, "dir", "/tmp/isle-agentbench", "the island's directory (removed at the end)")
	fs.IntVar(&o.pods, "pods", 50, "pods run on the agent board")
	fs.DurationVar(&o.interval, "interval", 200*time.Millisecond, "time between two pods' creations")
	fs.DurationVar(&o.idle, "idle", time.Minute, "how long to measure the agent's CPU while the pods idle")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("flags: unexpected arguments %q", fs.Args())
	case o.pods < 1 || o.pods > 110:
		return o, fmt.Errorf("flags: -pods %d: want 1 to 110 (the agent's default --max-pods)", o.pods)
	case o.interval < 0:
		return o, fmt.Errorf("flags: -interval %v: want 0 or more", o.interval)
	case o.idle < time.Second:
		return o, fmt.Errorf("flags: -idle %v: want at least 1s", o.idle)
	case o.dir == "":
		return o, errors.New("flags: -dir: want a directory")
	}
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return o, fmt.Errorf("flags: -dir %q: %w", o.dir, err)
	}
	o.dir = dir
	return o, nil
}

// settle is how long the pods run before the idle measurement starts:
// past the agent's start-up (it gives back the pages of its binary it
// used to start 30 s after it started, and every minute after).
const settle = 30 * time.Second

func run(ctx context.Context, o options) (err error) {
	if os.Geteuid() != 0 {
		return errors.New("makes an island of network namespaces: run as root (make bench-agent)")
	}
	version, err := benchkit.FirstLine(ctx, o.isle, "version")
	if err != nil {
		return fmt.Errorf("isle binary %s: %w: run make build", o.isle, err)
	}
	bb, err := ctrtest.BusyboxImage()
	if err != nil {
		return fmt.Errorf("the pods' image: %w", err)
	}
	img, err := ctrtest.BuildImage(bb)
	if err != nil {
		return fmt.Errorf("the pods' image: %w", err)
	}
	m := benchkit.ReadMachine()
	fmt.Printf("machine: %d CPUs (%s), kernel %s; %s; island in %s\n", m.CPUs, m.CPUModel, m.Kernel, version, o.dir)

	isl := &islands{bin: o.isle, dir: o.dir}
	if err := isl.clearLeftover(); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, isl.down()) }()
	if err := isl.up(ctx); err != nil {
		return err
	}
	st, err := island.Load(o.dir)
	if err != nil {
		return err
	}
	board, err := agentBoard(st)
	if err != nil {
		return err
	}
	agent := board.Isle
	logPath := filepath.Join(st.Dir, board.Name, "isle.log")
	alive := func() error {
		if !agent.Alive() {
			return fmt.Errorf("the isle of board %s (PID %d) exited; %s ends with:\n%s", board.Name, agent.PID, logPath, tail(logPath, 20))
		}
		return nil
	}

	ref, err := pushImage(ctx, st, img)
	if err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", st.Kubeconfig())
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", st.Kubeconfig(), err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", st.Kubeconfig(), err)
	}
	r := results{pods: o.pods, interval: o.interval, board: board.Name, idle: o.idle}
	if r.before, err = memoryOf(agent); err != nil {
		return err
	}

	pr := &podRunner{cs: cs, node: board.Name, image: ref, alive: alive}
	withLog := func(err error) error { return fmt.Errorf("%w\n%s ends with:\n%s", err, logPath, tail(logPath, 20)) }
	slog.Info("first pod: pulls the image from the island's registry", "board", board.Name, "image", ref)
	pull, err := pr.start(ctx, []string{"agentbench-pull"}, 0)
	if err != nil {
		return withLog(err)
	}
	r.pull = pull[0]
	if err := pr.remove(ctx, "agentbench-pull"); err != nil {
		return withLog(err)
	}
	names := make([]string, o.pods)
	for i := range names {
		names[i] = fmt.Sprintf("bench-%03d", i)
	}
	slog.Info("starting pods", "pods", o.pods, "every", o.interval)
	if r.latencies, err = pr.start(ctx, names, o.interval); err != nil {
		return withLog(err)
	}

	slog.Info("pods running; measuring the agent at idle", "for", settle+o.idle)
	if err := sleep(ctx, settle); err != nil {
		return fmt.Errorf("idle: %w", err)
	}
	cpu0, err := cpuTimeOf(agent)
	if err != nil {
		return err
	}
	faults0, err := faultsOf(agent)
	if err != nil {
		return err
	}
	if err := forgetReferences(agent); err != nil {
		return err
	}
	t0 := time.Now()
	if r.with, err = mostMemory(ctx, agent, o.idle, sampleEvery); err != nil {
		return fmt.Errorf("idle: %w", err)
	}
	cpu1, err := cpuTimeOf(agent)
	if err != nil {
		return err
	}
	faults1, err := faultsOf(agent)
	if err != nil {
		return err
	}
	r.idleCPU = float64(cpu1-cpu0) / float64(time.Since(t0))
	r.faults = float64(faults1-faults0) / time.Since(t0).Seconds()
	if r.goMem, err = goMemoryOf(ctx, islandbench.BoardNS(board.Name), metricsURL); err != nil {
		return err
	}
	if r.usedFile, err = binaryReferenced(agent); err != nil {
		return err
	}
	if r.mappings, err = mappingsOf(agent); err != nil {
		return err
	}
	fmt.Println()
	r.header(os.Stdout)
	fmt.Println()
	r.table().Write(os.Stdout)
	return nil
}

// sampleEvery is how often the agent's memory is read while the pods
// idle.
const sampleEvery = 5 * time.Second

// mostMemory reads the memory of p every period for d, and at the end,
// and returns the reading of the largest RSS: the agent gives pages of
// its binary back now and then, and grows again in between.
func mostMemory(ctx context.Context, p island.Proc, d, every time.Duration) (benchkit.Memory, error) {
	var most benchkit.Memory
	end := time.Now().Add(d)
	for {
		m, err := memoryOf(p)
		if err != nil {
			return most, err
		}
		if m.RSS > most.RSS {
			most = m
		}
		left := time.Until(end)
		if left <= 0 {
			return most, nil
		}
		if err := sleep(ctx, min(every, left)); err != nil {
			return most, err
		}
	}
}

// agentBoard is the island's agent board, the one that runs the pods.
func agentBoard(st *island.State) (*island.Board, error) {
	for i := range st.Boards {
		if st.Boards[i].Role == island.RoleAgent {
			return &st.Boards[i], nil
		}
	}
	return nil, fmt.Errorf("island %s has no agent board", st.Dir)
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
