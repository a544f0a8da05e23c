// Command day2bench is `make bench-day2`: what a cluster that lives for
// years goes through, on an island of three servers and two agents
// running the tutorial's hello app (deploy/examples/hello.yaml):
//
//   - a backup (`isle snapshot save`) with 1,000 pods stored: its time and
//     size, and the time of `isle snapshot restore` of it;
//   - cold power-on: every board killed at once (kill -9 of everything of
//     it), then powered on: the time to every Node Ready and /hello
//     answering through the Ingress (median of -cold runs);
//   - every server down for -down: the agents' isle memory over that time
//     (k3s agents have run out of memory then, k3s#11346), and /hello
//     still answered by the agents;
//   - a rolling upgrade, board by board (`isle board upgrade`: SIGTERM,
//     then the binary again, servers first, the leader last), while a
//     client requests /hello through the Ingress on the servers' floating
//     address and another writes ConfigMaps through it: failed requests.
//
// The island is removed at the end, also on errors, SIGINT and SIGTERM.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
	"github.com/isle-cluster/isle/e2e/bench/islandbench"
	"github.com/isle-cluster/isle/node/island"
)

type options struct {
	isle string        // -isle: the isle binary
	dir  string        // -dir: the island's directory
	cold int           // -cold: cold power-ons
	down time.Duration // -down: how long every server is down
}

func main() { benchkit.Main("day2bench", parse, run) }

func parse(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("day2bench", flag.ContinueOnError)
	fs.StringVar(&o.isle, "isle", "out/isle", "the isle binary")
	fs.StringVar(&o.dir, "dir", "/tmp/isle-day2bench", "the island's directory (removed at the end)")
	fs.IntVar(&o.cold, "cold", 5, "cold power-ons of the whole island")
	fs.DurationVar(&o.down, "down", 10*time.Minute, "how long every server is down while the agents' memory is sampled")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("flags: unexpected arguments %q", fs.Args())
	case o.cold < 1:
		return o, fmt.Errorf("flags: -cold %d: want at least 1", o.cold)
	case o.down < 10*time.Second:
		return o, fmt.Errorf("flags: -down %v: want at least 10s", o.down)
	}
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return o, fmt.Errorf("flags: -dir %q: %w", o.dir, err)
	}
	o.dir = dir
	return o, nil
}

var boards = []string{"pi1", "pi2", "pi3", "pi4", "pi5"}

