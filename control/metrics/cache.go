package metrics

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/isle-cluster/isle/control/wire"
)

// Why a report is refused; Receive's errors wrap one of them.
var (
	// ErrInvalid: the report is malformed or out of bounds (HTTP 400).
	ErrInvalid = errors.New("invalid usage report")
	// ErrForbidden: the sender may not report what it sent (HTTP 403).
	ErrForbidden = errors.New("usage report refused")
	// ErrTooLarge: the body is over wire.MaxReportBytes (HTTP 413).
	ErrTooLarge = errors.New("usage report too large")
)

// PodLookup tells what the server knows of a pod: its UID and the node it
// is bound to ("" if none); ok is false if there is no such pod.
type PodLookup func(namespace, name string) (uid types.UID, node string, ok bool)

// Config configures a Cache. Zero values take the documented defaults.
type Config struct {
	// TTL is how long a sample is served after it arrived. Default 2 min:
	// eight reports missed.
	TTL time.Duration
	// MaxNodes and MaxPods bound the samples kept; samples of new nodes or
	// pods beyond them are dropped (and counted). Defaults 1,000 and
	// 30,000.
	MaxNodes, MaxPods int
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Registerer gets the cache's Prometheus metrics; nil: none.
	Registerer prometheus.Registerer
}

// Cache is a server's memory of the usage reported to it. It is safe for
// concurrent use.
type Cache struct {
	cfg Config

	mu        sync.RWMutex
	nodes     map[string]nodeSample
	pods      map[podKey]podSample
	lastSweep time.Time

	reports *prometheus.CounterVec
	dropped *prometheus.CounterVec
}

type podKey struct{ namespace, name string }

// sample is when a usage was measured (timestamp, window) and when it
// arrived (received, by the server's clock: a board's clock may be off
// by the allowed skew, and expiry should not depend on it).
type sample struct {
	received  time.Time
	timestamp metav1.Time
	window    metav1.Duration
}

type nodeSample struct {
	sample
	usage corev1.ResourceList
}

type podSample struct {
	sample
	uid        types.UID
	containers []metricsv1beta1.ContainerMetrics
	network    *wire.PodNetwork
}

// NewCache returns an empty cache.
func NewCache(cfg Config) *Cache {
	if cfg.TTL <= 0 {
		cfg.TTL = 2 * time.Minute
	}
	if cfg.MaxNodes <= 0 {
		cfg.MaxNodes = 1000
	}
	if cfg.MaxPods <= 0 {
		cfg.MaxPods = 30000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Cache{cfg: cfg, nodes: map[string]nodeSample{}, pods: map[podKey]podSample{},
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "isle", Subsystem: "metrics", Name: "reports_total",
			Help: "Usage reports received from node agents, by result: accepted, invalid, forbidden, too_large."}, []string{"result"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "isle", Subsystem: "metrics", Name: "samples_dropped_total",
			Help: "Samples of accepted reports not kept, by reason: stale_pod (a pod this server does not know, or another of its name), full (MaxNodes or MaxPods reached)."}, []string{"reason"}),
	}
	if cfg.Registerer != nil {
		count := func(f func() int) func() float64 {
			return func() float64 {
				c.mu.RLock()
				defer c.mu.RUnlock()
				return float64(f())
			}
		}
		cfg.Registerer.MustRegister(c.reports, c.dropped,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "isle", Subsystem: "metrics", Name: "nodes",
				Help: "Nodes whose usage this server holds."}, count(func() int { return len(c.nodes) })),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "isle", Subsystem: "metrics", Name: "pods",
				Help: "Pods whose usage this server holds."}, count(func() int { return len(c.pods) })))
	}
	return c
}

// Receive checks the report body a node sent and keeps its samples. node
// is the sender's node name, "" if the sender is not a node. lookup finds
// the pods the report names (the server's own copy of the store is fresh
// enough). The error wraps ErrInvalid, ErrForbidden or ErrTooLarge, and
// says what is wrong.
func (c *Cache) Receive(node string, body []byte, lookup PodLookup) error {
	r, err := c.check(node, body, lookup)
	if err != nil {
		result := "invalid"
		switch {
		case errors.Is(err, ErrForbidden):
			result = "forbidden"
		case errors.Is(err, ErrTooLarge):
			result = "too_large"
		}
		c.reports.WithLabelValues(result).Inc()
		return err
	}
	c.keep(node, r)
	c.reports.WithLabelValues("accepted").Inc()
	return nil
}

