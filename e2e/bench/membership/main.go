// Command membench is `make bench-membership`: ten boards (three servers,
// seven agents) as isle processes on loopback, each with its own address
// and the standard ports. It measures how long a board killed with
// SIGKILL takes to show NotReady, what every board writes to disk while the
// cluster idles, fresh and after a burst of writes (target: nothing, so
// that SD cards last), and the gossip traffic per board.
//
// Kubernetes' reference: a Node goes NotReady after node-monitor-grace-
// period (40 s by default) without a renewal of its Lease, which every
// kubelet renews every 10 s through etcd.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
	"github.com/isle-cluster/isle/e2e/bench/benchkit/isleserver"
)

func main() {
	bin := flag.String("isle", "out/isle", "the isle binary")
	idle := flag.Duration("idle", 10*time.Minute, "how long to measure the idle cluster's disk writes and gossip traffic")
	trials := flag.Int("trials", 20, "boards killed one after another")
	agents := flag.Int("agents", 7, "agents besides the three servers")
	flag.Parse()
	if err := run(*bin, *idle, *trials, *agents); err != nil {
		fmt.Fprintln(os.Stderr, "membench:", err)
		os.Exit(1)
	}
}

type board struct {
	name, role, addr, dir, log string
	args                       []string
	p                          *benchkit.Proc // nil while the board is down
}

func (b *board) metricsURL() string { return "http://" + b.addr + ":10249/metrics" }

// start runs the board; one started again after a kill appends to the
// same log.
func (b *board) start() (err error) {
	b.p, err = benchkit.StartProc(b.name, b.log, b.args[0], b.args[1:]...)
	return err
}

func (b *board) kill() {
	if b.p == nil {
		return
	}
	b.p.Kill()
	b.p = nil
}