func run(ctx context.Context, o options) (err error) {
	if err := islandbench.Preflight(ctx, o.isle, o.dir, "bench-day2"); err != nil {
		return err
	}
	isl := &islandbench.Island{Bin: o.isle, Dir: o.dir, Servers: 3, Agents: 2}
	defer func() { err = errors.Join(err, isl.Down()) }()
	if _, err := isl.Up(ctx); err != nil {
		return err
	}
	st, err := island.Load(o.dir)
	if err != nil {
		return err
	}
	if err := islandbench.PushHello(ctx, st, "linux/"+goarch()); err != nil {
		return err
	}
	manifest, err := os.ReadFile("deploy/examples/hello.yaml")
	if err != nil {
		return fmt.Errorf("the hello app (run the bench in the isle module): %w", err)
	}
	if _, err := islandbench.Kubectl(ctx, st, string(manifest), "apply", "-f", "-"); err != nil {
		return err
	}
	b := &bench{o: o, st: st}
	if err := b.waitWhole(ctx, 3*time.Minute); err != nil {
		return err
	}
	var t benchkit.Table

	// A backup with 1,000 pods stored, and a restore of it.
	save, restore, size, err := b.snapshot(ctx, 1000)
	if err != nil {
		return err
	}
	t.Row("isle snapshot save, 1,000 pods stored: time, file size", fmt.Sprintf("%.2f s, %.2f MB", save.Seconds(), float64(size)/1e6), "", true)
	t.Row("isle snapshot restore of that file into a new data directory", fmt.Sprintf("%.2f s", restore.Seconds()), "", true)

	// Cold power-ons.
	var colds []float64
	for i := range o.cold {
		took, err := b.coldPowerOn(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("cold power-on %d: %.1f s to every Node Ready and /hello answering\n", i+1, took.Seconds())
		colds = append(colds, took.Seconds())
	}
	t.Row(fmt.Sprintf("cold power-on of 5 boards → every Node Ready and /hello 200, median of %d", len(colds)),
		fmt.Sprintf("%.1f s", islandbench.Median(colds)), "", true)

	// Every server down.
	first, peak, last, answered, err := b.serversDown(ctx)
	if err != nil {
		return err
	}
	t.Row(fmt.Sprintf("agent isle RSS, every server down %v: start → max → end", o.down),
		fmt.Sprintf("%.1f → %.1f → %.1f MiB", mib(first), mib(peak), mib(last)), "flat", peak <= first+first/10)
	t.Row("/hello through the agents with every server down", fmt.Sprintf("%d of %d answered", answered[0], answered[1]), "all", answered[0] == answered[1])

	// A rolling upgrade.
	requests, failed, err := b.rollingUpgrade(ctx)
	if err != nil {
		return err
	}
	t.Row("rolling upgrade of 5 boards: failed requests (GET /hello via the VIP, ConfigMap writes)",
		fmt.Sprintf("%d of %d", failed, requests), "0", failed == 0)
	fmt.Println()
	t.Write(os.Stdout)
	return nil
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

type bench struct {
	o  options
	st *island.State
}

func (b *bench) isle(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, b.o.isle, append(args, "--dir", b.o.dir)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("isle %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// whole reports whether every Node is Ready and /hello answers on every
// board.
func (b *bench) whole(ctx context.Context) bool {
	out, err := islandbench.Kubectl(ctx, b.st, "", "get", "nodes", "-o", `jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
	if err != nil || strings.Count(string(out), "True") != len(boards) {
		return false
	}
	for _, name := range boards {
		if get(b.addr(name)) != nil {
			return false
		}
	}
	return true
}

func (b *bench) waitWhole(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for !b.whole(ctx) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the island not whole (every Node Ready, /hello on every board) within %v", d)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}

func (b *bench) addr(name string) string {
	for _, bd := range b.st.Boards {
		if bd.Name == name {
			return bd.Addr.String()
		}
	}
	return ""
}

var client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

func get(host string) error {
	resp, err := client.Get("http://" + host + "/hello")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

// snapshot stores n pods (Pending: they ask for a node nobody has), times
// `isle snapshot save` on pi1 and `isle snapshot restore` of the file into
// a new data directory, and deletes the pods.
func (b *bench) snapshot(ctx context.Context, n int) (save, restore time.Duration, size int64, err error) {
	var manifest strings.Builder
	for i := range n {
		fmt.Fprintf(&manifest, "---\napiVersion: v1\nkind: Pod\nmetadata: {name: stored-%d, labels: {bench: day2}}\n"+
			"spec: {nodeSelector: {bench: nowhere}, containers: [{name: c, image: %s}]}\n", i, "registry.island/"+islandbench.HelloRef)
	}
	if _, err := islandbench.Kubectl(ctx, b.st, manifest.String(), "apply", "-f", "-"); err != nil {
		return 0, 0, 0, err
	}
	dir, err := os.MkdirTemp("", "isle-day2-")
	if err != nil {
		return 0, 0, 0, err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "cluster.snapshot")
	began := time.Now()
	if out, err := exec.CommandContext(ctx, "ip", "netns", "exec", "isle-pi1", b.o.isle, "snapshot", "save", file,
		"--socket", filepath.Join(b.o.dir, "pi1", "run", "admin.sock")).CombinedOutput(); err != nil {
		return 0, 0, 0, fmt.Errorf("isle snapshot save: %w: %s", err, out)
	}
	save = time.Since(began)
	fi, err := os.Stat(file)
	if err != nil {
		return 0, 0, 0, err
	}
	token, err := os.ReadFile(filepath.Join(b.o.dir, "pi1", "data", "token"))
	if err != nil {
		return 0, 0, 0, fmt.Errorf("the cluster token: %w", err)
	}
	began = time.Now()
	if out, err := exec.CommandContext(ctx, b.o.isle, "snapshot", "restore", file, "--data-dir", filepath.Join(dir, "restored"),
		"--token", strings.TrimSpace(string(token))).CombinedOutput(); err != nil {
		return 0, 0, 0, fmt.Errorf("isle snapshot restore: %w: %s", err, out)
	}
	restore = time.Since(began)
	if _, err := islandbench.Kubectl(ctx, b.st, "", "delete", "pods", "-l", "bench=day2", "--wait=false"); err != nil {
		return 0, 0, 0, err
	}
	return save, restore, fi.Size(), nil
}

// coldPowerOn kills every board, powers them all on, and times the island
// back to whole.
func (b *bench) coldPowerOn(ctx context.Context) (time.Duration, error) {
	for _, name := range boards {
		if err := b.isle(ctx, "board", "kill", name); err != nil {
			return 0, err
		}
	}
	began := time.Now()
	for _, name := range boards {
		if err := b.isle(ctx, "board", "start", name); err != nil {
			return 0, err
		}
	}
	if err := b.waitWhole(ctx, 5*time.Minute); err != nil {
		return 0, err
	}
	return time.Since(began), nil
}

// serversDown stops every server for o.down, sampling the agents' isle
// RSS every 10 s (the larger of the two) and /hello through them.
func (b *bench) serversDown(ctx context.Context) (first, peak, last uint64, answered [2]int, err error) {
	for _, name := range boards[:3] {
		if err = b.isle(ctx, "board", "stop", name); err != nil {
			return
		}
	}
	end := time.Now().Add(b.o.down)
	for time.Now().Before(end) {
		var rss uint64
		for _, name := range boards[3:] {
			var r uint64
			if r, err = agentRSS(b.o.dir, name); err != nil {
				return
			}
			rss = max(rss, r)
			answered[1]++
			if get(b.addr(name)) == nil {
				answered[0]++
			}
		}
		if first == 0 {
			first = rss
		}
		peak, last = max(peak, rss), rss
		select {
		case <-ctx.Done():
			err = ctx.Err()
			return
		case <-time.After(10 * time.Second):
		}
	}
	for _, name := range boards[:3] {
		if err = b.isle(ctx, "board", "start", name); err != nil {
			return
		}
	}
	err = b.waitWhole(ctx, 3*time.Minute)
	return
}

// agentRSS is the resident memory of a board's isle process.
func agentRSS(dir, name string) (uint64, error) {
	st, err := island.Load(dir)
	if err != nil {
		return 0, err
	}
	bd, err := st.Board(name)
	if err != nil {
		return 0, err
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", bd.Isle.PID))
	if err != nil {
		return 0, fmt.Errorf("%s's isle: %w", name, err)
	}
	v, err := benchkit.ProcFields(status, "VmRSS")
	if err != nil {
		return 0, fmt.Errorf("%s's isle: %w", name, err)
	}
	return v[0], nil
}

// rollingUpgrade upgrades every board in turn (the servers first, the
// leader last) to the same binary while two clients work through the
// floating address, and counts their requests and failures.
func (b *bench) rollingUpgrade(ctx context.Context) (requests, failed int64, err error) {
	vip := b.st.VIP.String()
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var reqs, fails atomic.Int64
	count := func(err error, what string) {
		reqs.Add(1)
		if err != nil {
			fails.Add(1)
			fmt.Printf("%s failed: %v\n", what, err)
		}
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		for cctx.Err() == nil {
			count(get(vip), "GET /hello")
			time.Sleep(100 * time.Millisecond)
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; cctx.Err() == nil; i++ {
			_, err := islandbench.Kubectl(ctx, b.st, "", "create", "configmap", fmt.Sprintf("upgrade-%d", i), "--request-timeout=20s")
			count(err, "kubectl create configmap")
			time.Sleep(250 * time.Millisecond)
		}
	}()
	defer func() {
		cancel()
		wg.Wait()
		requests, failed = reqs.Load(), fails.Load()
	}()
	order, err := b.upgradeOrder(ctx)
	if err != nil {
		return 0, 0, err
	}
	for _, name := range order {
		if err := b.isle(ctx, "board", "upgrade", name); err != nil {
			return 0, 0, err
		}
		if err := b.waitWhole(ctx, 2*time.Minute); err != nil {
			return 0, 0, err
		}
	}
	time.Sleep(5 * time.Second)
	return 0, 0, nil
}

// upgradeOrder is the servers, the leader last, then the agents.
func (b *bench) upgradeOrder(ctx context.Context) ([]string, error) {
	out, err := exec.CommandContext(ctx, b.o.isle, "member", "list", "-o", "json", "--data-dir", filepath.Join(b.o.dir, "pi1", "data")).Output()
	if err != nil {
		return nil, fmt.Errorf("isle member list: %w", err)
	}
	var ms []struct{ Name, Raft string }
	if err := json.Unmarshal(out, &ms); err != nil {
		return nil, fmt.Errorf("isle member list: %w", err)
	}
	var order []string
	leader := ""
	for _, m := range ms {
		switch {
		case m.Raft == "leader":
			leader = m.Name
		case m.Raft != "":
			order = append(order, m.Name)
		}
	}
	if leader == "" {
		return nil, errors.New("isle member list: no leader")
	}
	slices.Sort(order)
	return append(append(order, leader), boards[3:]...), nil
}

func goarch() string { return runtime.GOARCH }