// check decodes and validates a report; its Pods are left with the ones
// to keep.
func (c *Cache) check(node string, body []byte, lookup PodLookup) (*wire.Report, error) {
	if node == "" {
		return nil, fmt.Errorf("%w: only nodes report usage, with their node credential", ErrForbidden)
	}
	if len(body) > wire.MaxReportBytes {
		return nil, fmt.Errorf("%w: %d bytes, limit is %d", ErrTooLarge, len(body), wire.MaxReportBytes)
	}
	r := &wire.Report{}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(r); err != nil {
		return nil, fmt.Errorf("%w: decode: %v", ErrInvalid, err)
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: decode: data after the report", ErrInvalid)
	}
	if errs := r.Validate(c.cfg.Now()); len(errs) > 0 {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, errs.ToAggregate())
	}
	keep := r.Pods[:0]
	for _, p := range r.Pods {
		uid, bound, ok := lookup(p.Namespace, p.Name)
		switch {
		case !ok || uid != p.UID:
			c.dropped.WithLabelValues("stale_pod").Inc()
			continue
		case bound == "":
			return nil, fmt.Errorf("%w: node %q may not report pod %s/%s: it is not bound to a node", ErrForbidden, node, p.Namespace, p.Name)
		case bound != node:
			return nil, fmt.Errorf("%w: node %q may not report pod %s/%s: it is bound to node %q", ErrForbidden, node, p.Namespace, p.Name, bound)
		}
		keep = append(keep, p)
	}
	r.Pods = keep
	return r, nil
}

// keep stores the samples of a checked report.
func (c *Cache) keep(node string, r *wire.Report) {
	now := c.cfg.Now()
	s := sample{received: now, timestamp: r.Timestamp, window: r.Window}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sweepLocked(now)
	if _, ok := c.nodes[node]; ok || len(c.nodes) < c.cfg.MaxNodes {
		c.nodes[node] = nodeSample{sample: s, usage: r.Node}
	} else {
		c.dropped.WithLabelValues("full").Inc()
	}
	for _, p := range r.Pods {
		key := podKey{p.Namespace, p.Name}
		if _, ok := c.pods[key]; !ok && len(c.pods) >= c.cfg.MaxPods {
			c.dropped.WithLabelValues("full").Inc()
			continue
		}
		c.pods[key] = podSample{sample: s, uid: p.UID, containers: p.Containers, network: p.Network}
	}
}

// sweepLocked drops expired samples, at most every quarter TTL.
func (c *Cache) sweepLocked(now time.Time) {
	if now.Sub(c.lastSweep) < c.cfg.TTL/4 {
		return
	}
	c.lastSweep = now
	for name, s := range c.nodes {
		if c.expired(s.sample, now) {
			delete(c.nodes, name)
		}
	}
	for key, s := range c.pods {
		if c.expired(s.sample, now) {
			delete(c.pods, key)
		}
	}
}

func (c *Cache) expired(s sample, now time.Time) bool {
	return now.Sub(s.received) >= c.cfg.TTL
}

// Traffic returns, for the pods of the namespaces in (all if in is nil)
// that received any, the bytes per second each received over its latest
// report's window, by "NAMESPACE/NAME".
func (c *Cache) Traffic(in func(namespace string) bool) map[string]float64 {
	now := c.cfg.Now()
	out := map[string]float64{}
	c.mu.RLock()
	defer c.mu.RUnlock()
	for key, s := range c.pods {
		if s.network == nil || s.network.RxBytes == 0 || s.window.Duration <= 0 || c.expired(s.sample, now) || in != nil && !in(key.namespace) {
			continue
		}
		out[key.namespace+"/"+key.name] = float64(s.network.RxBytes) / s.window.Seconds()
	}
	return out
}

// NodeMetrics returns the latest usage of a node (named, without labels).
func (c *Cache) NodeMetrics(name string) (metricsv1beta1.NodeMetrics, bool) {
	c.mu.RLock()
	s, ok := c.nodes[name]
	c.mu.RUnlock()
	if !ok || c.expired(s.sample, c.cfg.Now()) {
		return metricsv1beta1.NodeMetrics{}, false
	}
	return metricsv1beta1.NodeMetrics{
		TypeMeta:   metav1.TypeMeta{APIVersion: metricsv1beta1.SchemeGroupVersion.String(), Kind: "NodeMetrics"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Timestamp:  s.timestamp, Window: s.window, Usage: s.usage.DeepCopy(),
	}, true
}

// PodMetrics returns the latest usage of a pod (named, without labels),
// if the sample is of the pod with this UID.
func (c *Cache) PodMetrics(namespace, name string, uid types.UID) (metricsv1beta1.PodMetrics, bool) {
	c.mu.RLock()
	s, ok := c.pods[podKey{namespace, name}]
	c.mu.RUnlock()
	if !ok || s.uid != uid || c.expired(s.sample, c.cfg.Now()) {
		return metricsv1beta1.PodMetrics{}, false
	}
	m := metricsv1beta1.PodMetrics{
		TypeMeta:   metav1.TypeMeta{APIVersion: metricsv1beta1.SchemeGroupVersion.String(), Kind: "PodMetrics"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Timestamp:  s.timestamp, Window: s.window,
		Containers: make([]metricsv1beta1.ContainerMetrics, len(s.containers)),
	}
	for i, cm := range s.containers {
		cm.DeepCopyInto(&m.Containers[i])
	}
	return m, true
}
