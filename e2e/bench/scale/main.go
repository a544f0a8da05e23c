// Command scalebench is `make bench-scale`: three real `isle server`
// processes on loopback and hundreds of hollow boards (hollow.go) in this
// process, grown in steps (by default 10, 50, 100 and 250 boards with 300,
// 1,000, 2,000 and 5,000 pods of Deployments with Services and an
// Ingress). At each size it prints the API's latencies (get, list as a
// Table, create, update, write → watcher), the scheduling throughput, each
// server's memory and idle CPU, the store's size and the bytes written
// per pod created, and the gossip bytes per board; at the last size, a
// hollow board killed → its Node NotReady, and the store leader killed →
// writes again. Then the targets, with the cost per board and per pod as
// slopes of the growth.
//
//	go run ./e2e/bench/scale -isle out/isle [-steps 10:300,50:1000,100:2000,250:5000] [-ops 200] [-idle 20s] [-wave 25]
//
// It is a benchmark, not a test: it fails only when it cannot measure. On
// a machine of few CPUs the hollow boards and the servers share them: the
// hollow boards do in one process what hundreds of boards' CPUs would.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/e2e/bench/benchkit"
)

type step struct{ boards, pods int }

type options struct {
	benchkit.Flags
	steps []step
	ops   int
	idle  time.Duration
	kills int
	wave  int
	// cpuProfile and memProfile are where the bench process's own CPU
	// profile (the whole run) and heap profile (after each size) go; "":
	// none. serverHeaps is the directory each server's heap profile goes
	// to after each size (SERVER-BOARDS.heap); "": none.
	cpuProfile, memProfile, serverHeaps string
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := o.NewFlagSet("scalebench")
	steps := fs.String("steps", "10:300,50:1000,100:2000,250:5000", "sizes, BOARDS:PODS, growing")
	fs.IntVar(&o.ops, "ops", 200, "requests of each kind at each size (lists: a twentieth)")
	fs.DurationVar(&o.idle, "idle", 20*time.Second, "how long the idle servers' CPU and the gossip are measured at each size")
	fs.IntVar(&o.kills, "kills", 3, "hollow boards killed at the last size")
	fs.IntVar(&o.wave, "wave", 25, "hollow boards joining at once; each wave's Nodes are Ready and its members known to every board before the next")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write the bench process's CPU profile (hollow boards and clients) of the whole run to `FILE`")
	fs.StringVar(&o.memProfile, "memprofile", "", "write the bench process's heap profile to `FILE` after each size")
	fs.StringVar(&o.serverHeaps, "serverheaps", "", "write each server's heap profile to `DIR`/SERVER-BOARDS-PODS.heap after each size")
	if err := o.Parse(fs, args); err != nil {
		return o, err
	}
	var err error
	if o.steps, err = parseSteps(*steps); err != nil {
		return o, err
	}
	if o.ops < 20 || o.idle < time.Second || o.kills < 0 || o.wave < 1 {
		return o, errors.New("flags: -ops must be at least 20, -idle at least 1s, -kills not negative, -wave positive")
	}
	return o, nil
}

// parseSteps parses "B:P,B:P": growing board and pod counts, at most 250
// boards (the cluster CIDR's /24s: 256, three for the servers).
func parseSteps(s string) ([]step, error) {
	var out []step
	for _, f := range strings.Split(s, ",") {
		b, p, ok := strings.Cut(strings.TrimSpace(f), ":")
		nb, err1 := strconv.Atoi(b)
		np, err2 := strconv.Atoi(p)
		if !ok || err1 != nil || err2 != nil || nb < 1 || np < 0 {
			return nil, fmt.Errorf("flags: -steps %q: want BOARDS:PODS[,BOARDS:PODS...] of positive numbers", s)
		}
		if len(out) > 0 && (nb < out[len(out)-1].boards || np < out[len(out)-1].pods) {
			return nil, fmt.Errorf("flags: -steps %q: sizes must grow", s)
		}
		if nb > 250 || np > nb*100 {
			return nil, fmt.Errorf("flags: -steps %q: at most 250 boards and 100 pods a board", s)
		}
		out = append(out, step{nb, np})
	}
	return out, nil
}

func main() { benchkit.Main("scalebench", parseFlags, run) }

// result is what one size measured.
type result struct {
	step
	deployments   int
	joined        time.Duration // the new boards' joins → every Node Ready
	bound         time.Duration // first Deployment created → last pod bound
	running       time.Duration // → last pod Running
	newPods       int
	servers       [3]serverSample // after the idle window
	cpu           [3]float64      // idle, share of a core
	writtenPerPod float64         // bytes, all three servers, per pod created
	gossip        float64         // bytes/s per hollow board
	api           apiResults
	leader        int // index of the leader in servers
	// The bench process (the hollow boards and the clients): its CPU time
	// from the size's first join to its pods settled, its CPU over the
	// idle window (share of a core), and its RSS after it.
	benchGrow time.Duration
	benchIdle float64
	benchRSS  uint64
}

