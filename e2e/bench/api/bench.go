package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
)

const podsPath = "/api/v1/namespaces/default/pods"

// The Accept headers: kubectl get's (Table, falling back to JSON) and a
// plain client's.
const (
	acceptTable = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
	acceptJSON  = "application/json"
)

// opStat is one measured operation.
type opStat struct {
	name      string
	count     int // successful operations
	failed    int
	firstErr  error
	elapsed   time.Duration   // wall time of all of them
	lat       []time.Duration // sorted, successful ones only
	bytes     int64           // answer bytes, summed over successful operations
	requests  int             // HTTP requests (a paged LIST is several)
	reqBodies int64           // request body bytes (creates)
}

func (s opStat) perSec() float64 { return float64(s.count) / s.elapsed.Seconds() }
func (s opStat) p(q float64) time.Duration {
	return percentile(s.lat, q)
}

// percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// runParallel calls op(i) for i in [0, n) from workers goroutines and
// gathers latencies, bytes and the first error. op returns the answer's size.
func runParallel(ctx context.Context, name string, n, workers int, op func(ctx context.Context, i int) (int, error)) opStat {
	var mu sync.Mutex
	st := opStat{name: name}
	start := time.Now()
	benchkit.Parallel(ctx, n, workers, func(ctx context.Context, i int) {
		t0 := time.Now()
		size, err := op(ctx, i)
		took := time.Since(t0)
		mu.Lock()
		defer mu.Unlock()
		st.requests++
		if err != nil {
			st.failed++
			if st.firstErr == nil {
				st.firstErr = err
			}
			return
		}
		st.lat = append(st.lat, took)
		st.bytes += int64(size)
	})
	st.elapsed = time.Since(start)
	slices.Sort(st.lat)
	st.count = len(st.lat)
	return st
}

// created is the outcome of the creates: their stats and the names stored.
type created struct {
	stat  opStat
	names []string
}

// createPods POSTs n Pods from writers concurrent writers. The bodies are
// encoded before the clock starts.
func createPods(ctx context.Context, api *apiClient, n, writers int) (created, error) {
	bodies := make([][]byte, n)
	names := make([]string, n)
	ok := make([]bool, n)
	var total int64
	for i := range n {
		names[i] = podName(i)
		b, err := podBody(names[i])
		if err != nil {
			return created{}, fmt.Errorf("create pods: %w", err)
		}
		bodies[i] = b
		total += int64(len(b))
	}
	st := runParallel(ctx, "create Pod (POST)", n, writers, func(ctx context.Context, i int) (int, error) {
		code, body, err := api.do(ctx, http.MethodPost, podsPath, acceptJSON, "application/json", bodies[i])
		if err != nil {
			return 0, err
		}
		if code != http.StatusCreated {
			return 0, fmt.Errorf("create pod %s: HTTP %d: %.300s", names[i], code, body)
		}
		ok[i] = true
		return len(body), nil
	})
	st.reqBodies = total
	if err := ctx.Err(); err != nil {
		return created{}, fmt.Errorf("create pods: %w", err)
	}
	var stored []string
	for i, name := range names {
		if ok[i] {
			stored = append(stored, name)
		}
	}
	if len(stored) == 0 {
		return created{}, fmt.Errorf("create pods: none was created: %w", st.firstErr)
	}
	slog.Info("created", "pods", st.count, "failed", st.failed, "per_s", int(st.perSec()),
		"p50", st.p(0.5), "p99", st.p(0.99), "body_bytes", total/int64(n))
	return created{stat: st, names: stored}, nil
}

