package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumBin finds Debian's chromium; without it the test fails in CI
// and skips on a developer's machine.
func chromiumBin(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is required (apt-get install chromium)")
	}
	t.Skip("no chromium on this machine")
	return ""
}

// startProxy runs kubectl proxy on a free loopback port until the test
// ends and returns its URL.
func (k *kubectlRunner) startProxy(t *testing.T) string {
	t.Helper()
	// "Starting to serve on 127.0.0.1:PORT"
	line := startFirstLine(t, k.cmd("", "proxy", "--port=0"))
	addr := strings.TrimSpace(strings.TrimPrefix(line, "Starting to serve on "))
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("kubectl proxy: %q", line)
	}
	return "http://" + addr
}

// startFirstLine starts cmd, which runs until the test ends, and returns
// the first line it prints (the rest is read and dropped).
func startFirstLine(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() {
		t.Fatalf("%s: no first line", cmd.Path)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return sc.Text()
}

// browser is a headless Chromium for the test's pages.
type browser struct {
	ctx  context.Context
	shot string // directory of the screenshots
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	bin := chromiumBin(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.WindowSize(1920, 1080))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	dir := os.Getenv("ISLE_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "out", "artifacts")
	}
	dir = filepath.Join(dir, t.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &browser{ctx: actx, shot: dir}
}

// mapPage is the island's map open in a tab, with what its console said.
type mapPage struct {
	t    *testing.T
	b    *browser
	ctx  context.Context
	name string
	mu   sync.Mutex
	msgs []chromedp.ConsoleMessage
}

// open opens url in a new tab, logging its console.
func (b *browser) open(t *testing.T, name, url string) *mapPage {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	t.Cleanup(cancel)
	p := &mapPage{t: t, b: b, ctx: ctx, name: name}
	msgs := chromedp.Console(ctx)
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			p.mu.Lock()
			p.msgs = append(p.msgs, m)
			p.mu.Unlock()
		}
	}()
	return p
}

// eval evaluates a JavaScript expression in the page into out.
func (p *mapPage) eval(expr string, out any) error {
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[json.RawMessage](expr))
	if err != nil {
		return err
	}
	return json.Unmarshal(v, out)
}

// keys are the data-key attributes of the page's elements matching sel.
func (p *mapPage) keys(sel string) []string {
	var out []string
	if err := p.eval(fmt.Sprintf(`[...document.querySelectorAll(%q)].map(e => e.dataset.key || e.dataset.node)`, sel), &out); err != nil {
		p.t.Fatalf("%s: %v", p.name, err)
	}
	sort.Strings(out)
	return out
}

// text is the text of the element with the id.
func (p *mapPage) text(id string) string {
	var s string
	if err := p.eval(fmt.Sprintf(`document.getElementById(%q)?.textContent ?? ""`, id), &s); err != nil {
		p.t.Fatalf("%s: %v", p.name, err)
	}
	return s
}

// screenshot writes the page as NAME.png into the test's artifacts.
func (p *mapPage) screenshot(name string) {
	buf, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatalf("%s: screenshot: %v", p.name, err)
	}
	if err := os.WriteFile(filepath.Join(p.b.shot, p.name+"-"+name+".png"), buf, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// errors are the JavaScript errors the page had: uncaught exceptions and
// console.error calls, and, with network, also the browser's log of
// failed requests (the page asks for nothing its user may not read).
func (p *mapPage) errors(network bool) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, m := range p.msgs {
		if m.IsException() || m.Type == chromedp.ConsoleError && (network || m.Source == "") {
			out = append(out, fmt.Sprintf("%s %s:%d %s", m.Source, m.URL, m.Line+1, m.Text))
		}
	}
	return out
}

// names lists the objects of a kind with kubectl, as the page keys them
// (NAMESPACE/NAME, or NAME for a cluster-wide kind).
func names(t *testing.T, k *kubectlRunner, kind string, namespaced bool) []string {
	t.Helper()
	tmpl := `{range .items[*]}{.metadata.name}{"\n"}{end}`
	args := []string{"get", kind, "-o", "jsonpath=" + tmpl}
	if namespaced {
		tmpl = `{range .items[*]}{.metadata.namespace}/{.metadata.name}{"\n"}{end}`
		args = []string{"get", kind, "-A", "-o", "jsonpath=" + tmpl}
	}
	out := strings.Fields(k.ok(t, args...))
	sort.Strings(out)
	return out
}