func run(bin string, idle time.Duration, trials, agents int) error {
	env, err := benchkit.Probe(context.Background(), bin, "isle-membench-")
	if err != nil {
		return err
	}
	base := env.Dir
	defer os.RemoveAll(base)
	fmt.Printf("machine: %d CPUs (%s), kernel %s; data on %s\n", env.CPUs, env.CPUModel, env.Kernel, env.Disk)

	var boards []*board
	defer func() {
		for _, b := range boards {
			b.kill()
		}
	}()
	add := func(name, role, addr string, extra ...string) (*board, error) {
		b := &board{name: name, role: role, addr: addr, dir: filepath.Join(base, name), log: filepath.Join(base, name+".log")}
		b.args = append([]string{bin, role, "--name", name, "--address", addr, "--data-dir", b.dir, "--containerd", "none",
			"--run-dir", filepath.Join(b.dir, "run"), "--config", ""}, extra...)
		b.args = append(b.args, "--metrics-addr", addr+":10249")
		boards = append(boards, b)
		return b, b.start()
	}

	s1, err := add("s1", "server", "127.0.0.11", "--init")
	if err != nil {
		return err
	}
	var token string
	if err := waitUntil(30*time.Second, "the token", func() bool {
		b, err := os.ReadFile(filepath.Join(s1.dir, "token"))
		token = strings.TrimSpace(string(b))
		return err == nil && token != ""
	}); err != nil {
		return err
	}
	for i := 2; i <= 3; i++ {
		if _, err := add(fmt.Sprintf("s%d", i), "server", fmt.Sprintf("127.0.0.%d", 10+i), "--join", "127.0.0.11", "--token", token); err != nil {
			return err
		}
	}
	for i := 1; i <= agents; i++ {
		if _, err := add(fmt.Sprintf("a%d", i), "agent", fmt.Sprintf("127.0.0.%d", 20+i), "--join", "127.0.0.12", "--token", token); err != nil {
			return err
		}
	}
	// One client per server: the one asked may be the board just killed.
	var cs clients
	for _, srv := range boards[:3] {
		cfg, err := isleserver.RESTConfig(context.Background(), bin, s1.dir, "https://"+srv.addr+":6443")
		if err != nil {
			return err
		}
		cfg.Timeout = 2 * time.Second
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		cs = append(cs, c)
	}
	allReady := func() bool {
		for _, b := range boards {
			if readyOf(cs, b.name) != corev1.ConditionTrue {
				return false
			}
		}
		return true
	}
	if err := waitUntil(90*time.Second, "ten Ready nodes", allReady); err != nil {
		return err
	}
	fmt.Printf("%d boards Ready; settling 10 s\n", len(boards))
	time.Sleep(10 * time.Second)

	// Idle: disk writes of the servers, gossip bytes of every board.
	hc := &http.Client{Timeout: 5 * time.Second}
	gossipBytes := func() (map[string]float64, error) {
		out := map[string]float64{}
		for _, b := range boards {
			vals, err := benchkit.Scrape(context.Background(), hc, b.metricsURL())
			if err != nil {
				return nil, err
			}
			out[b.name] = benchkit.Sum(vals, "isle_gossip_bytes_total")
		}
		return out, nil
	}
	// Disk writes of every isle process (/proc/PID/io write_bytes).
	writes := func() ([]uint64, error) {
		var out []uint64
		for _, b := range boards {
			w, err := b.p.WriteBytes()
			if err != nil {
				return nil, err
			}
			out = append(out, w)
		}
		return out, nil
	}
	// idleWrites measures each board's bytes written per second over idle.
	idleWrites := func(what string) ([]float64, error) {
		w0, err := writes()
		if err != nil {
			return nil, err
		}
		fmt.Printf("idle for %v (%s) ...\n", idle, what)
		time.Sleep(idle)
		w1, err := writes()
		if err != nil {
			return nil, err
		}
		out := make([]float64, len(boards))
		for i := range boards {
			out[i] = float64(w1[i]-w0[i]) / idle.Seconds()
		}
		return out, nil
	}
	g0, err := gossipBytes()
	if err != nil {
		return err
	}
	fresh, err := idleWrites("a fresh cluster")
	if err != nil {
		return err
	}
	g1, err := gossipBytes()
	if err != nil {
		return err
	}
	if err := burst(cs[0], 300); err != nil {
		return err
	}
	afterBurst, err := idleWrites("after a burst of 300 ConfigMaps created, updated and deleted")
	if err != nil {
		return err
	}
	secs := idle.Seconds()
	var perBoard []float64
	for _, b := range boards {
		perBoard = append(perBoard, (g1[b.name]-g0[b.name])/secs)
	}
	slices.Sort(perBoard)

	// Kills: one board at a time, in turn (servers included), restarted
	// and Ready again before the next.
	var times []time.Duration
	for i := range trials {
		victim := boards[i%len(boards)]
		victim.kill()
		t0 := time.Now()
		if err := waitUntil(60*time.Second, victim.name+" NotReady", func() bool {
			return readyOf(cs, victim.name) == corev1.ConditionUnknown
		}); err != nil {
			return err
		}
		times = append(times, time.Since(t0))
		fmt.Printf("trial %2d: %s NotReady after %.2f s\n", i+1, victim.name, time.Since(t0).Seconds())
		if err := victim.start(); err != nil {
			return err
		}
		if err := waitUntil(60*time.Second, "all Ready again", allReady); err != nil {
			return err
		}
		time.Sleep(2 * time.Second)
	}
	slices.Sort(times)

	fmt.Println()
	fmt.Printf("| measure | isle | target | Kubernetes default |\n| --- | ---: | ---: | ---: |\n")
	fmt.Printf("| kill -9 → Node NotReady, median of %d | %.2f s | ≤ 6 s | 40 s grace |\n", len(times), quantile(times, 0.5).Seconds())
	fmt.Printf("| kill -9 → Node NotReady, p99 | %.2f s | | |\n", quantile(times, 0.99).Seconds())
	for i, b := range boards[:3] {
		fmt.Printf("| idle disk writes, %s, over %v, fresh | %.1f B/s | 0 B/s | Lease renewals every 10 s |\n", b.name, idle, fresh[i])
		fmt.Printf("| idle disk writes, %s, over %v, after a burst | %.1f B/s | 0 B/s | |\n", b.name, idle, afterBurst[i])
	}
	fmt.Printf("| idle disk writes, agents, max over %d, fresh | %.1f B/s | 0 B/s | |\n", len(boards)-3, slices.Max(fresh[3:]))
	fmt.Printf("| idle disk writes, agents, max over %d, after a burst | %.1f B/s | 0 B/s | |\n", len(boards)-3, slices.Max(afterBurst[3:]))
	fmt.Printf("| gossip bytes per board (sent + received UDP, sent TCP), median | %.0f B/s | | |\n", perBoard[len(perBoard)/2])
	fmt.Printf("| gossip bytes per board, max | %.0f B/s | | |\n", perBoard[len(perBoard)-1])
	return nil
}

// burst creates, updates and deletes n ConfigMaps, one at a time.
func burst(cs *kubernetes.Clientset, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cms := cs.CoreV1().ConfigMaps("default")
	for i := range n {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("burst-%d", i)}, Data: map[string]string{"v": strings.Repeat("x", 512)}}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("burst: %w", err)
		}
		cm.Data["v"] = strings.Repeat("y", 512)
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("burst: %w", err)
		}
	}
	for i := range n {
		if err := cms.Delete(ctx, fmt.Sprintf("burst-%d", i), metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("burst: %w", err)
		}
	}
	return nil
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(q*float64(len(d))+0.5) - 1
	return d[min(max(i, 0), len(d)-1)]
}

// clients are the servers' API clients.
type clients []*kubernetes.Clientset

// readyOf is the Node's Ready status as the first server that answers
// tells it.
func readyOf(cs clients, name string) corev1.ConditionStatus {
	for _, c := range cs {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		cancel()
		if err != nil {
			continue
		}
		for _, cd := range n.Status.Conditions {
			if cd.Type == corev1.NodeReady {
				return cd.Status
			}
		}
		return ""
	}
	return ""
}

func waitUntil(d time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("timed out waiting for " + what)
		}
		time.Sleep(25 * time.Millisecond)
	}
	return nil
}
