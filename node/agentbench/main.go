// Command agentbench is `make bench-agent`: one server board (running no
// pods) and one agent board running pods through a containerd of the
// bench's own, on loopback. The image is imported (isle images import),
// so no registry is involved. It measures how long pods take from being
// bound to the board to Running, the agent's memory with those pods
// running, and the CPU the agent uses while they idle.
//
// The peers' figures: the kubelet's pod start SLO is 5 s p99 (image
// present); a k3s agent takes ~270 MB on a Pi 4.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/isle-cluster/isle/node/containers/ctrtest"
	"github.com/isle-cluster/isle/node/netns"
	"github.com/isle-cluster/isle/raft/benchkit"
)

func main() {
	bin := flag.String("isle", "out/isle", "the isle binary")
	pods := flag.Int("pods", 50, "pods run on the agent board")
	interval := flag.Duration("interval", 200*time.Millisecond, "time between two pods' creations")
	idle := flag.Duration("idle", time.Minute, "how long to measure the agent's CPU while the pods idle")
	flag.Parse()
	if err := run(*bin, *pods, *interval, *idle); err != nil {
		fmt.Fprintln(os.Stderr, "agentbench:", err)
		os.Exit(1)
	}
}

const image = "bench.isle.invalid/busybox:1"

func run(bin string, n int, interval, idle time.Duration) error {
	if os.Geteuid() != 0 {
		return errors.New("runs containers: run as root (make bench-agent)")
	}
	for _, tool := range []string{"containerd", "runc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("needs %s: run make setup", tool)
		}
	}
	ctx := context.Background()
	env, err := benchkit.Probe(ctx, bin, "isle-agentbench-")
	if err != nil {
		return err
	}
	base := env.Dir
	defer os.RemoveAll(base)
	fmt.Printf("machine: %d CPUs (%s), kernel %s; data on %s\n", env.CPUs, env.CPUModel, env.Kernel, env.Disk)

	// containerd, with the image imported.
	ctrDir, err := os.MkdirTemp("", "ctrd")
	if err != nil {
		return err
	}
	defer os.RemoveAll(ctrDir)
	d, err := ctrtest.StartContainerd(ctrDir)
	if err != nil {
		return err
	}
	defer d.Stop()
	archive := filepath.Join(base, "busybox.tar")
	if err := writeArchive(archive); err != nil {
		return err
	}
	if out, err := exec.Command(bin, "images", "import", archive, "--containerd", d.Socket, "--containerd-namespace", "isle-bench").CombinedOutput(); err != nil {
		return fmt.Errorf("isle images import: %v\n%s", err, out)
	}

	// The boards.
	ports, err := benchkit.FreePorts(7)
	if err != nil {
		return err
	}
	srvDir, agentDir, runDir := filepath.Join(base, "s1"), filepath.Join(base, "a1"), filepath.Join(base, "run")
	srv, err := benchkit.StartProc("isle server", filepath.Join(base, "s1.log"), bin, "server", "--init", "--name", "s1",
		"--data-dir", srvDir, "--address", "127.0.0.1", "--api-port", strconv.Itoa(ports[0]), "--raft-port", strconv.Itoa(ports[1]),
		"--gossip-port", strconv.Itoa(ports[2]), "--store-addr", "127.0.0.1:"+strconv.Itoa(ports[3]), "--containerd", "none")
	if err != nil {
		return err
	}
	defer srv.Stop(5 * time.Second)
	procs := []*benchkit.Proc{srv}
	if err := benchkit.WaitFor(ctx, 30*time.Second, "the server's token", procs, func(context.Context) error {
		_, err := os.Stat(filepath.Join(srvDir, "token"))
		return err
	}); err != nil {
		return err
	}
	tok, err := os.ReadFile(filepath.Join(srvDir, "token"))
	if err != nil {
		return err
	}
	agent, err := benchkit.StartProc("isle agent", filepath.Join(base, "a1.log"), bin, "agent", "--name", "a1",
		"--data-dir", agentDir, "--address", "127.0.0.1", "--gossip-port", strconv.Itoa(ports[4]),
		"--join", "127.0.0.1:"+strconv.Itoa(ports[2]), "--token", strings.TrimSpace(string(tok)),
		"--containerd", d.Socket, "--containerd-namespace", "isle-bench", "--run-dir", runDir,
		"--stream-port", strconv.Itoa(ports[5]), "--metrics-addr", "127.0.0.1:"+strconv.Itoa(ports[6]))
	if err != nil {
		return err
	}
	defer func() {
		agent.Stop(5 * time.Second)
		cleanRunDir(runDir)
		ctrtest.UnmountUnder(agentDir)
	}()
	procs = append(procs, agent)

	kc := filepath.Join(base, "kubeconfig")
	if out, err := exec.Command(bin, "kubeconfig", "--data-dir", srvDir, "-o", kc, "--server", "https://127.0.0.1:"+strconv.Itoa(ports[0])).CombinedOutput(); err != nil {
		return fmt.Errorf("isle kubeconfig: %v\n%s", err, out)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 100, 200
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := benchkit.WaitFor(ctx, 60*time.Second, "Node a1 Ready", procs, func(ctx context.Context) error {
		node, err := cs.CoreV1().Nodes().Get(ctx, "a1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return errors.New("not Ready")
	}); err != nil {
		return err
	}
	rssBefore, _, _ := agent.Memory()

	latencies, err := startPods(ctx, cs, n, interval, procs)
	if err != nil {
		return fmt.Errorf("%w\nagent log:\n%s", err, agent.Tail(20))
	}
	// Settle, then the idle measurements.
	time.Sleep(5 * time.Second)
	cpu0, err := agent.CPUTime()
	if err != nil {
		return err
	}
	t0 := time.Now()
	time.Sleep(idle)
	cpu1, err := agent.CPUTime()
	if err != nil {
		return err
	}
	idleCPU := float64(cpu1-cpu0) / float64(time.Since(t0))
	rss, peak, err := agent.Memory()
	if err != nil {
		return err
	}
	anon, file, err := agent.MemorySplit()
	if err != nil {
		return err
	}

	slices.Sort(latencies)
	p50, p99 := pct(latencies, 0.50), pct(latencies, 0.99)
	mib := func(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	fmt.Printf("\n%d pods (busybox sleep, image present) bound to one agent board, created every %v\n\n", n, interval)
	fmt.Printf("| %-38s | %-12s | %-26s | %-4s |\n", "measure", "isle", "target", "")
	fmt.Printf("|%s|%s|%s|%s|\n", strings.Repeat("-", 40), strings.Repeat("-", 14), strings.Repeat("-", 28), strings.Repeat("-", 6))
	row := func(m, v, target string, ok bool) {
		verdict := ""
		if target != "" {
			verdict = benchkit.Verdict(ok)
		}
		fmt.Printf("| %-38s | %-12s | %-26s | %-4s |\n", m, v, target, verdict)
	}
	row("pod start, bound → Running, p50", p50.Round(time.Millisecond).String(), "", true)
	row("pod start, bound → Running, p99", p99.Round(time.Millisecond).String(), "≤ 1s (kubelet SLO 5s)", p99 <= time.Second)
	row("pod start, max", latencies[len(latencies)-1].Round(time.Millisecond).String(), "", true)
	row(fmt.Sprintf("agent RSS with %d pods", n), mib(rss), "≤ 24 MiB (k3s agent ~270 MB)", rss <= 24<<20)
	row("  of which anonymous (heap, stacks)", mib(anon), "", true)
	row("  of which file-backed (the binary)", mib(file), "", true)
	row("agent peak RSS (VmHWM)", mib(peak), "", true)
	row("agent RSS with no pods", mib(rssBefore), "", true)
	row(fmt.Sprintf("agent CPU at idle with %d pods", n), fmt.Sprintf("%.2f%% core", 100*idleCPU), "", true)
	return nil
}

// startPods creates n pods bound to a1 and returns, for each, the time
// from its creation (its binding: spec.nodeName is set) to the watch
// showing it Running.
func startPods(ctx context.Context, cs *kubernetes.Clientset, n int, interval time.Duration, procs []*benchkit.Proc) ([]time.Duration, error) {
	w, err := cs.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", "a1").String()})
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	created := map[string]time.Time{}
	var latencies []time.Duration
	done := map[string]bool{}
	running := make(chan seen, 4*n)
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			if p.Status.Phase == corev1.PodRunning {
				running <- seen{p.Name, time.Now()}
			}
		}
	}()
	for i := range n {
		name := fmt.Sprintf("bench-%03d", i)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: "a1",
			TerminationGracePeriodSeconds: ptr(int64(1)),
			Containers: []corev1.Container{{Name: "c", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"sleep", "3600"}}}}}
		created[name] = time.Now() // before the watch can see it
		if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
		time.Sleep(interval)
		drain(running, created, done, &latencies)
	}
	deadline := time.After(2 * time.Minute)
	for len(latencies) < n {
		select {
		case s := <-running:
			record(s, created, done, &latencies)
		case <-deadline:
			return nil, fmt.Errorf("%d of %d pods Running after 2 minutes", len(latencies), n)
		}
		for _, p := range procs {
			if err := p.Dead(); err != nil {
				return nil, err
			}
		}
	}
	return latencies, nil
}

// seen is a pod the watch showed Running, and when.
type seen struct {
	name string
	at   time.Time
}

func drain(running chan seen, created map[string]time.Time, done map[string]bool, out *[]time.Duration) {
	for {
		select {
		case s := <-running:
			record(s, created, done, out)
		default:
			return
		}
	}
}

func record(s seen, created map[string]time.Time, done map[string]bool, out *[]time.Duration) {
	start, ok := created[s.name]
	if !ok || done[s.name] {
		return
	}
	done[s.name] = true
	*out = append(*out, s.at.Sub(start))
}

func pct(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ptr[T any](v T) *T { return &v }

func writeArchive(path string) error {
	img, err := ctrtest.BusyboxImage()
	if err != nil {
		return err
	}
	im, err := ctrtest.BuildImage(img)
	if err != nil {
		return err
	}
	tag, err := name.NewTag(image)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(path, tag, im)
}

// cleanRunDir removes the pods' network namespaces the agent left.
func cleanRunDir(dir string) {
	ents, _ := os.ReadDir(filepath.Join(dir, "netns"))
	for _, e := range ents {
		_ = netns.Delete(filepath.Join(dir, "netns", e.Name()))
	}
}
