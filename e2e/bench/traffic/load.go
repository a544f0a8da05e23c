package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
	"github.com/isle-cluster/isle/e2e/bench/islandbench"
	"github.com/isle-cluster/isle/node/netns"
)

// trial is one run of load: clients each sending one request at a time.
type trial struct {
	ok       int           // requests answered as they should be
	errors   int           // requests that failed or were answered wrong
	firstErr error         // the first of those
	took     time.Duration // from the first request to the last answer
	p50, p99 time.Duration // latencies of the ok requests
	cpu      time.Duration // CPU time of the path's proxy in the meantime, if measured
}

// rate is the ok requests per second.
func (t trial) rate() float64 { return float64(t.ok) / t.took.Seconds() }

// cpuPerRequest is the proxy's CPU time per ok request, in nanoseconds.
func (t trial) cpuPerRequest() float64 { return float64(t.cpu) / float64(t.ok) }

// client sends requests one at a time.
type client interface {
	// do sends one request and checks the answer.
	do(ctx context.Context) error
	close()
}

// load runs n clients made by open for d and measures their requests.
// Every client first sends one request that is not timed (its connection
// made, a server's first answer) and all start together after that.
func load(ctx context.Context, n int, d time.Duration, open func() (client, error)) (trial, error) {
	clients := make([]client, 0, n)
	defer func() {
		for _, c := range clients {
			c.close()
		}
	}()
	for range n {
		c, err := open()
		if err != nil {
			return trial{}, err
		}
		clients = append(clients, c)
	}
	type result struct {
		lat      []time.Duration
		errors   int
		firstErr error
	}
	results := make([]result, n)
	count := func(r *result, err error) {
		if r.errors++; r.firstErr == nil {
			r.firstErr = err
		}
	}
	var warm, done sync.WaitGroup
	start := make(chan struct{})
	var began time.Time
	for i, c := range clients {
		warm.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			r := &results[i]
			if err := c.do(ctx); err != nil {
				count(r, err)
			}
			warm.Done()
			<-start
			r.lat = make([]time.Duration, 0, 4096)
			for end := began.Add(d); ctx.Err() == nil; {
				t0 := time.Now()
				if !t0.Before(end) {
					return
				}
				if err := c.do(ctx); err != nil {
					count(r, err)
					continue
				}
				r.lat = append(r.lat, time.Since(t0))
			}
		}()
	}
	warm.Wait()
	began = time.Now()
	close(start)
	done.Wait()
	t := trial{took: time.Since(began)}
	if err := ctx.Err(); err != nil {
		return trial{}, fmt.Errorf("load: %w", err)
	}
	var lat []time.Duration
	for _, r := range results {
		lat = append(lat, r.lat...)
		t.errors += r.errors
		if t.firstErr == nil {
			t.firstErr = r.firstErr
		}
	}
	t.ok = len(lat)
	if t.ok > 0 {
		t.p50, t.p99 = benchkit.Quantile(lat, 0.5), benchkit.Quantile(lat, 0.99)
	}
	return t, nil
}

// path is one way from the client's namespace to the hello replica.
type path struct {
	name string // in the report: direct, ClusterIP, Ingress
	ns   string // the client's network namespace
	url  string // GET this
	body string // the answer's body
	// cpu, if set, reads the CPU time the process that proxies the
	// path's requests has used.
	cpu func() (time.Duration, error)
	// setup and teardown, if set, run before and after each round.
	setup, teardown func(context.Context) error
}

// pathResult is the rounds of HTTP load over one path.
type pathResult struct {
	name   string
	trials []trial
}

// measureHTTP runs rounds of load over every path, the paths taking
// turns, conns keep-alive connections for d each round.
func measureHTTP(ctx context.Context, paths []path, rounds, conns int, d time.Duration) ([]pathResult, error) {
	res := make([]pathResult, len(paths))
	for i, p := range paths {
		res[i].name = p.name
	}
	for r := range rounds {
		for _, i := range islandbench.Turns(len(paths), r) {
			p := paths[i]
			t, err := loadPath(ctx, p, conns, d)
			if err != nil {
				return nil, err
			}
			slog.Info("http", "path", p.name, "round", r+1, "req/s", int(t.rate()), "p50", t.p50, "p99", t.p99, "errors", t.errors, "proxy-cpu", t.cpu)
			res[i].trials = append(res[i].trials, t)
		}
	}
	return res, nil
}

// loadPath runs one round of load over p, with the CPU time of its proxy.
func loadPath(ctx context.Context, p path, conns int, d time.Duration) (_ trial, err error) {
	if p.setup != nil {
		if err := p.setup(ctx); err != nil {
			return trial{}, err
		}
	}
	if p.teardown != nil {
		defer func() { err = errors.Join(err, p.teardown(ctx)) }()
	}
	var cpu0 time.Duration
	if p.cpu != nil {
		var err error
		if cpu0, err = p.cpu(); err != nil {
			return trial{}, err
		}
	}
	t, err := load(ctx, conns, d, func() (client, error) { return newHTTPClient(p), nil })
	if err != nil || p.cpu == nil {
		return t, err
	}
	cpu1, err := p.cpu()
	t.cpu = cpu1 - cpu0
	return t, err
}

// maxBody bounds what an answer's body is read of: the hello body is a
// line.
const maxBody = 4 << 10

// httpClient is one keep-alive connection's worth of GETs of a path.
type httpClient struct {
	p   path
	tr  *http.Transport
	req *http.Request
	buf bytes.Buffer
}

// newHTTPClient makes a client of p with a transport of its own, so that
// each client has one connection that it alone uses.
func newHTTPClient(p path) *httpClient {
	tr := &http.Transport{
		DialContext:         netns.Dialer(p.ns),
		MaxIdleConnsPerHost: 1,
		MaxConnsPerHost:     1,
		DisableCompression:  true,
		IdleConnTimeout:     time.Minute,
	}
	return &httpClient{p: p, tr: tr}
}

// requestTimeout bounds one request of the load.
const requestTimeout = 10 * time.Second

func (c *httpClient) do(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.p.url, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", c.p.name, err)
	}
	resp, err := c.tr.RoundTrip(req)
	if err != nil {
		return fmt.Errorf("%s: %w", c.p.name, err)
	}
	c.buf.Reset()
	_, err = c.buf.ReadFrom(io.LimitReader(resp.Body, maxBody))
	resp.Body.Close()
	if err := checkAnswer(resp.StatusCode, c.buf.Bytes(), err, c.p.body); err != nil {
		return fmt.Errorf("%s: GET %s: %w", c.p.name, c.p.url, err)
	}
	return nil
}

func (c *httpClient) close() { c.tr.CloseIdleConnections() }

// errWrongAnswer is an answer other than 200 and the hello body.
var errWrongAnswer = errors.New("wrong answer")

// checkAnswer checks an answer's status and body (read with readErr).
func checkAnswer(status int, body []byte, readErr error, want string) error {
	switch {
	case readErr != nil:
		return fmt.Errorf("reading the body: %w", readErr)
	case status != http.StatusOK || string(body) != want:
		return fmt.Errorf("%w: %d %q, want 200 %q", errWrongAnswer, status, body, want)
	}
	return nil
}
