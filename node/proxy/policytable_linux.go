package proxy

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/prometheus/client_golang/prometheus"
	vnetns "github.com/vishvananda/netns"
)

// PolicyTableName is the nftables table of the board's NetworkPolicy
// rules (family ip: IPv4 only, as the pod network).
const PolicyTableName = "isle-policy"

// Names of the policy table's fixed chain and maps.
const (
	chainPolicyForward = "forward"
	setIngressPods     = "ingress-pods"
	setEgressPods      = "egress-pods"
)

// prioPolicy is the forward chain's priority: the usual filter's, after
// the proxy's checks (-110).
var prioPolicy = *nftables.ChainPriorityFilter

// Policies are the NetworkPolicy rules of a board's pods: the nftables
// table ip isle-policy. Its methods may be called from several goroutines.
type Policies struct {
	cfg     Config
	log     *slog.Logger
	metrics policyMetrics

	mu     sync.Mutex
	ns     vnetns.NsHandle
	closed bool
	rec    *record // nil: unknown, the next Sync writes the table whole
	warned map[warning]bool
}

// NewPolicies checks cfg. The table a previous run left keeps its rules
// until the first Sync replaces it whole: a restarted agent leaves no
// window in which isolated pods are open.
func NewPolicies(cfg Config) (*Policies, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	p := &Policies{cfg: cfg, log: cfg.Logger, ns: vnetns.None(), metrics: newPolicyMetrics()}
	if cfg.Netns != "" {
		if p.ns, err = vnetns.GetFromPath(cfg.Netns); err != nil {
			return nil, fmt.Errorf("proxy: policies: namespace %s: %w", cfg.Netns, err)
		}
	}
	return p, nil
}

func (p *Policies) conn() (*nftables.Conn, error) { return nsConn(p.ns) }

// Sync makes the table enforce the policies of st on the board's pods,
// in one nftables transaction that sends only what changed. Connections
// already established stay: only new ones meet the rules.
func (p *Policies) Sync(st PolicyState) error {
	start := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	pl := makePolicyPlan(st, p.cfg.NodeName)
	p.logWarnings(pl.warnings)
	m := buildPolicyTable(pl)
	c, err := p.conn()
	var rec *record
	var wrote bool
	if err == nil {
		rec, wrote, err = write(c, PolicyTableName, p.rec, m)
	}
	p.metrics.observe(time.Since(start), len(pl.pods), err)
	if err != nil {
		p.rec = nil
		return fmt.Errorf("proxy: policies: sync: nftables table %s: %w", PolicyTableName, err)
	}
	p.rec = rec
	if wrote {
		p.log.Debug("proxy: policies synced", "policies", len(st.Policies), "isolated", len(pl.pods), "took", time.Since(start))
	}
	return nil
}

// logWarnings logs the warnings not logged at the last Sync.
func (p *Policies) logWarnings(ws []warning) {
	p.warned = logNew(p.log, "proxy: left out of the NetworkPolicy rules", p.warned, ws)
}

// Close removes the table: no pod is isolated any more.
func (p *Policies) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	if err := closeTable(p.ns, PolicyTableName); err != nil {
		return fmt.Errorf("proxy: policies: close: %w", err)
	}
	return nil
}

// buildPolicyTable is the table of a plan:
//
//	table ip isle-policy {
//	  map ingress-pods { type ipv4_addr : verdict; 10.42.1.5 : jump in-NS/POD-h, ... }
//	  map egress-pods { type ipv4_addr : verdict; 10.42.1.5 : jump out-NS/POD-h, ... }
//	  set peers-NS/POLICY/in/0-h { type ipv4_addr; flags interval }   # a rule's peers
//	  set named-NS/POLICY/out/0/1-h { type ipv4_addr . inet_proto . inet_service }  # a named port's destinations
//	  chain forward { type filter hook forward priority filter
//	    ct state established,related accept
//	    ip saddr vmap @egress-pods
//	    ip daddr vmap @ingress-pods
//	  }
//	  chain in-NS/POD-h {                  # the pod's allowed sources
//	    ip saddr @peers-... meta l4proto tcp th dport 80-90 return
//	    ...
//	    drop
//	  }
//	  chain out-NS/POD-h {                 # the pod's allowed destinations
//	    ip daddr @peers-... return
//	    ip daddr . meta l4proto . th dport @named-... return
//	    drop
//	  }
//	}
func buildPolicyTable(pl policyPlan) *tableModel {
	m := &tableModel{ports: map[string]portStat{}}
	var ingress, egress []nftables.SetElement
	for _, pod := range pl.pods {
		if pod.ingressIsolated {
			name := "in-" + hashed(pod.name)
			m.chains = append(m.chains, &chainModel{name: name, key: rulesKey(pod.ingress),
				make: func() []ruleModel { return allowRules(pod.ingress, offSaddr) }})
			ingress = append(ingress, nftables.SetElement{Key: pod.addr.AsSlice(), VerdictData: jump(name)})
		}
		if pod.egressIsolated {
			name := "out-" + hashed(pod.name)
			m.chains = append(m.chains, &chainModel{name: name, key: rulesKey(pod.egress),
				make: func() []ruleModel { return allowRules(pod.egress, offDaddr) }})
			egress = append(egress, nftables.SetElement{Key: pod.addr.AsSlice(), VerdictData: jump(name)})
		}
	}
	estab := append([]expr.Any{&expr.Ct{Register: 1, Key: expr.CtKeySTATE}},
		bitsSet(expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED, true)...)
	m.chains = append(m.chains, &chainModel{name: chainPolicyForward,
		hook: &hookSpec{typ: nftables.ChainTypeFilter, hook: nftables.ChainHookForward, prio: prioPolicy},
		rules: []ruleModel{
			rule(estab, verdict(expr.VerdictAccept)),
			rule(loadSaddr(1), vmap(setEgressPods, 1)),
			rule(loadDaddr(1), vmap(setIngressPods, 1)),
		}})
	pods := setKind{key: nftables.TypeIPAddr, verdicts: true}
	m.sets = append(m.sets, &setModel{name: setIngressPods, kind: pods, elems: ingress},
		&setModel{name: setEgressPods, kind: pods, elems: egress})
	for _, name := range sortedKeys(pl.peers) {
		m.sets = append(m.sets, &setModel{name: name, kind: setKind{key: nftables.TypeIPAddr, interval: true},
			elems: rangeElems(pl.peers[name])})
	}
	for _, name := range sortedKeys(pl.named) {
		var elems []nftables.SetElement
		for _, d := range pl.named[name] {
			a := d.addr.As4()
			elems = append(elems, nftables.SetElement{Key: []byte{a[0], a[1], a[2], a[3], d.proto, 0, 0, 0, byte(d.port >> 8), byte(d.port), 0, 0}})
		}
		m.sets = append(m.sets, &setModel{name: name, kind: setKind{key: destType}, elems: elems})
	}
	return m
}