// getPods GETs random stored Pods, n in all, from readers concurrent readers.
func getPods(ctx context.Context, api *apiClient, names []string, n, readers int) (opStat, error) {
	r := rand.New(rand.NewPCG(7, 11))
	pick := make([]string, n)
	for i := range pick {
		pick[i] = names[r.IntN(len(names))]
	}
	st := runParallel(ctx, "get Pod", n, readers, func(ctx context.Context, i int) (int, error) {
		code, body, err := api.get(ctx, podsPath+"/"+pick[i], acceptJSON)
		if err != nil {
			return 0, err
		}
		if code != http.StatusOK {
			return 0, fmt.Errorf("get pod %s: HTTP %d: %.300s", pick[i], code, body)
		}
		return len(body), nil
	})
	if err := ctx.Err(); err != nil {
		return st, fmt.Errorf("get pods: %w", err)
	}
	if st.count == 0 {
		return st, fmt.Errorf("get pods: none succeeded: %w", st.firstErr)
	}
	slog.Info("got", "gets", st.count, "failed", st.failed, "p50", st.p(0.5), "p99", st.p(0.99))
	return st, nil
}

// listKind is one way of listing every Pod.
type listKind struct {
	name   string
	accept string
	limit  int // page size; 0: one request for everything
}

// listKinds: what kubectl get pods asks for (a Table in pages of 500), the
// same Table unpaged, and a plain JSON list (client-go's List).
var listKinds = []listKind{
	{name: "list Pods as Table, pages of 500 (kubectl)", accept: acceptTable, limit: 500},
	{name: "list Pods as Table, one request", accept: acceptTable},
	{name: "list Pods as JSON, one request", accept: acceptJSON},
}

// listPage is what is read of a list answer: the continue token and the
// number of items (a list) or rows (a Table).
type listPage struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Continue string `json:"continue"`
	} `json:"metadata"`
	Items []struct{} `json:"items"`
	Rows  []struct{} `json:"rows"`
}

// listPods lists every Pod n times, one listing after the other, and checks
// each listing has want objects. The latency of a paged listing is the sum
// of its pages' request times; decoding the answers is not counted, and
// elapsed is the sum of the latencies.
func listPods(ctx context.Context, api *apiClient, k listKind, n, want int) (opStat, error) {
	st := opStat{name: k.name}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		var took time.Duration
		var size int64
		var got int
		cont := ""
		for page := 0; ; page++ {
			q := url.Values{}
			if k.limit > 0 {
				q.Set("limit", fmt.Sprint(k.limit))
			}
			if cont != "" {
				q.Set("continue", cont)
			}
			path := podsPath
			if len(q) > 0 {
				path += "?" + q.Encode()
			}
			t0 := time.Now()
			code, body, err := api.get(ctx, path, k.accept)
			took += time.Since(t0)
			st.requests++
			if err != nil {
				return st, fmt.Errorf("list pods (%s): %w", k.name, err)
			}
			if code != http.StatusOK {
				return st, fmt.Errorf("list pods (%s): page %d: HTTP %d: %.300s", k.name, page, code, body)
			}
			size += int64(len(body))
			var lp listPage
			if err := json.Unmarshal(body, &lp); err != nil {
				return st, fmt.Errorf("list pods (%s): decode page %d: %w", k.name, page, err)
			}
			got += len(lp.Items) + len(lp.Rows)
			if wantKind := kindFor(k.accept); lp.Kind != wantKind {
				return st, fmt.Errorf("list pods (%s): got kind %q, want %q", k.name, lp.Kind, wantKind)
			}
			cont = lp.Metadata.Continue
			if cont == "" {
				break
			}
			if k.limit == 0 {
				return st, fmt.Errorf("list pods (%s): an unpaged list has a continue token", k.name)
			}
		}
		if got != want {
			return st, fmt.Errorf("list pods (%s): got %d pods, want %d", k.name, got, want)
		}
		st.lat = append(st.lat, took)
		st.elapsed += took
		st.bytes += size
	}
	if err := ctx.Err(); err != nil {
		return st, fmt.Errorf("list pods: %w", err)
	}
	slices.Sort(st.lat)
	st.count = len(st.lat)
	slog.Info("listed", "kind", k.name, "lists", st.count, "p50", st.p(0.5), "p90", st.p(0.9), "p99", st.p(0.99),
		"max", st.lat[len(st.lat)-1], "bytes", st.bytes/int64(st.count))
	return st, nil
}

func kindFor(accept string) string {
	if accept == acceptTable {
		return "Table"
	}
	return "PodList"
}
