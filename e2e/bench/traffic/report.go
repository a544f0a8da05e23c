package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
	"github.com/isle-cluster/isle/e2e/bench/islandbench"
)

// results are what the bench measured.
type results struct {
	conns, dnsClients int
	paths             []pathResult // the baseline (direct) first
	dns               []trial
	rules             ruleTimes
}

// targets are the least requests/s of a path, as a fraction of the
// baseline's.
var targets = map[string]float64{"ClusterIP": 0.95, "Ingress": 0.6}

// report makes the table: per path the medians over the rounds, and the
// paths' requests/s against the baseline's.
func report(r results) benchkit.Table {
	var t benchkit.Table
	base := r.paths[0]
	for _, p := range r.paths {
		t.Row(fmt.Sprintf("HTTP req/s, %s, %d conns, median", label(p.name), r.conns), benchkit.Group(medianOf(p.trials, trial.rate)), "", true)
		if p.name == policyPathName {
			ratio := islandbench.Median(roundRatios(p, r.path("ClusterIP")))
			t.Row(fmt.Sprintf("  with / without the %d policies, median of the rounds", benchPolicies), fmt.Sprintf("%.2fx", ratio),
				"≥ 0.95x", ratio >= 0.95)
		}
		if target, ok := targets[p.name]; ok {
			ratio := islandbench.Median(roundRatios(p, base))
			t.Row(fmt.Sprintf("  %s / %s, median of the rounds", p.name, base.name), fmt.Sprintf("%.2fx", ratio),
				fmt.Sprintf("≥ %.2gx", target), ratio >= target)
		}
		if p.trials[0].cpu > 0 {
			t.Row(fmt.Sprintf("  %s's isle CPU per request, median", clientBoard), latency(medianOf(p.trials, trial.cpuPerRequest)), "", true)
		}
	}
	for _, q := range []struct {
		name string
		of   func(trial) float64
	}{{"p50", p50}, {"p99", p99}} {
		for _, p := range r.paths {
			t.Row(fmt.Sprintf("HTTP latency %s, %s, median", q.name, label(p.name)), latency(medianOf(p.trials, q.of)), "", true)
		}
	}
	var all []trial
	for _, p := range r.paths {
		all = append(all, p.trials...)
	}
	errorsRow(&t, "HTTP errors (not 200 and the hello body)", all)

	t.Row(fmt.Sprintf("DNS A queries/s, %d clients, median", r.dnsClients), benchkit.Group(medianOf(r.dns, trial.rate)), "", true)
	t.Row("DNS latency p50, median", latency(medianOf(r.dns, p50)), "", true)
	t.Row("DNS latency p99, median", latency(medianOf(r.dns, p99)), "", true)
	errorsRow(&t, "DNS errors (not the Service's address)", r.dns)

	for _, s := range []struct {
		name       string
		times, cpu []time.Duration
	}{
		{fmt.Sprintf("one of %d endpoints replaced", ruleEndpoints), r.rules.change, r.rules.changeCPU},
		{"whole table (a new Proxy's first)", r.rules.rewrite, r.rules.rewriteCPU},
	} {
		t.Row("Service rules Sync, "+s.name+", p50", latency(benchkit.Quantile(s.times, 0.5)), "", true)
		t.Row("Service rules Sync, "+s.name+", p99", latency(benchkit.Quantile(s.times, 0.99)), "", true)
		t.Row("  CPU per Sync, p50", latency(benchkit.Quantile(s.cpu, 0.5)), "", true)
	}
	what := fmt.Sprintf("NetworkPolicy rules update, namespace of %d pods, %d policies", policyPods, policyCount)
	t.Row(what+", p50", latency(benchkit.Quantile(r.rules.policy, 0.5)), "", true)
	t.Row(what+", p99", latency(benchkit.Quantile(r.rules.policy, 0.99)), "", true)
	t.Row("  CPU per update, p50", latency(benchkit.Quantile(r.rules.policyCPU, 0.5)), "", true)
	return t
}

// path is the result of the path of that name.
func (r results) path(name string) pathResult {
	for _, p := range r.paths {
		if p.name == name {
			return p
		}
	}
	return pathResult{name: name}
}

// roundRatios are the requests/s of p over base's in each round: the two
// ran one after the other, under much the same noise.
func roundRatios(p, base pathResult) []float64 {
	out := make([]float64, min(len(p.trials), len(base.trials)))
	for i := range out {
		out[i] = p.trials[i].rate() / base.trials[i].rate()
	}
	return out
}

// label names a path in the report.
func label(path string) string {
	switch path {
	case "direct":
		return "direct (pod IP)"
	case "ClusterIP":
		return "ClusterIP"
	case "Ingress":
		return "Ingress (" + clientBoard + "'s controller)"
	}
	return path
}

// errorsRow adds the count of failed requests of ts, whose target is none.
func errorsRow(t *benchkit.Table, measure string, ts []trial) {
	failed, total := 0, 0
	for _, x := range ts {
		failed += x.errors
		total += x.errors + x.ok
	}
	t.Row(measure, fmt.Sprintf("%d of %s", failed, benchkit.Group(float64(total))), "none", failed == 0)
}

// failures is an error naming the first failure of each measure that had
// any; nil if none had.
func (r results) failures() error {
	var errs []error
	check := func(what string, ts []trial) {
		n := 0
		var first error
		for _, t := range ts {
			if n += t.errors; first == nil {
				first = t.firstErr
			}
		}
		if n > 0 {
			errs = append(errs, fmt.Errorf("%s: %d requests failed, the first: %w", what, n, first))
		}
	}
	for _, p := range r.paths {
		check("HTTP over the "+p.name+" path", p.trials)
	}
	check("DNS", r.dns)
	return errors.Join(errs...)
}

// medianOf is the median over ts of f.
func medianOf(ts []trial, f func(trial) float64) float64 {
	xs := make([]float64, len(ts))
	for i, t := range ts {
		xs[i] = f(t)
	}
	return islandbench.Median(xs)
}

func p50(t trial) float64 { return float64(t.p50) }
func p99(t trial) float64 { return float64(t.p99) }

// latency formats nanoseconds (or a duration) to the microsecond.
func latency[T float64 | time.Duration](ns T) string {
	return time.Duration(ns).Round(time.Microsecond).String()
}