// allowRules are a pod's chain: a return for each rule, then drop. off
// says which address is the peer's: the source (ingress) or the
// destination (egress).
func allowRules(rules []allowRule, off uint32) []ruleModel {
	out := make([]ruleModel, 0, len(rules)+1)
	for _, r := range rules {
		if r.named != "" {
			out = append(out, rule(destKeyExprs(), lookup(r.named, 1), verdict(expr.VerdictReturn)))
			continue
		}
		var parts []any
		if r.peers != "" {
			parts = append(parts, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: 4}, lookup(r.peers, 1))
		}
		if r.proto != 0 {
			parts = append(parts, loadL4proto(1), &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{r.proto}})
			switch {
			case r.lo == 0 && r.hi == 0:
			case r.lo == r.hi:
				parts = append(parts, loadDport(1), &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{byte(r.lo >> 8), byte(r.lo)}})
			default:
				parts = append(parts, loadDport(1), &expr.Range{Op: expr.CmpOpEq, Register: 1,
					FromData: []byte{byte(r.lo >> 8), byte(r.lo)}, ToData: []byte{byte(r.hi >> 8), byte(r.hi)}})
			}
		}
		out = append(out, rule(append(parts, verdict(expr.VerdictReturn))...))
	}
	return append(out, rule(verdict(expr.VerdictDrop)))
}

// rulesKey is what a pod's chain is made of, for its hash (allowRules
// makes the same chain of the same rules).
func rulesKey(rules []allowRule) []byte {
	b := []byte("allow")
	for _, r := range rules {
		b = append(b, r.peers...)
		b = append(b, 0)
		b = append(b, r.named...)
		b = append(b, 0, r.proto, byte(r.lo>>8), byte(r.lo), byte(r.hi>>8), byte(r.hi))
	}
	return b
}

// rangeElems are the elements of an interval set of ranges: each range's
// first address, and the address after its last flagged as an end (none
// for a range to the last address).
func rangeElems(rs []addrRange) []nftables.SetElement {
	out := make([]nftables.SetElement, 0, 2*len(rs))
	for _, r := range rs {
		out = append(out, nftables.SetElement{Key: r.lo.AsSlice()})
		if end := r.hi.Next(); end.IsValid() {
			out = append(out, nftables.SetElement{Key: end.AsSlice(), IntervalEnd: true})
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// policyMetrics are the Policies' metrics.
type policyMetrics struct {
	syncDuration prometheus.Histogram
	syncErrors   prometheus.Counter
	isolated     prometheus.Gauge
}

func newPolicyMetrics() policyMetrics {
	return policyMetrics{
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "isle_policy_sync_duration_seconds",
			Help:    "Time of a Sync of the NetworkPolicy rules, nftables transaction included.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}),
		syncErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "isle_policy_sync_errors_total",
			Help: "Syncs of the NetworkPolicy rules that failed (the next one rewrites the table).",
		}),
		isolated: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "isle_policy_isolated_pods",
			Help: "Pods of this board that a NetworkPolicy isolates, for ingress, egress or both.",
		}),
	}
}

func (m policyMetrics) observe(d time.Duration, isolated int, err error) {
	m.syncDuration.Observe(d.Seconds())
	if err != nil {
		m.syncErrors.Inc()
		return
	}
	m.isolated.Set(float64(isolated))
}

// Collector returns the collector of the Policies' metrics, for the
// caller to register: isle_policy_sync_duration_seconds,
// isle_policy_sync_errors_total and isle_policy_isolated_pods.
func (p *Policies) Collector() prometheus.Collector { return p.metrics }

// Describe implements prometheus.Collector.
func (m policyMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.syncDuration.Describe(ch)
	m.syncErrors.Describe(ch)
	m.isolated.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m policyMetrics) Collect(ch chan<- prometheus.Metric) {
	m.syncDuration.Collect(ch)
	m.syncErrors.Collect(ch)
	m.isolated.Collect(ch)
}
