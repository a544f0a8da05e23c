package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
)

// acceptTable is what kubectl get asks for.
const acceptTable = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"

// latencies are one kind of request's latencies.
type latencies []time.Duration

func (l latencies) p(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	return benchkit.Quantile(l, q)
}

// apiResults are the API's latencies at one size.
type apiResults struct {
	get, listNS, listAll, create, update, watch latencies
	nsPods                                      int // pods in the namespace listed
	errors                                      int
}

// measureAPI takes the API's latencies through the servers' clients, in
// turn: GETs of pods, lists of a namespace's pods and of every pod as
// Tables (kubectl get pods, and -A in pages of 500), creates and updates
// of ConfigMaps, and the time from each write sent to its event at a
// watcher of their namespace.
func measureAPI(ctx context.Context, clients []kubernetes.Interface, pods []string, ops int) (apiResults, error) {
	var r apiResults
	var mu sync.Mutex
	timed := func(into *latencies, f func(ctx context.Context, c kubernetes.Interface) error) func(ctx context.Context, i int) {
		return func(ctx context.Context, i int) {
			began := time.Now()
			err := f(ctx, clients[i%len(clients)])
			d := time.Since(began)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				r.errors++
				return
			}
			*into = append(*into, d)
		}
	}
	const workers = 4
	benchkit.Parallel(ctx, ops, workers, timed(&r.get, func(ctx context.Context, c kubernetes.Interface) error {
		key := pods[rand.IntN(len(pods))]
		ns, name := splitKey(key)
		_, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err
	}))
	lists := max(5, ops/20)
	benchkit.Parallel(ctx, lists, 1, timed(&r.listNS, func(ctx context.Context, c kubernetes.Interface) error {
		n, err := tableRows(ctx, c, "/api/v1/namespaces/"+nsOf(0)+"/pods")
		r.nsPods = n
		return err
	}))
	benchkit.Parallel(ctx, max(3, lists/4), 1, timed(&r.listAll, func(ctx context.Context, c kubernetes.Interface) error {
		cont := ""
		for {
			var err error
			if _, cont, err = tableRowsPage(ctx, c, "/api/v1/pods", cont, 500); err != nil || cont == "" {
				return err
			}
		}
	}))

	// Writes, with a watcher of their namespace.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := clients[1%len(clients)].CoreV1().ConfigMaps(apiNamespace).Watch(wctx, metav1.ListOptions{})
	if err != nil {
		return r, fmt.Errorf("watch ConfigMaps: %w", err)
	}
	defer w.Stop()
	var sentMu sync.Mutex
	sent := map[string]time.Time{} // by data["seq"]
	seen := make(chan struct{})
	var watchLat latencies
	go func() {
		defer close(seen)
		for ev := range w.ResultChan() {
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			at := time.Now()
			sentMu.Lock()
			if t, ok := sent[cm.Data["seq"]]; ok {
				watchLat = append(watchLat, at.Sub(t))
				delete(sent, cm.Data["seq"])
			}
			sentMu.Unlock()
		}
	}()
	run := time.Now().UnixNano()
	mark := func(seq string) {
		sentMu.Lock()
		sent[seq] = time.Now()
		sentMu.Unlock()
	}
	benchkit.Parallel(ctx, ops, workers, func(ctx context.Context, i int) {
		seq := fmt.Sprintf("%d-c%d", run, i)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d-%d", run, i)}, Data: map[string]string{"seq": seq, "v": "0"}}
		timed(&r.create, func(ctx context.Context, c kubernetes.Interface) error {
			mark(seq)
			_, err := c.CoreV1().ConfigMaps(apiNamespace).Create(ctx, cm, metav1.CreateOptions{})
			return err
		})(ctx, i)
	})
	benchkit.Parallel(ctx, ops, workers, func(ctx context.Context, i int) {
		seq := fmt.Sprintf("%d-u%d", run, i)
		timed(&r.update, func(ctx context.Context, c kubernetes.Interface) error {
			cm, err := c.CoreV1().ConfigMaps(apiNamespace).Get(ctx, fmt.Sprintf("cm-%d-%d", run, i), metav1.GetOptions{})
			if err != nil {
				return err
			}
			cm.Data = map[string]string{"seq": seq, "v": strconv.Itoa(i)}
			mark(seq)
			_, err = c.CoreV1().ConfigMaps(apiNamespace).Update(ctx, cm, metav1.UpdateOptions{})
			return err
		})(ctx, i)
	})
	// The last events arrive, or not in 5 s.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		sentMu.Lock()
		left := len(sent)
		sentMu.Unlock()
		if left == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	w.Stop()
	<-seen
	sentMu.Lock()
	r.watch = watchLat
	r.errors += len(sent) // writes whose event never came
	sentMu.Unlock()
	return r, nil
}

// tableRows lists path as a Table in one request and returns its rows.
func tableRows(ctx context.Context, c kubernetes.Interface, path string) (int, error) {
	n, _, err := tableRowsPage(ctx, c, path, "", 0)
	return n, err
}

// tableRowsPage lists a page of path as a Table (limit 0: all), and returns
// its rows and the continue token.
func tableRowsPage(ctx context.Context, c kubernetes.Interface, path, cont string, limit int) (int, string, error) {
	req := c.CoreV1().RESTClient().Get().AbsPath(path).SetHeader("Accept", acceptTable)
	if limit > 0 {
		req = req.Param("limit", strconv.Itoa(limit))
	}
	if cont != "" {
		req = req.Param("continue", cont)
	}
	raw, err := req.Do(ctx).Raw()
	if err != nil {
		return 0, "", fmt.Errorf("list %s as a Table: %w", path, err)
	}
	var t struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Continue string `json:"continue"`
		} `json:"metadata"`
		Rows []json.RawMessage `json:"rows"`
	}
	if err := json.Unmarshal(raw, &t); err != nil || t.Kind != "Table" {
		return 0, "", fmt.Errorf("list %s as a Table: got %.80q (%v)", path, raw, err)
	}
	return len(t.Rows), t.Metadata.Continue, nil
}

func splitKey(key string) (ns, name string) {
	for i := range key {
		if key[i] == '/' {
			return key[:i], key[i+1:]
		}
	}
	return "", key
}
