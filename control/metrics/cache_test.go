package metrics_test

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/isle-cluster/isle/control/metrics"
	"github.com/isle-cluster/isle/control/wire"
)

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// pods the test server knows: name → (uid, node).
var known = map[string][2]string{
	"default/web-1":   {"uid-1", "pi1"},
	"default/web-2":   {"uid-2", "pi1"},
	"default/other":   {"uid-3", "pi2"},
	"default/nowhere": {"uid-4", ""},
}

func lookup(ns, name string) (types.UID, string, bool) {
	p, ok := known[ns+"/"+name]
	return types.UID(p[0]), p[1], ok
}

func usage(cpu, mem string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
}

func pod(name, uid, cpu string) wire.PodUsage {
	return wire.PodUsage{Namespace: "default", Name: name, UID: types.UID(uid),
		Containers: []metricsv1beta1.ContainerMetrics{{Name: "app", Usage: usage(cpu, "20Mi")}}}
}

func report(at time.Time, pods ...wire.PodUsage) *wire.Report {
	return &wire.Report{Timestamp: metav1.NewTime(at), Window: metav1.Duration{Duration: 15 * time.Second},
		Node: usage("250m", "300Mi"), Pods: pods}
}

func body(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newCache(t *testing.T, cfg metrics.Config) (*metrics.Cache, *clock, *prometheus.Registry) {
	clk := &clock{t: t0}
	reg := prometheus.NewRegistry()
	cfg.Now, cfg.Registerer = clk.now, reg
	return metrics.NewCache(cfg), clk, reg
}

func TestReceiveRefusesBadReports(t *testing.T) {
	tooManyPods := report(t0)
	for i := range wire.MaxPodsPerReport + 1 {
		tooManyPods.Pods = append(tooManyPods.Pods, pod("p"+strings.Repeat("x", i%3)+string(rune('a'+i%26)), "u", "1m"))
	}
	for _, tc := range []struct {
		name   string
		node   string
		body   []byte
		reason error
		want   string
	}{
		{"not a node", "", body(t, report(t0)), metrics.ErrForbidden, "only nodes report usage"},
		{"not JSON", "pi1", []byte("cpu=1"), metrics.ErrInvalid, "decode"},
		{"unknown field", "pi1", []byte(`{"timestamp":"2026-03-01T12:00:00Z","window":"15s","node":{"cpu":"1","memory":"1Mi"},"pods":[],"extra":1}`),
			metrics.ErrInvalid, `unknown field "extra"`},
		{"two documents", "pi1", append(body(t, report(t0)), body(t, report(t0))...), metrics.ErrInvalid, "data after the report"},
		{"bad quantity", "pi1", []byte(`{"timestamp":"2026-03-01T12:00:00Z","window":"15s","node":{"cpu":"lots","memory":"1Mi"}}`),
			metrics.ErrInvalid, "quantities must match"},
		{"no timestamp", "pi1", body(t, report(time.Time{})), metrics.ErrInvalid, "timestamp: Required value"},
		{"clock of 1970", "pi1", body(t, report(time.Unix(0, 0))), metrics.ErrInvalid, "is the board's clock set"},
		{"window too short", "pi1", body(t, func() *wire.Report { r := report(t0); r.Window.Duration = time.Millisecond; return r }()),
			metrics.ErrInvalid, "window: Invalid value: \"1ms\": must be between 1s and 10m0s"},
		{"node memory missing", "pi1", body(t, func() *wire.Report { r := report(t0); delete(r.Node, corev1.ResourceMemory); return r }()),
			metrics.ErrInvalid, "node[memory]: Required value"},
		{"negative cpu", "pi1", body(t, report(t0, pod("web-1", "uid-1", "-1m"))), metrics.ErrInvalid,
			"pods[0].containers[0].usage[cpu]: Invalid value: \"-1m\": must be greater than or equal to 0"},
		{"absurd cpu", "pi1", body(t, report(t0, pod("web-1", "uid-1", "1M"))), metrics.ErrInvalid, "must be less than or equal to 4096"},
		{"unknown resource", "pi1", body(t, func() *wire.Report {
			r := report(t0)
			r.Node["nvidia.com/gpu"] = resource.MustParse("1")
			return r
		}()), metrics.ErrInvalid, `node[nvidia.com/gpu]: Unsupported value`},
		{"bad pod name", "pi1", body(t, report(t0, pod("Web_1", "uid-1", "1m"))), metrics.ErrInvalid, "pods[0].name: Invalid value: \"Web_1\""},
		{"no uid", "pi1", body(t, report(t0, pod("web-1", "", "1m"))), metrics.ErrInvalid, "pods[0].uid: Required value"},
		{"duplicate pod", "pi1", body(t, report(t0, pod("web-1", "uid-1", "1m"), pod("web-1", "uid-1", "1m"))), metrics.ErrInvalid,
			`pods[1]: Duplicate value: "default/web-1"`},
		{"no containers", "pi1", body(t, report(t0, wire.PodUsage{Namespace: "default", Name: "web-1", UID: "uid-1"})),
			metrics.ErrInvalid, "pods[0].containers: Required value"},
		{"too many pods", "pi1", body(t, tooManyPods), metrics.ErrInvalid, "pods: Too many: 251: must have at most 250 items"},
		{"too large", "pi1", make([]byte, wire.MaxReportBytes+1), metrics.ErrTooLarge, "limit is 1048576"},
		{"absurd traffic", "pi1", body(t, func() *wire.Report {
			p := pod("web-1", "uid-1", "1m")
			p.Network = &wire.PodNetwork{RxBytes: wire.MaxNetworkBytes + 1}
			return report(t0, p)
		}()), metrics.ErrInvalid, "pods[0].network.rxBytes: Invalid value"},
		{"another node's pod", "pi1", body(t, report(t0, pod("web-1", "uid-1", "1m"), pod("other", "uid-3", "1m"))), metrics.ErrForbidden,
			`node "pi1" may not report pod default/other: it is bound to node "pi2"`},
		{"an unbound pod", "pi1", body(t, report(t0, pod("nowhere", "uid-4", "1m"))), metrics.ErrForbidden, "it is not bound to a node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, _ := newCache(t, metrics.Config{})
			err := c.Receive(tc.node, tc.body, lookup)
			if !errors.Is(err, tc.reason) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %v containing %q", err, tc.reason, tc.want)
			}
			if _, ok := c.NodeMetrics("pi1"); ok {
				t.Fatal("a refused report was kept")
			}
			if _, ok := c.PodMetrics("default", "web-1", "uid-1"); ok {
				t.Fatal("a pod of a refused report was kept")
			}
		})
	}
}