// TestMap opens the island's map (/isle/map/) in headless Chromium
// through kubectl proxy, as a teacher would, and checks it against the
// API: every board, pod, Service, Ingress, claim and volume is drawn; the
// hello app applied plays the blue flow and its bubbles appear within 2 s
// of the API showing them; a student with a namespace's role sees that
// namespace only; a board killed goes dark within 7 s; a server down shows
// in the store's quorum; every server down, the map says so and keeps the
// boards. No JavaScript error on the way; a screenshot at each step.
func TestMap(t *testing.T) {
	b := newBrowser(t)
	isl := startIsland(t, 3, 1)
	k := isl.kubectl
	proxy := k.startProxy(t)
	page := b.open(t, "admin", proxy+"/isle/map/")

	sameKeys := func(p *mapPage, what, sel string, want func() []string) {
		t.Helper()
		var got, w []string
		deadline := time.Now().Add(20 * time.Second)
		for {
			got, w = p.keys(sel), want()
			if slices.Equal(got, w) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the map shows %s %v, the API %v", p.name, what, got, w)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	sameKeys(page, "boards", ".board", func() []string { return names(t, k, "nodes", false) })
	mustMatchSoon(t, 20*time.Second, "the memory tree", func() string { return page.text("tree-facts") }, `leader: pi\d`, `quorum: 3/3`)
	page.screenshot("1-boards")

	t.Run("the hello app applied: the blue flow and its bubbles", func(t *testing.T) {
		manifest, err := os.ReadFile("../deploy/examples/hello.yaml")
		if err != nil {
			t.Fatal(err)
		}
		// When each pod first shows in the API (a list through the same
		// proxy) and in the page, polled together.
		apiSeen, pageSeen := map[string]time.Time{}, map[string]time.Time{}
		isl.apply(t, string(manifest))
		deadline := time.Now().Add(120 * time.Second)
		for readyPods(k, "app=hello") < 3 || len(pageSeen) < len(apiSeen) {
			if time.Now().After(deadline) {
				t.Fatalf("hello not Ready on the map in 120 s: API %v, page %v", apiSeen, pageSeen)
			}
			for range 10 {
				now := time.Now()
				for _, p := range apiPods(t, proxy) {
					if _, ok := apiSeen[p]; !ok {
						apiSeen[p] = now
					}
				}
				now = time.Now()
				for _, p := range page.keys(".pod") {
					if _, ok := pageSeen[p]; !ok {
						pageSeen[p] = now
					}
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		for p, at := range apiSeen {
			seen, ok := pageSeen[p]
			switch {
			case !ok:
				t.Errorf("pod %s: in the API, never on the map", p)
			case seen.Sub(at) > 2*time.Second:
				t.Errorf("pod %s: on the map %v after the API showed it (at most 2 s)", p, seen.Sub(at))
			default:
				t.Logf("pod %s: on the map %v after the API", p, seen.Sub(at).Round(time.Millisecond))
			}
		}
		var log []string
		if err := page.eval(`window.isleMap.flows.log`, &log); err != nil {
			t.Fatal(err)
		}
		// The whole path: kubectl's write stored, the controllers'
		// ReplicaSet and pods, the scheduler's placements, a board's
		// squirrel starting a bubble's birds in the runtime.
		for _, want := range []string{
			`^whistle>counter:pi\d>tree>counter:pi\d>captain$`,
			`^captain>counter:pi\d>tree>counter:pi\d>picker$`,
			`^picker>counter:pi\d>tree>counter:pi\d>squirrel:pi\d$`,
			`^squirrel:(pi\d)>runtime:(pi\d)>pod:default/hello-`,
			`^squirrel:pi\d>counter:pi\d>tree$`,
		} {
			if !slices.ContainsFunc(log, func(s string) bool { return regexp.MustCompile(want).MatchString(s) }) {
				t.Errorf("no flow %s among the %d played:\n%s", want, len(log), strings.Join(log, "\n"))
			}
		}
		sameKeys(page, "pods", ".pod", func() []string { return names(t, k, "pods", true) })
		sameKeys(page, "Services", `.item[data-kind="services"]`, func() []string { return names(t, k, "services", true) })
		sameKeys(page, "Ingresses", `.item[data-kind="ingresses"]`, func() []string { return names(t, k, "ingresses", true) })
		waitFor(t, 60*time.Second, "the claim Bound", func() bool {
			return k.ok(t, "get", "pvc", "hello-data", "-o", "jsonpath={.status.phase}") == "Bound"
		})
		sameKeys(page, "claims", `.item[data-kind="pvcs"]`, func() []string { return names(t, k, "pvc", true) })
		sameKeys(page, "volumes", `.item[data-kind="pvs"]`, func() []string { return names(t, k, "pv", false) })
		// The orange road from the gate to the Service's ready pods, the
		// green reads and writes of the counter's claim once its pod runs
		// (its claim is bound for it first, so it starts after the others;
		// the page draws what it has seen within linesEvery).
		waitFor(t, 60*time.Second, "the counter's pod Running", func() bool {
			return k.ok(t, "get", "pods", "-l", "app=hello-counter", "-o", "jsonpath={.items[*].status.phase}") == "Running"
		})
		var lines map[string]int
		deadline = time.Now().Add(5 * time.Second)
		for {
			if err := page.eval(`[...document.querySelectorAll("#flows path.flow")].reduce((m, p) => (m[p.classList[1]] = (m[p.classList[1]] || 0) + 1, m), {})`, &lines); err != nil {
				t.Fatal(err)
			}
			if lines["orange"] >= 2+3 && lines["green"] >= 1 && lines["grey"] >= 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("lasting lines 5 s after the counter's pod ran: %v, want ≥ 5 orange (gate, Ingress, 3 pods), a green and a grey", lines)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		// Packets: requests through the Ingress make the roads to the
		// pods that answer them move, once the boards' usage reports
		// (every 15 s) tell the servers what the pods received.
		if n := len(page.keys("#flows path.flow.orange.live")); n != 0 {
			t.Errorf("%d roads moving before any request", n)
		}
		stop := make(chan struct{})
		done := make(chan int)
		go func() {
			n := 0
			for {
				select {
				case <-stop:
					done <- n
					return
				default:
				}
				if res, err := http.Get("http://" + isl.state.Boards[0].Addr.String() + "/hello"); err == nil {
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					n++
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		start := time.Now()
		waitFor(t, 60*time.Second, "a road to a pod moving", func() bool { return len(page.keys("#flows path.flow.orange.live")) > 0 })
		close(stop)
		t.Logf("the roads moved %v after the requests began (%d requests)", time.Since(start).Round(time.Second), <-done)
		page.screenshot("2-hello")
		if errs := page.errors(true); len(errs) > 0 {
			t.Errorf("the page's console:\n%s", strings.Join(errs, "\n"))
		}
	})

	t.Run("a student with a namespace's role sees that namespace", func(t *testing.T) {
		k.ok(t, "create", "namespace", "class-a")
		kc := filepath.Join(t.TempDir(), "student.kubeconfig")
		if out, err := exec.Command(isl.bin, "user", "add", "student", "--namespace", "class-a", "--role", "edit",
			"--socket", isl.adminSocket("pi1"), "-o", kc).CombinedOutput(); err != nil {
			t.Fatalf("isle user add: %v\n%s", err, out)
		}
		isl.apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: lesson, namespace: class-a}
spec:
  containers: [{name: c, image: %s, command: [sleep, "3600"]}]
`, isl.busybox))
		// The student opens it with isle map, not kubectl proxy.
		sp := b.open(t, "student", startIsleMap(t, isl.bin, kc))
		sameKeys(sp, "pods", ".pod", func() []string { return []string{"class-a/lesson"} })
		var node string
		waitFor(t, 30*time.Second, "the lesson placed", func() bool {
			node = strings.TrimSpace(k.ok(t, "get", "pod", "lesson", "-n", "class-a", "-o", "jsonpath={.spec.nodeName}"))
			return node != ""
		})
		sameKeys(sp, "boards", ".board.noaccess", func() []string { return []string{node} })
		if got := sp.keys(`.item[data-kind="services"], .item[data-kind="pvs"], .item[data-kind="pvcs"]`); len(got) != 0 {
			t.Errorf("the student's map shows %v", got)
		}
		if who := sp.text("who"); !strings.Contains(who, "student") || !strings.Contains(who, "class-a") {
			t.Errorf("the student's map says %q", who)
		}
		sp.screenshot("3-student")
		if errs := sp.errors(true); len(errs) > 0 {
			t.Errorf("the student's console:\n%s", strings.Join(errs, "\n"))
		}
	})

	t.Run("a board killed goes dark", func(t *testing.T) {
		start := time.Now()
		isl.board(t, "kill", "pi4")
		waitFor(t, 7*time.Second, "pi4 dark on the map", func() bool { return len(page.keys(`.board.dark[data-node="pi4"]`)) == 1 })
		t.Logf("pi4 dark on the map %v after it was killed", time.Since(start).Round(time.Millisecond))
		page.screenshot("4-board-dark")
		isl.board(t, "start", "pi4")
		waitFor(t, 60*time.Second, "pi4 lit again", func() bool { return len(page.keys(`.board.dark`)) == 0 })
	})

	t.Run("servers down: the quorum, then the lighthouse dark", func(t *testing.T) {
		isl.board(t, "kill", "pi3")
		waitFor(t, 20*time.Second, "pi3's counter down and the quorum 2/3", func() bool {
			return len(page.keys(`.counter.down[data-server="pi3"]`)) == 1 && strings.Contains(page.text("tree-facts"), "quorum: 2/3")
		})
		page.screenshot("5-server-down")
		isl.board(t, "kill", "pi1")
		isl.board(t, "kill", "pi2")
		waitFor(t, 20*time.Second, "the banner: no API server answers", func() bool {
			return strings.Contains(page.text("banner"), "The lighthouse is dark")
		})
		if got := page.keys(".board"); len(got) != 4 {
			t.Errorf("with every server down the map shows boards %v, want the 4 it knew", got)
		}
		page.screenshot("6-lighthouse-dark")
		for _, s := range []string{"pi1", "pi2", "pi3"} {
			isl.board(t, "start", s)
		}
		waitFor(t, 90*time.Second, "the map back: no banner, quorum 3/3", func() bool {
			var hidden bool
			return page.eval(`document.getElementById("banner").hidden`, &hidden) == nil && hidden &&
				strings.Contains(page.text("tree-facts"), "quorum: 3/3")
		})
		page.screenshot("7-back")
	})
	if errs := page.errors(false); len(errs) > 0 {
		t.Errorf("JavaScript errors:\n%s", strings.Join(errs, "\n"))
	}
}

// startIsleMap runs `isle map` with the kubeconfig until the test ends
// and returns the address it prints.
func startIsleMap(t *testing.T, bin, kubeconfig string) string {
	t.Helper()
	// "The island's map: http://127.0.0.1:PORT/isle/map/ (of …)"
	line := startFirstLine(t, exec.Command(bin, "map", "--kubeconfig", kubeconfig, "--address", "127.0.0.1:0"))
	url, _, _ := strings.Cut(strings.TrimPrefix(line, "The island's map: "), " ")
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/isle/map/") {
		t.Fatalf("isle map: %q", line)
	}
	return url
}

// apiPods lists the pods' NAMESPACE/NAME through the proxy.
func apiPods(t *testing.T, proxy string) []string {
	t.Helper()
	res, err := http.Get(proxy + "/api/v1/pods")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var list struct {
		Items []struct {
			Metadata struct{ Namespace, Name string }
		}
	}
	if err := json.NewDecoder(res.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range list.Items {
		out = append(out, p.Metadata.Namespace+"/"+p.Metadata.Name)
	}
	return out
}
