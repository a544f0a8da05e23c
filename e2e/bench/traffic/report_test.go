package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// round is a round of 1 s with ok requests and the given latencies (µs).
func round(ok int, p50, p99 time.Duration) trial {
	return trial{ok: ok, took: time.Second, p50: p50 * time.Microsecond, p99: p99 * time.Microsecond}
}

// withCPU gives every round the proxy CPU time cpu.
func withCPU(ts []trial, cpu time.Duration) []trial {
	for i := range ts {
		ts[i].cpu = cpu
	}
	return ts
}

func exampleResults() results {
	return results{
		conns: 16, dnsClients: 8,
		paths: []pathResult{
			{name: "direct", trials: []trial{round(10000, 900, 3000), round(9000, 1000, 4000), round(11000, 800, 9000)}},
			// The rounds' ratios are 0.94, 1.07 and 0.86: missed, though the
			// medians' ratio is 0.95.
			{name: "ClusterIP", trials: []trial{round(9400, 1000, 3100), round(9600, 950, 3200), round(9500, 1100, 3300)}},
			// 0.50, 0.67 and 0.54: missed.
			{name: "Ingress", trials: withCPU([]trial{round(5000, 2000, 7000), round(6000, 1500, 6000), round(5900, 1700, 6500)}, 500*time.Millisecond)},
			// Against ClusterIP's rounds: 0.99, 0.99 and 0.99: holds.
			{name: policyPathName, trials: []trial{round(9300, 1000, 3100), round(9500, 950, 3200), round(9400, 1100, 3300)}},
		},
		dns: []trial{round(20000, 300, 1200), round(22000, 280, 1000), round(21000, 310, 1500)},
		rules: ruleTimes{
			change:     []time.Duration{2 * time.Millisecond, time.Millisecond, 3 * time.Millisecond, 1500 * time.Microsecond},
			changeCPU:  []time.Duration{300 * time.Microsecond, 200 * time.Microsecond, 400 * time.Microsecond, 100 * time.Microsecond},
			rewrite:    []time.Duration{9 * time.Millisecond, 7 * time.Millisecond, 8 * time.Millisecond},
			rewriteCPU: []time.Duration{5 * time.Millisecond, 4 * time.Millisecond, 6 * time.Millisecond},
			policy:     []time.Duration{3 * time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond},
			policyCPU:  []time.Duration{time.Millisecond, time.Millisecond, 2 * time.Millisecond},
		},
	}
}

func TestReport(t *testing.T) {
	var b strings.Builder
	report(exampleResults()).Write(&b)
	want := `| measure                                                             | isle         | target  |        |
|---------------------------------------------------------------------|--------------|---------|--------|
| HTTP req/s, direct (pod IP), 16 conns, median                       | 10,000       |         |        |
| HTTP req/s, ClusterIP, 16 conns, median                             | 9,500        |         |        |
|   ClusterIP / direct, median of the rounds                          | 0.94x        | ≥ 0.95x | MISSED |
| HTTP req/s, Ingress (pi2's controller), 16 conns, median            | 5,900        |         |        |
|   Ingress / direct, median of the rounds                            | 0.54x        | ≥ 0.6x  | MISSED |
|   pi2's isle CPU per request, median                                | 85µs         |         |        |
| HTTP req/s, ClusterIP, 50 NetworkPolicies, 16 conns, median         | 9,400        |         |        |
|   with / without the 50 policies, median of the rounds              | 0.99x        | ≥ 0.95x | holds  |
| HTTP latency p50, direct (pod IP), median                           | 900µs        |         |        |
| HTTP latency p50, ClusterIP, median                                 | 1ms          |         |        |
| HTTP latency p50, Ingress (pi2's controller), median                | 1.7ms        |         |        |
| HTTP latency p50, ClusterIP, 50 NetworkPolicies, median             | 1ms          |         |        |
| HTTP latency p99, direct (pod IP), median                           | 4ms          |         |        |
| HTTP latency p99, ClusterIP, median                                 | 3.2ms        |         |        |
| HTTP latency p99, Ingress (pi2's controller), median                | 6.5ms        |         |        |
| HTTP latency p99, ClusterIP, 50 NetworkPolicies, median             | 3.2ms        |         |        |
| HTTP errors (not 200 and the hello body)                            | 0 of 103,600 | none    | holds  |
| DNS A queries/s, 8 clients, median                                  | 21,000       |         |        |
| DNS latency p50, median                                             | 300µs        |         |        |
| DNS latency p99, median                                             | 1.2ms        |         |        |
| DNS errors (not the Service's address)                              | 0 of 63,000  | none    | holds  |
| Service rules Sync, one of 100 endpoints replaced, p50              | 1.5ms        |         |        |
| Service rules Sync, one of 100 endpoints replaced, p99              | 3ms          |         |        |
|   CPU per Sync, p50                                                 | 200µs        |         |        |
| Service rules Sync, whole table (a new Proxy's first), p50          | 8ms          |         |        |
| Service rules Sync, whole table (a new Proxy's first), p99          | 9ms          |         |        |
|   CPU per Sync, p50                                                 | 5ms          |         |        |
| NetworkPolicy rules update, namespace of 100 pods, 50 policies, p50 | 3ms          |         |        |
| NetworkPolicy rules update, namespace of 100 pods, 50 policies, p99 | 4ms          |         |        |
|   CPU per update, p50                                               | 1ms          |         |        |
`
	if b.String() != want {
		t.Errorf("report:\n%s\nwant:\n%s", b.String(), want)
	}
	if err := exampleResults().failures(); err != nil {
		t.Errorf("failures of a run without errors: %v", err)
	}
}