func TestReceiveKeepsLatestSamples(t *testing.T) {
	c, clk, reg := newCache(t, metrics.Config{})
	// A pod the server does not know yet, and one replaced by another of
	// its name, are skipped; the rest of the report is kept.
	r := report(t0, pod("web-1", "uid-1", "100m"), pod("web-2", "old-uid", "5m"), pod("web-3", "uid-9", "5m"))
	if err := c.Receive("pi1", body(t, r), lookup); err != nil {
		t.Fatal(err)
	}
	n, ok := c.NodeMetrics("pi1")
	if !ok || n.Name != "pi1" || n.Usage.Cpu().String() != "250m" || n.Usage.Memory().String() != "300Mi" ||
		!n.Timestamp.Equal(&metav1.Time{Time: t0}) || n.Window.Duration != 15*time.Second {
		t.Fatalf("node metrics %+v %v", n, ok)
	}
	p, ok := c.PodMetrics("default", "web-1", "uid-1")
	if !ok || p.Namespace != "default" || len(p.Containers) != 1 || p.Containers[0].Usage.Cpu().String() != "100m" {
		t.Fatalf("pod metrics %+v %v", p, ok)
	}
	if _, ok := c.PodMetrics("default", "web-1", "another-uid"); ok {
		t.Error("a sample served for a pod of another UID")
	}
	for _, name := range []string{"web-2", "web-3"} {
		if _, ok := c.PodMetrics("default", name, "old-uid"); ok {
			t.Errorf("stale pod %s kept", name)
		}
	}
	if got := value(t, reg, "isle_metrics_samples_dropped_total", "stale_pod"); got != 2 {
		t.Errorf("stale pods dropped: %v, want 2", got)
	}

	// Callers get copies.
	p.Containers[0].Usage[corev1.ResourceCPU] = resource.MustParse("9")
	if again, _ := c.PodMetrics("default", "web-1", "uid-1"); again.Containers[0].Usage.Cpu().String() != "100m" {
		t.Fatal("a caller changed the cache")
	}

	// A later report replaces the samples; a pod it leaves out keeps its
	// last sample until it expires.
	clk.advance(15 * time.Second)
	if err := c.Receive("pi1", body(t, report(clk.now(), pod("web-2", "uid-2", "40m"))), lookup); err != nil {
		t.Fatal(err)
	}
	if p, _ := c.PodMetrics("default", "web-2", "uid-2"); p.Containers[0].Usage.Cpu().String() != "40m" {
		t.Errorf("web-2 %+v", p)
	}
	clk.advance(2*time.Minute - 10*time.Second)
	if _, ok := c.PodMetrics("default", "web-1", "uid-1"); ok {
		t.Error("web-1, not reported for 2m05s, is still served")
	}
	if _, ok := c.PodMetrics("default", "web-2", "uid-2"); !ok {
		t.Error("web-2, reported 1m50s ago, is not served")
	}
	if _, ok := c.NodeMetrics("pi1"); !ok {
		t.Error("pi1, reported 1m50s ago, is not served")
	}
	clk.advance(10 * time.Second)
	if _, ok := c.NodeMetrics("pi1"); ok {
		t.Error("pi1, not reported for 2m, is still served")
	}
	// Expired samples are swept out of memory by the next report.
	if err := c.Receive("pi2", body(t, report(clk.now())), lookup); err != nil {
		t.Fatal(err)
	}
	if got := value(t, reg, "isle_metrics_pods", ""); got != 0 {
		t.Errorf("%v pods held after expiry, want 0", got)
	}
	if got := value(t, reg, "isle_metrics_nodes", ""); got != 1 {
		t.Errorf("%v nodes held after expiry, want 1 (pi2)", got)
	}
	if got := value(t, reg, "isle_metrics_reports_total", "accepted"); got != 3 {
		t.Errorf("%v reports accepted, want 3", got)
	}
}