func run(ctx context.Context, o options) (err error) {
	if os.Getenv("GOGC") == "" {
		// The hollow boards' live heap is small and their garbage (watch
		// streams, gossip packets) plenty: at the default GOGC a third
		// of the process's CPU went to collecting (pprof, 50 and 100
		// boards). Collecting about a quarter as often gives most of it
		// to the servers, for a few hundred MB more; past 2 GiB the
		// collector works harder again rather than take the machine's
		// memory.
		debug.SetGCPercent(400)
		if os.Getenv("GOMEMLIMIT") == "" {
			debug.SetMemoryLimit(2 << 30)
		}
	}
	if o.cpuProfile != "" {
		stop, err := startCPUProfile(o.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	env, err := benchkit.Probe(ctx, o.Isle, "isle-scalebench-")
	if err != nil {
		return err
	}
	defer func() {
		if o.Keep {
			slog.Info("kept the data and logs", "dir", env.Dir)
		} else {
			_ = os.RemoveAll(env.Dir)
		}
	}()
	servers, err := startServers(ctx, o.Isle, env.Dir)
	defer func() {
		for _, s := range servers {
			if s.p != nil {
				s.p.Stop(3 * time.Second)
				if err != nil {
					fmt.Fprintf(os.Stderr, "--- %s log (tail) ---\n%s\n", s.name, s.p.Tail(10))
				}
			}
		}
	}()
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(filepath.Join(servers[0].dir, "agent-token"))
	if err != nil {
		return fmt.Errorf("agent token: %w", err)
	}
	tok, err := wire.ParseToken(strings.TrimSpace(string(raw)))
	if err != nil {
		return fmt.Errorf("agent token: %w", err)
	}
	logFile, err := os.Create(filepath.Join(env.Dir, "hollow.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	f := &fleet{token: tok, servers: servers, base: env.Dir, wire: prometheus.NewRegistry(),
		log: slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	defer f.stopAll()

	admin := servers[0].client
	clients := []kubernetes.Interface{servers[0].client, servers[1].client, servers[2].client}
	if err := ensureNamespace(ctx, admin, apiNamespace); err != nil {
		return err
	}
	if err := waitNodesReady(ctx, admin, 3, time.Minute); err != nil {
		return err
	}
	// The servers run no pods here: their Nodes take none.
	for _, s := range servers {
		patch := []byte(`{"spec":{"taints":[{"key":"node-role.kubernetes.io/control-plane","effect":"NoSchedule"}]}}`)
		if _, err := admin.CoreV1().Nodes().Patch(ctx, s.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("taint %s: %w", s.name, err)
		}
	}
	pc, err := followPods(ctx, admin)
	if err != nil {
		return err
	}
	fmt.Printf("machine: %d CPUs (%s), kernel %s; data on %s; isle %s\n\n", env.CPUs, env.CPUModel, env.Kernel, env.Disk, env.Isle)

	var results []result
	defer func() {
		// What was measured before a failure is shown all the same.
		if err != nil && len(results) > 0 && ctx.Err() == nil {
			fmt.Printf("The bench stopped after %d of its sizes (%v); what it measured:\n\n", len(results), err)
			report(os.Stdout, env, results, finalResults{})
		}
	}()
	deployments := 0
	for _, st := range o.steps {
		r := result{step: st}
		began := time.Now()
		cpu0, err := selfCPU()
		if err != nil {
			return err
		}
		if err := f.grow(ctx, admin, st.boards, o.wave); err != nil {
			return err
		}
		r.joined = time.Since(began)
		slog.Info("boards ready", "boards", st.boards, "took", r.joined.Round(time.Millisecond))

		w0, err := written(servers)
		if err != nil {
			return err
		}
		want := (st.pods + replicasPer - 1) / replicasPer
		began = time.Now()
		if err := addDeployments(ctx, admin, deployments, want); err != nil {
			return err
		}
		r.newPods = (want - deployments) * replicasPer
		deployments, r.deployments = want, want
		boundAt, runningAt, err := pc.waitPods(ctx, want*replicasPer, 15*time.Minute)
		if err != nil {
			return err
		}
		r.bound, r.running = boundAt.Sub(began), runningAt.Sub(began)
		slog.Info("pods running", "pods", want*replicasPer, "bound", r.bound.Round(time.Millisecond), "running", r.running.Round(time.Millisecond))
		// What the pods' writes cause settles (EndpointSlices, usage).
		if err := sleep(ctx, 10*time.Second); err != nil {
			return err
		}
		w1, err := written(servers)
		if err != nil {
			return err
		}
		if r.newPods > 0 {
			r.writtenPerPod = float64(w1-w0) / float64(r.newPods)
		}
		cpu1, err := selfCPU()
		if err != nil {
			return err
		}
		r.benchGrow = cpu1 - cpu0
		if err := idle(ctx, &r, servers, f, o.idle); err != nil {
			return err
		}
		if r.api, err = measureAPI(ctx, clients, pc.keys(), o.ops); err != nil {
			return err
		}
		results = append(results, r)
		slog.Info("size measured", "boards", st.boards, "pods", st.pods, "bench CPU growing", r.benchGrow,
			"bench CPU idle", fmt.Sprintf("%.1f%%", 100*r.benchIdle), "bench RSS MiB", r.benchRSS/mib)
		if o.memProfile != "" {
			if err := writeHeapProfile(o.memProfile); err != nil {
				return err
			}
		}
		if o.serverHeaps != "" {
			if err := writeServerHeaps(ctx, servers, o.serverHeaps, st.boards, st.pods); err != nil {
				return err
			}
		}
	}
	final, err := failures(ctx, admin, servers, f, o.kills)
	if err != nil {
		return err
	}
	report(os.Stdout, env, results, final)
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// written is the bytes all servers have written so far.
func written(ss []*server) (uint64, error) {
	var n uint64
	for _, s := range ss {
		w, err := s.p.WriteBytes()
		if err != nil {
			return 0, err
		}
		n += w
	}
	return n, nil
}

// idle measures the servers' CPU and the gossip traffic over d, then the
// servers' memory.
func idle(ctx context.Context, r *result, ss []*server, f *fleet, d time.Duration) error {
	var before [3]serverSample
	for i, s := range ss {
		var err error
		if before[i].cpu, err = s.p.CPUTime(); err != nil {
			return err
		}
	}
	g0 := gossipBytes(f.wire)
	self0, err := selfCPU()
	if err != nil {
		return err
	}
	if err := sleep(ctx, d); err != nil {
		return err
	}
	g1 := gossipBytes(f.wire)
	self1, err := selfCPU()
	if err != nil {
		return err
	}
	r.benchIdle = (self1 - self0).Seconds() / d.Seconds()
	m, err := benchkit.ReadMemory(os.Getpid())
	if err != nil {
		return err
	}
	r.benchRSS = m.RSS
	r.gossip = (g1 - g0) / d.Seconds() / float64(len(f.boards))
	for i, s := range ss {
		cpu, err := s.p.CPUTime()
		if err != nil {
			return err
		}
		r.cpu[i] = (cpu - before[i].cpu).Seconds() / d.Seconds()
		if r.servers[i], err = s.sample(ctx); err != nil {
			return err
		}
	}
	if l, err := leader(ctx, ss); err == nil {
		for i := range ss {
			if ss[i] == l {
				r.leader = i
			}
		}
	}
	return nil
}

// gossipBytes is the process's gossip bytes on the wire so far.
func gossipBytes(reg *prometheus.Registry) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return 0
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "isle_gossip_bytes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			n += m.GetCounter().GetValue()
		}
	}
	return n
}

// keys are the pods the counter knows, namespace/name.
func (pc *podCounter) keys() []string {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	out := make([]string, 0, len(pc.bound))
	for k := range pc.bound {
		out = append(out, k)
	}
	return out
}

// finalResults are the failures at the last size.
type finalResults struct {
	notReady       []time.Duration // a hollow board killed → its Node not Ready
	elected, write time.Duration   // the leader killed → another leads; → a write succeeds
	killedLeader   string
}

func failures(ctx context.Context, admin kubernetes.Interface, ss []*server, f *fleet, kills int) (finalResults, error) {
	var out finalResults
	for k := range kills {
		h := f.boards[len(f.boards)-1-k]
		began := time.Now()
		h.kill()
		for {
			n, err := admin.CoreV1().Nodes().Get(ctx, h.name, metav1.GetOptions{})
			if err == nil && !nodeReady(n) {
				out.notReady = append(out.notReady, time.Since(began))
				break
			}
			if time.Since(began) > 3*time.Minute {
				return out, fmt.Errorf("killed board %s: its Node still Ready after 3 minutes", h.name)
			}
			if err := sleep(ctx, 100*time.Millisecond); err != nil {
				return out, err
			}
		}
		slog.Info("hollow board killed", "board", h.name, "notReady", out.notReady[len(out.notReady)-1].Round(time.Millisecond))
	}
	l, err := leader(ctx, ss)
	if err != nil {
		return out, err
	}
	out.killedLeader = l.name
	began := time.Now()
	l.p.Kill()
	l.p = nil
	var others []*server
	for _, s := range ss {
		if s != l {
			others = append(others, s)
		}
	}
	for i := 0; out.elected == 0 || out.write == 0; i++ {
		if time.Since(began) > 2*time.Minute {
			return out, errors.New("leader killed: no new leader or no write within 2 minutes")
		}
		if out.elected == 0 {
			if nl, err := leader(ctx, others); err == nil && nl != l {
				out.elected = time.Since(began)
			}
		}
		if out.write == 0 {
			c := others[i%len(others)].client
			wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := c.CoreV1().ConfigMaps(apiNamespace).Create(wctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("failover-%d", i)}}, metav1.CreateOptions{})
			cancel()
			if err == nil {
				out.write = time.Since(began)
			}
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return out, err
		}
	}
	slog.Info("leader killed", "server", l.name, "elected", out.elected.Round(time.Millisecond), "write", out.write.Round(time.Millisecond))
	return out, nil
}
