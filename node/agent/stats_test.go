package agent

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/hw"
)

// fakePods is a runtime with one pod.
type fakePods struct{}

func (fakePods) PodUsage(context.Context) ([]wire.PodUsage, error) {
	return []wire.PodUsage{{Namespace: "default", Name: "web-1", UID: "u1",
		Containers: []metricsv1beta1.ContainerMetrics{{Name: "app", Usage: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("120m"), corev1.ResourceMemory: resource.MustParse("30Mi")}}}}}, nil
}

// reportSink is a server that keeps the reports it gets.
type reportSink struct {
	mu      sync.Mutex
	reports []wire.Report
	auth    []string
	refuse  bool
}

func (s *reportSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != wire.ReportPath || r.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "bad request line", http.StatusNotFound)
		return
	}
	b, _ := io.ReadAll(r.Body)
	var rep wire.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refuse {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"invalid usage report: timestamp: is 1h off","code":400}`)
		return
	}
	s.reports = append(s.reports, rep)
	s.auth = append(s.auth, r.Header.Get("Authorization"))
	w.WriteHeader(http.StatusNoContent)
}

func (s *reportSink) got() ([]wire.Report, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]wire.Report(nil), s.reports...), append([]string(nil), s.auth...)
}

// lockedBuffer is a log destination tests read while the pusher writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestStatsPusherReportsToEveryServer(t *testing.T) {
	sinks := []*reportSink{{}, {}, {refuse: true}}
	var addrs []string
	var client *http.Client
	for _, s := range sinks {
		srv := httptest.NewTLSServer(s)
		t.Cleanup(srv.Close)
		addrs = append(addrs, srv.Listener.Addr().String())
		client = srv.Client() // every httptest server has the same certificate
	}
	// Each reading, one CPU of two busy: 150 ticks busy of 300.
	var mu sync.Mutex
	cpu := hw.CPUTimes{Busy: 1000, Total: 5000, CPUs: 2}
	logs := &lockedBuffer{}
	// The clock moves 15 s a reading, as the real interval.
	clock := time.Now()
	p := &statsPusher{node: "pi1", token: "id.secret", servers: func() []string { return addrs }, client: client, pods: fakePods{},
		log: slog.New(slog.NewTextHandler(logs, nil)), lastErr: map[string]string{},
		now: func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			clock = clock.Add(15 * time.Second)
			return clock
		},
		readCPU: func() (hw.CPUTimes, error) {
			mu.Lock()
			defer mu.Unlock()
			cpu.Busy, cpu.Total = cpu.Busy+150, cpu.Total+300
			return cpu, nil
		},
		readMemory: func() (int64, error) { return 300 << 20, nil },
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.run(ctx, 20*time.Millisecond)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		a, _ := sinks[0].got()
		b, _ := sinks[1].got()
		if len(a) >= 3 && len(b) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reports: %d and %d, want 3 each", len(a), len(b))
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done

	for i, s := range sinks[:2] {
		reports, auth := s.got()
		for j, r := range reports {
			// What the agent sends passes the server's checks.
			if errs := r.Validate(r.Timestamp.Time); len(errs) > 0 {
				t.Errorf("server %d report %d invalid: %v", i, j, errs)
			}
			if auth[j] != "Bearer id.secret" {
				t.Errorf("server %d report %d: Authorization %q", i, j, auth[j])
			}
			if got := r.Node.Cpu().MilliValue(); got != 1000 {
				t.Errorf("server %d report %d: node cpu %dm, want 1000m", i, j, got)
			}
			if got := r.Node.Memory().Value(); got != 300<<20 {
				t.Errorf("server %d report %d: node memory %d", i, j, got)
			}
			if r.Window.Duration != 15*time.Second || len(r.Pods) != 1 || r.Pods[0].Containers[0].Usage.Cpu().String() != "120m" {
				t.Errorf("server %d report %d: %+v", i, j, r)
			}
		}
	}
	// The refusing server is logged once, with its reason, not every time.
	if n := strings.Count(logs.String(), "did not take the usage report"); n != 1 || !strings.Contains(logs.String(), "is 1h off") {
		t.Errorf("%d refusal logs, want 1 with the reason:\n%s", n, logs.String())
	}
}

func TestNoPodStats(t *testing.T) {
	pods, err := NoPodStats{}.PodUsage(t.Context())
	if err != nil || len(pods) != 0 {
		t.Fatalf("%v %v", pods, err)
	}
}