func TestReceiveBounds(t *testing.T) {
	c, _, reg := newCache(t, metrics.Config{MaxNodes: 1, MaxPods: 1})
	if err := c.Receive("pi1", body(t, report(t0, pod("web-1", "uid-1", "1m"), pod("web-2", "uid-2", "1m"))), lookup); err != nil {
		t.Fatal(err)
	}
	if err := c.Receive("pi2", body(t, report(t0)), lookup); err != nil {
		t.Fatal(err)
	}
	_, ok1 := c.PodMetrics("default", "web-1", "uid-1")
	_, ok2 := c.PodMetrics("default", "web-2", "uid-2")
	_, okPi2 := c.NodeMetrics("pi2")
	if !ok1 || ok2 || okPi2 {
		t.Fatalf("kept web-1 %v web-2 %v pi2 %v, want only the first of each", ok1, ok2, okPi2)
	}
	if got := value(t, reg, "isle_metrics_samples_dropped_total", "full"); got != 2 {
		t.Errorf("dropped for want of room: %v, want 2", got)
	}
	// Known entries are still updated when full.
	if err := c.Receive("pi1", body(t, report(t0, pod("web-1", "uid-1", "7m"))), lookup); err != nil {
		t.Fatal(err)
	}
	if p, _ := c.PodMetrics("default", "web-1", "uid-1"); p.Containers[0].Usage.Cpu().String() != "7m" {
		t.Errorf("web-1 not updated: %+v", p)
	}
}

// value reads one series of the registry: the one with this label value,
// or the unlabelled one for "". Missing series read 0.
func value(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label == "" || (len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == label) {
				return m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

// TestTraffic keeps what the pods received, as bytes a second over the
// report's window, for the namespaces asked, until the sample expires.
func TestTraffic(t *testing.T) {
	c, clk, _ := newCache(t, metrics.Config{})
	busy, idle, unmeasured := pod("web-1", "uid-1", "1m"), pod("web-2", "uid-2", "1m"), pod("other", "uid-3", "1m")
	busy.Network = &wire.PodNetwork{RxBytes: 15_000, TxBytes: 30_000}
	idle.Network = &wire.PodNetwork{TxBytes: 10}
	if err := c.Receive("pi1", body(t, report(t0, busy, idle)), lookup); err != nil {
		t.Fatal(err)
	}
	if err := c.Receive("pi2", body(t, report(t0, unmeasured)), lookup); err != nil {
		t.Fatal(err)
	}
	if got := c.Traffic(nil); len(got) != 1 || got["default/web-1"] != 1000 {
		t.Errorf("traffic %v, want default/web-1 at 1000 B/s alone", got)
	}
	if got := c.Traffic(func(ns string) bool { return ns == "class-a" }); len(got) != 0 {
		t.Errorf("traffic of class-a: %v", got)
	}
	clk.advance(3 * time.Minute)
	if got := c.Traffic(nil); len(got) != 0 {
		t.Errorf("expired traffic served: %v", got)
	}
}
