package main

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/benchkit"
)

// cluster is a three-member store under test.
type cluster interface {
	// system names it in the tables: "isle" or "etcd".
	system() string
	// procs are its member processes, in member order.
	procs() []*benchkit.Proc
	// put writes key=value through member i (a follower forwards to the leader).
	put(ctx context.Context, i int, key string, value []byte) error
	// metricsURLs are the members' Prometheus endpoints.
	metricsURLs() []string
	// fsyncMetric names the histogram that times WAL fsyncs.
	fsyncMetric() string
	// snapshotBytesMetric names the counter of bytes written to snapshot
	// files, or is "" when the system has none.
	snapshotBytesMetric() string
}

// newHTTPClient is the one client both systems are driven with: HTTP/1.1,
// keep-alive, enough idle connections for every writer, no proxy (all
// traffic stays on 127.0.0.1).
func newHTTPClient() *http.Client {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        0, // no overall limit
		MaxIdleConnsPerHost: 128,
		IdleConnTimeout:     5 * time.Minute,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &http.Client{Transport: tr}
}

// sumWriteBytes reads write_bytes of every process.
func sumWriteBytes(ps []*benchkit.Proc) (total uint64, each []uint64, err error) {
	for _, p := range ps {
		n, err := p.WriteBytes()
		if err != nil {
			return 0, nil, err
		}
		total += n
		each = append(each, n)
	}
	return total, each, nil
}
