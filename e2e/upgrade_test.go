package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// previousRelease is the commit of isle's release before issue 21 (0.1,
// which named no release), from which TestRollingUpgrade upgrades.
const previousRelease = "632fe0272f6fb3f2d6fb0dbfc83e849dcaf67e81"

// buildCommit builds the isle of a commit of this repository, from its
// own tree and go.mod.
func buildCommit(t *testing.T, commit string) string {
	t.Helper()
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("the repository's history is needed to build isle %s (git rev-parse: %v)", commit, err)
	}
	src := t.TempDir()
	archive := exec.Command("sh", "-c", fmt.Sprintf("git -C %s archive --format=tar %s | tar -x -C %s", strings.TrimSpace(string(root)), commit, src))
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("the tree of isle %s (a clone without that commit?): %v\n%s", commit, err, out)
	}
	bin := filepath.Join(t.TempDir(), "isle-"+commit[:7])
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-X main.version="+commit[:7]+" -X main.commit="+commit[:7], "-o", bin, "./cmd/isle")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build isle %s: %v\n%s", commit, err, out)
	}
	return bin
}

// TestRollingUpgrade upgrades an island of the previous release board by
// board, as the README's version skew policy says (servers one at a time,
// then the agents), while a client requests /hello through the Ingress on
// the servers' floating address and another writes ConfigMaps through it
// with kubectl: no request fails and every acknowledged write is there.
func TestRollingUpgrade(t *testing.T) {
	oldBin := buildCommit(t, previousRelease)
	newBin := isleBinary(t)
	isl := startIslandOf(t, oldBin, 3, 2)
	k := isl.kubectl
	manifest, err := os.ReadFile("../deploy/examples/hello.yaml")
	if err != nil {
		t.Fatal(err)
	}
	isl.apply(t, string(manifest))
	waitFor(t, 120*time.Second, "three hello replicas Ready", func() bool { return readyPods(k, "app=hello") == 3 })
	vip := isl.state.VIP.String()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func() error {
		resp, err := hc.Get("http://" + vip + "/hello")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		return nil
	}
	waitFor(t, 60*time.Second, "/hello through the Ingress on the floating address", func() bool { return get() == nil })

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var gets, writes, failed atomic.Int64
	var mu sync.Mutex
	var failures []string
	var written []string
	// step is what the upgrade was doing, and since when, for the failures.
	var step atomic.Value
	setStep := func(what string) { step.Store(time.Now().Format("15:04:05.000") + " " + what) }
	setStep("before the upgrade")
	fail := func(what string, began time.Time, err error) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf("%s (began %s, during: %s) %s: %v",
			time.Now().Format("15:04:05.000"), began.Format("15:04:05.000"), step.Load(), what, err))
		failed.Add(1)
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			began := time.Now()
			if err := get(); err != nil {
				fail("GET /hello", began, err)
			}
			gets.Add(1)
			time.Sleep(100 * time.Millisecond)
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			name := fmt.Sprintf("during-upgrade-%d", i)
			began := time.Now()
			if out, errOut, err := k.run("", "create", "configmap", name, "--from-literal=i="+fmt.Sprint(i), "--request-timeout=20s"); err != nil {
				fail("kubectl create configmap "+name, began, fmt.Errorf("%v: %s%s", err, out, errOut))
			} else {
				mu.Lock()
				written = append(written, name)
				mu.Unlock()
			}
			writes.Add(1)
			time.Sleep(250 * time.Millisecond)
		}
	}()

	// The servers first, the leader last, then the agents.
	members := func() ([]memberInfo, error) {
		out, err := exec.Command(newBin, "member", "list", "-o", "json", "--data-dir", filepath.Join(isl.dir, "pi1", "data")).Output()
		var ms []memberInfo
		if err == nil {
			err = json.Unmarshal(out, &ms)
		}
		return ms, err
	}
	ms, err := members()
	if err != nil {
		t.Fatalf("isle member list: %v", err)
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
	if leader == "" || len(order) != 2 {
		t.Fatalf("members %+v: want a leader and two voters", ms)
	}
	// The leader once more at the end: a server of this release hands
	// leadership on when it stops.
	order = append(order, leader, "pi4", "pi5", "the leader")
	oldVersion := previousRelease[:7]
	for i, b := range order {
		if b == leader && i == 2 {
			// The release before this one does not hand leadership on when
			// it stops, nor hold back new connections to the floating
			// address first; the README's upgrade procedure from it does
			// both (isle vip drain of this release, then, five seconds
			// later, that release's transfer-leader: a request the 0.1
			// leader passed to a pod of the server upgraded last may have
			// lost its route for a moment, and takes a few seconds).
			setStep("isle vip drain on " + leader)
			if out, err := exec.Command("ip", "netns", "exec", "isle-"+leader, newBin, "vip", "drain", "--vip", vip).CombinedOutput(); err != nil {
				t.Fatalf("isle vip drain on %s: %v\n%s", leader, err, out)
			}
			time.Sleep(5 * time.Second)
			to := ""
			for _, m := range ms {
				if m.Name == order[0] {
					to = m.RaftID
				}
			}
			setStep("isle store transfer-leader " + to + " on " + leader)
			out, err := exec.Command("ip", "netns", "exec", "isle-"+leader, oldBin, "store", "transfer-leader", to).CombinedOutput()
			if err != nil {
				t.Fatalf("isle store transfer-leader %s on %s: %v\n%s", to, leader, err, out)
			}
		}
		if b == "the leader" {
			ms, err := members()
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range ms {
				if m.Raft == "leader" {
					b, leader = m.Name, m.Name
				}
			}
		}
		setStep("isle board upgrade " + b)
		out, err := exec.Command(newBin, "board", "upgrade", b, "--dir", isl.dir).CombinedOutput()
		if err != nil {
			t.Fatalf("isle board upgrade %s: %v\n%s", b, err, out)
		}
		setStep("waiting for " + b + " upgraded")
		waitFor(t, 90*time.Second, b+" alive in gossip with the new isle, its Node Ready, three voters", func() bool {
			ms, err := members()
			if err != nil || !nodeReady(k, b) {
				return false
			}
			voters, upgraded := 0, false
			for _, m := range ms {
				if m.Raft == "leader" || m.Raft == "voter" {
					voters++
				}
				if m.Name == b {
					upgraded = m.State == "alive" && m.Version != "" && m.Version != oldVersion
				}
			}
			return voters == 3 && upgraded
		})
		t.Logf("%s upgraded; %d GETs and %d writes so far, %d failed", b, gets.Load(), writes.Load(), failed.Load())
		if i == len(order)-1 {
			ms, err := members()
			if err != nil {
				t.Fatal(err)
			}
			if raftOf(ms, leader) == "leader" {
				t.Errorf("%s leads again after its restart; the hand-off should have moved leadership", leader)
			}
		}
	}
	time.Sleep(5 * time.Second)
	cancel()
	wg.Wait()
	for _, f := range failures {
		t.Errorf("failed during the upgrade: %s", f)
	}
	if len(failures) > 0 {
		isl.logLeadership(t)
	}
	t.Logf("%d GETs of /hello and %d ConfigMap writes during the upgrade, %d failed", gets.Load(), writes.Load(), len(failures))
	out := k.ok(t, "get", "configmaps", "-o", "name")
	for _, name := range written {
		if !strings.Contains(out, "configmap/"+name+"\n") {
			t.Errorf("acknowledged ConfigMap %s lost in the upgrade", name)
		}
	}
}

// logLeadership logs, from every board's whole isle log (the releases
// before and after the upgrade), the lines that say where leadership and
// the floating address went, and the routes to the boards' pods.
func (i *testIsland) logLeadership(t *testing.T) {
	for _, b := range i.state.Boards {
		out, err := os.ReadFile(filepath.Join(i.dir, b.Name, "isle.log"))
		if err != nil {
			continue
		}
		var lines []string
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, "vip") || strings.Contains(l, "leader") || strings.Contains(l, "route to a peer") ||
				strings.Contains(l, "level=ERROR") || strings.Contains(l, "level=WARN") {
				lines = append(lines, l)
			}
		}
		t.Logf("--- %s isle.log: leadership, floating address, pod routes, warnings ---\n%s", b.Name, strings.Join(lines, "\n"))
	}
}