func TestReportTargets(t *testing.T) {
	for _, c := range []struct {
		name                 string
		clusterIP, ingress   int
		wantCluster, wantIng string
	}{
		{"both hold", 9600, 6000, "holds", "holds"},
		{"ClusterIP just short", 9499, 7000, "MISSED", "holds"},
		{"Ingress short", 10000, 5999, "holds", "MISSED"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := exampleResults()
			r.paths[0].trials = []trial{round(10000, 1, 1)}
			r.paths[1].trials = []trial{round(c.clusterIP, 1, 1)}
			r.paths[2].trials = []trial{round(c.ingress, 1, 1)}
			var b strings.Builder
			report(r).Write(&b)
			verdict := func(row string) string {
				for _, l := range strings.Split(b.String(), "\n") {
					if strings.HasPrefix(l, "| "+row) {
						cells := strings.Split(l, "|")
						return strings.TrimSpace(cells[4])
					}
				}
				t.Fatalf("no row %q in\n%s", row, b.String())
				return ""
			}
			if got := verdict("  ClusterIP / direct"); got != c.wantCluster {
				t.Errorf("ClusterIP verdict %s, want %s", got, c.wantCluster)
			}
			if got := verdict("  Ingress / direct"); got != c.wantIng {
				t.Errorf("Ingress verdict %s, want %s", got, c.wantIng)
			}
		})
	}
}

func TestReportErrors(t *testing.T) {
	r := exampleResults()
	wrong := errors.New("ClusterIP: GET http://10.43.0.20/hello: wrong answer")
	r.paths[1].trials[1].errors, r.paths[1].trials[1].firstErr = 3, wrong
	r.paths[1].trials[2].errors = 2
	r.dns[0].errors, r.dns[0].firstErr = 1, errors.New("dns: timeout")
	var b strings.Builder
	report(r).Write(&b)
	for _, row := range []string{
		"| HTTP errors (not 200 and the hello body)                            | 5 of 103,605 | none    | MISSED |",
		"| DNS errors (not the Service's address)                              | 1 of 63,001  | none    | MISSED |",
	} {
		if !strings.Contains(b.String(), row) {
			t.Errorf("no row %q in\n%s", row, b.String())
		}
	}
	err := r.failures()
	if !errors.Is(err, wrong) {
		t.Fatalf("failures: %v, want it to wrap the ClusterIP path's first error", err)
	}
	for _, s := range []string{"HTTP over the ClusterIP path: 5 requests failed", "DNS: 1 requests failed, the first: dns: timeout"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("failures: %v, want %q", err, s)
		}
	}
	if strings.Contains(err.Error(), "direct") || strings.Contains(err.Error(), "Ingress") {
		t.Errorf("failures names paths without errors: %v", err)
	}
}
