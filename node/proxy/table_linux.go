package proxy

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"hash/fnv"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// TableName is the nftables table of the proxy (family ip: IPv4 only).
const TableName = "isle-proxy"

// MasqueradeMark is the packet mark bit the proxy sets on packets to be
// masqueraded (and clears when it masquerades them), as kube-proxy's
// 0x4000. Nothing else on the board may use it.
const MasqueradeMark = 0x4000

// Names of the chains and sets that do not depend on the Services.
const (
	chainNATPrerouting    = "nat-prerouting"
	chainNATOutput        = "nat-output"
	chainNATPostrouting   = "nat-postrouting"
	chainFilterPrerouting = "filter-prerouting"
	chainFilterInput      = "filter-input"
	chainFilterForward    = "filter-forward"
	chainFilterOutput     = "filter-output"
	chainServices         = "services"
	chainEndpointsCheck   = "endpoints-check"
	chainCount            = "count"
	chainReject           = "reject"
	chainMasquerading     = "masquerading"
	chainMarkMasq         = "mark-for-masquerade"
	chainDNS              = "cluster-dns"

	setServiceIPs          = "service-ips"
	setServiceNodePorts    = "service-nodeports"
	setNoEndpointServices  = "no-endpoint-services"
	setNoEndpointNodePorts = "no-endpoint-nodeports"
	setClusterIPs          = "cluster-ips"
	setEndpointCounters    = "endpoint-counters"
)

// Priorities of the filter chains: before the usual filter chains (0) on
// input and forward, which come after prerouting's DNAT anyway; after DNAT
// (dstnat+10) on prerouting and output.
var (
	prioFilter        = nftables.ChainPriority(-110)
	prioFilterPostNAT = *nftables.ChainPriorityNATDest + 10
)

// The table as data: what Sync wants it to hold. write turns it into
// nftables messages; the hashes say what changed since the last write.

// tableModel is the whole table.
type tableModel struct {
	chains   []*chainModel
	sets     []*setModel
	counters []string // named counter objects, one per service port
	// ports are the service ports by counter name, for the metrics.
	ports map[string]portStat
}

// portStat is what the metrics say of a service port.
type portStat struct {
	ns, svc, port string
	endpoints     int
}

// chainModel is a chain and its rules.
type chainModel struct {
	name  string
	hook  *hookSpec // nil: a regular chain
	rules []ruleModel
	// key, if set, stands for the rules in the hash: what they are made
	// of, cheaper to hash than the rules' expressions; then make, if set,
	// makes the rules when they are written.
	key  []byte
	make func() []ruleModel
}

// hookSpec makes a chain a base chain.
type hookSpec struct {
	typ  nftables.ChainType
	hook *nftables.ChainHook
	prio nftables.ChainPriority
}

// ruleModel is one rule.
type ruleModel struct {
	exprs []expr.Any
}

// setModel is a named set or verdict map and its elements.
type setModel struct {
	name  string
	kind  setKind // the same for a name, always
	elems []nftables.SetElement
}

// setKind is the type of a set.
type setKind struct {
	key       nftables.SetDatatype
	hostOrder bool          // keys in host byte order (numbers of numgen), not network order
	verdicts  bool          // a verdict map
	timeout   time.Duration // >0: a dynamic set of client addresses (affinity) with this timeout
	interval  bool          // ranges of keys: each a start and an end element
}

var (
	destType     = nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeInetProto, nftables.TypeInetService)
	nodePortType = nftables.MustConcatSetType(nftables.TypeInetProto, nftables.TypeInetService)
)

// rule makes a rule of expressions and slices of them, in order.
func rule(parts ...any) ruleModel {
	var r ruleModel
	for _, p := range parts {
		switch p := p.(type) {
		case expr.Any:
			r.exprs = append(r.exprs, p)
		case []expr.Any:
			r.exprs = append(r.exprs, p...)
		default:
			panic("proxy: rule: not an expression")
		}
	}
	return r
}

// builder builds the table model.
type builder struct {
	cfg      Config
	bridgeNF bool
	m        *tableModel
	elems    map[string][]nftables.SetElement
	// clusterIPs are the addresses whose other ports are rejected.
	clusterIPs map[netip.Addr]bool
	// counted are the endpoints with a counter: the first service port
	// of an endpoint counts its traffic.
	counted map[endpointKey]bool
	// lbMaps are the balancing maps made.
	lbMaps map[string]bool
}

type endpointKey struct {
	addr  netip.AddrPort
	proto corev1.Protocol
}

// buildTable is the table for the plan. Without bridgeNF (bridged
// traffic not passing the ip hooks), traffic from the pod CIDR to an
// endpoint on the board is masqueraded, so that replies come back through
// the board and are un-NATed.
func buildTable(cfg Config, bridgeNF bool, pl plan) *tableModel {
	b := &builder{cfg: cfg, bridgeNF: bridgeNF, m: &tableModel{ports: map[string]portStat{}},
		elems: map[string][]nftables.SetElement{}, clusterIPs: map[netip.Addr]bool{}, counted: map[endpointKey]bool{}, lbMaps: map[string]bool{}}
	b.static()
	for _, sp := range pl.ports {
		b.port(sp)
	}
	ips := make([]netip.Addr, 0, len(b.clusterIPs))
	for a := range b.clusterIPs {
		ips = append(ips, a)
	}
	slices.SortFunc(ips, netip.Addr.Compare)
	for _, a := range ips {
		b.elem(setClusterIPs, a.AsSlice(), nil)
	}
	dests := setKind{key: destType, verdicts: true}
	nodePorts := setKind{key: nodePortType, verdicts: true}
	for _, s := range []struct {
		name string
		kind setKind
	}{
		{setServiceIPs, dests}, {setServiceNodePorts, nodePorts},
		{setNoEndpointServices, dests}, {setNoEndpointNodePorts, nodePorts},
		{setClusterIPs, setKind{key: nftables.TypeIPAddr}},
		{setEndpointCounters, dests},
	} {
		b.m.sets = append(b.m.sets, &setModel{name: s.name, kind: s.kind, elems: b.elems[s.name]})
	}
	return b.m
}

func (b *builder) chain(name string, hook *hookSpec, rules ...ruleModel) {
	b.m.chains = append(b.m.chains, &chainModel{name: name, hook: hook, rules: rules})
}

// elem adds key (→ v, for a verdict map) to the set.
func (b *builder) elem(set string, key []byte, v *expr.Verdict) {
	b.elems[set] = append(b.elems[set], nftables.SetElement{Key: key, VerdictData: v})
}

// static makes the chains that do not depend on the Services, and the
// cluster DNS redirect.
func (b *builder) static() {
	nat, filter := nftables.ChainTypeNAT, nftables.ChainTypeFilter
	b.chain(chainNATPrerouting, &hookSpec{nat, nftables.ChainHookPrerouting, *nftables.ChainPriorityNATDest},
		rule(jump(chainServices)))
	b.chain(chainNATOutput, &hookSpec{nat, nftables.ChainHookOutput, *nftables.ChainPriorityNATDest},
		rule(jump(chainServices)))
	b.chain(chainNATPostrouting, &hookSpec{nat, nftables.ChainHookPostrouting, *nftables.ChainPriorityNATSource},
		rule(jump(chainMasquerading)))
	b.chain(chainFilterPrerouting, &hookSpec{filter, nftables.ChainHookPrerouting, prioFilterPostNAT},
		rule(jump(chainCount)))
	b.chain(chainFilterInput, &hookSpec{filter, nftables.ChainHookInput, prioFilter},
		rule(ctStateNew(), jump(chainEndpointsCheck)))
	rejectClusterIPs := rule(ctStateNew(), loadDaddr(1), lookup(setClusterIPs, 1), rejectPort())
	b.chain(chainFilterForward, &hookSpec{filter, nftables.ChainHookForward, prioFilter},
		rule(ctStateNew(), jump(chainEndpointsCheck)), rejectClusterIPs)
	b.chain(chainFilterOutput, &hookSpec{filter, nftables.ChainHookOutput, prioFilterPostNAT},
		rule(jump(chainCount)), rule(ctStateNew(), jump(chainEndpointsCheck)), rejectClusterIPs)

	nodePortDest := slices.Concat(inPrefix(offDaddr, loopback, false), fibLocal(true), nodePortKeyExprs())
	b.chain(chainServices, nil,
		rule(destKeyExprs(), vmap(setServiceIPs, 1)),
		rule(nodePortDest, vmap(setServiceNodePorts, 1)))
	b.chain(chainEndpointsCheck, nil,
		rule(destKeyExprs(), vmap(setNoEndpointServices, 1)),
		rule(nodePortDest, vmap(setNoEndpointNodePorts, 1)))
	b.chain(chainCount, nil,
		rule(ctNotDNAT(), verdict(expr.VerdictReturn)),
		rule(ctDirection(ctDirOriginal), destKeyExprs(), vmap(setEndpointCounters, 1)),
		rule(ctDirection(ctDirReply), srcKeyExprs(), vmap(setEndpointCounters, 1)))
	b.chain(chainReject, nil, rule(rejectPort()))
	b.chain(chainMasquerading, nil,
		rule(markNotSet(), verdict(expr.VerdictReturn)),
		rule(setMark(true)),
		rule(&expr.Masq{FullyRandom: true}))
	b.chain(chainMarkMasq, nil, rule(setMark(false)))

	if d := b.cfg.DNS; d.enabled() {
		var rules []ruleModel
		for _, proto := range []corev1.Protocol{corev1.ProtocolUDP, corev1.ProtocolTCP} {
			rules = append(rules, rule(dnatTo(proto, netip.AddrPortFrom(d.Target, 53))))
			b.elem(setServiceIPs, destKeyBytes(d.ServiceIP, proto, 53), goTo(chainDNS))
		}
		b.chain(chainDNS, nil, rules...)
		b.clusterIPs[d.ServiceIP] = true
	}
}

// portName is the readable name of a service port, with a short hash:
// "default/web/tcp/http-3f2a9c". Namespaces, names and port names are
// validated DNS labels and port names, so that the longest chain name,
// an endpoint's, stays well below nftables' 256 bytes.
func portName(sp *svcPort) string {
	return hashed(sp.ns + "/" + sp.svc + "/" + protoName(sp.proto) + "/" + sp.port)
}

// protoName is proto in nft's lower case (tcp, udp).
func protoName(proto corev1.Protocol) string { return strings.ToLower(string(proto)) }

// hashed is s with a short hash of s: readable, and still unique if it is
// ever cut short.
func hashed(s string) string { return s + "-" + shortHash(s) }

// shortHash is 6 hex digits of the SHA-256 of s.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:3])
}

// epNames are the chain of an endpoint of a service port, and its
// affinity set ("" without session affinity). The set's name holds the
// timeout: another timeout is another set.
func epNames(sp *svcPort, ep endpoint) (chain, affinity string) {
	base := sp.ns + "/" + sp.svc + "/" + protoName(sp.proto) + "/" + sp.port + "/" + ep.addr.String()
	chain = "ep-" + hashed(base)
	if sp.affinity > 0 {
		affinity = "aff-" + base + "-" + shortHash(base+"/"+sp.affinity.String())
	}
	return chain, affinity
}

// portChains are the names of a service port's chains and sets.
type portChains struct {
	sp   *svcPort
	name string // portName
	eps  map[netip.AddrPort]epChains
}

// epChains are the names of an endpoint's chain and affinity set.
type epChains struct {
	chain, affinity string
}

// port makes the chains, sets and map elements of a service port:
//
//	svc-P: traffic to the cluster IP; marks it for masquerade if it comes
//	       from outside the cluster CIDR, then balances over the internal
//	       endpoints (all, or the local ones with internalTrafficPolicy Local)
//	ext-P: traffic to the node port and external IPs: see external
//	cnt-P: the counter of P, reached from the count chain by the
//	       endpoints of connections DNATed to them
//	ep-P/A: an endpoint A: hairpin mark, affinity update, DNAT
func (b *builder) port(sp *svcPort) {
	name := portName(sp)
	pc := &portChains{sp: sp, name: name, eps: map[netip.AddrPort]epChains{}}
	cnt := "cnt-" + name
	b.m.counters = append(b.m.counters, name)
	b.m.ports[name] = portStat{ns: sp.ns, svc: sp.svc, port: sp.port, endpoints: len(sp.all)}
	b.chain(cnt, nil, rule(counterRef(name)))
	b.clusterIPs[sp.clusterIP] = true
	dest := destKeyBytes(sp.clusterIP, sp.proto, sp.servicePort)
	for _, ep := range slices.Concat(sp.all, sp.local) {
		if _, done := pc.eps[ep.addr]; done {
			continue // local and in all
		}
		b.endpoint(pc, ep)
		if k := (endpointKey{ep.addr, sp.proto}); !b.counted[k] {
			b.counted[k] = true
			b.elem(setEndpointCounters, destKeyBytes(ep.addr.Addr(), sp.proto, ep.addr.Port()), goTo(cnt))
		}
	}
	switch internal := sp.internal(); {
	case len(internal) > 0:
		svc := "svc-" + name
		rules := append([]ruleModel{rule(inPrefix(offSaddr, b.cfg.ClusterCIDR, false), jump(chainMarkMasq))},
			b.balance(pc, nil, sp.internalLocal)...)
		b.chain(svc, nil, rules...)
		b.elem(setServiceIPs, dest, goTo(svc))
	case len(sp.all) > 0: // internalTrafficPolicy Local, and none here
		b.elem(setNoEndpointServices, dest, verdict(expr.VerdictDrop))
	default:
		b.elem(setNoEndpointServices, dest, goTo(chainReject))
	}
	if !sp.external() {
		return
	}
	to, nodePorts, dests := goTo(chainReject), setNoEndpointNodePorts, setNoEndpointServices
	if len(sp.all) > 0 {
		ext := "ext-" + name
		b.chain(ext, nil, b.external(pc)...)
		to, nodePorts, dests = goTo(ext), setServiceNodePorts, setServiceIPs
	}
	for _, a := range sp.externalIPs {
		b.elem(dests, destKeyBytes(a, sp.proto, sp.servicePort), to)
	}
	if sp.nodePort != 0 {
		b.elem(nodePorts, nodePortKeyBytes(sp.proto, sp.nodePort), to)
	}
}

// external are the rules of traffic to a node port or an external IP.
// With externalTrafficPolicy Cluster: masquerade, any endpoint. With
// Local, as kube-proxy: pods (the cluster CIDR) and the board's own
// processes (masqueraded) may use any endpoint; the rest, from outside,
// keeps its source address and goes to a local endpoint, or is dropped
// if there is none.
func (b *builder) external(pc *portChains) []ruleModel {
	if !pc.sp.externalLocal {
		return append([]ruleModel{rule(jump(chainMarkMasq))}, b.balance(pc, nil, false)...)
	}
	fromBoard := fibLocal(false)
	rules := b.balance(pc, inPrefix(offSaddr, b.cfg.ClusterCIDR, true), false)
	rules = append(rules, rule(fromBoard, jump(chainMarkMasq)))
	rules = append(rules, b.balance(pc, fromBoard, false)...)
	if len(pc.sp.local) == 0 {
		return append(rules, rule(verdict(expr.VerdictDrop)))
	}
	return append(rules, b.balance(pc, nil, true)...)
}

// balance are the rules that send traffic matching cond to one of the
// endpoints of sp (its local ones, or all; not none): to the one a client
// has stuck to, with session affinity; else to one chosen at random, by
// a map from a random number to the endpoints' chains (all-P or local-P),
// made with the first rule that needs it.
func (b *builder) balance(pc *portChains, cond []expr.Any, local bool) []ruleModel {
	eps, lb := pc.sp.all, "all-"+pc.name
	if local {
		eps, lb = pc.sp.local, "local-"+pc.name
	}
	var rules []ruleModel
	targets := make([]string, len(eps))
	for i, ep := range eps {
		names := pc.eps[ep.addr]
		targets[i] = names.chain
		if names.affinity != "" {
			rules = append(rules, rule(cond, loadSaddr(1), lookup(names.affinity, 1), goTo(names.chain)))
		}
	}
	if len(targets) == 1 {
		return append(rules, rule(cond, goTo(targets[0])))
	}
	if !b.lbMaps[lb] {
		b.lbMaps[lb] = true
		m := &setModel{name: lb, kind: setKind{key: nftables.TypeInteger, hostOrder: true, verdicts: true}}
		for i, t := range targets {
			m.elems = append(m.elems, nftables.SetElement{Key: binaryutil.NativeEndian.PutUint32(uint32(i)), VerdictData: goTo(t)})
		}
		b.m.sets = append(b.m.sets, m)
	}
	return append(rules, rule(cond, &expr.Numgen{Register: 1, Modulus: uint32(len(targets)), Type: unix.NFT_NG_RANDOM}, vmap(lb, 1)))
}

// endpoint makes the chain (and affinity set) of an endpoint of the port.
func (b *builder) endpoint(pc *portChains, ep endpoint) {
	sp := pc.sp
	chain, aff := epNames(sp, ep)
	pc.eps[ep.addr] = epChains{chain, aff}
	var rules []ruleModel
	if a := ep.addr.Addr(); !b.bridgeNF && b.cfg.PodCIDR.Contains(a) {
		// Replies would be bridged past conntrack: make them come back
		// through the board (this covers hairpin traffic too).
		rules = append(rules, rule(inPrefix(offSaddr, b.cfg.PodCIDR, true), jump(chainMarkMasq)))
	} else {
		// Hairpin: a pod reaching itself must not see its own address
		// as the source.
		rules = append(rules, rule(saddrIs(a), jump(chainMarkMasq)))
	}
	if aff != "" {
		b.m.sets = append(b.m.sets, &setModel{name: aff, kind: setKind{key: nftables.TypeIPAddr, timeout: sp.affinity}})
		rules = append(rules, rule(updateSaddr(aff)))
	}
	rules = append(rules, rule(dnatTo(sp.proto, ep.addr)))
	b.chain(chain, nil, rules...)
}

// hash of the chain: its hook and rules.
func (c *chainModel) hash() uint64 {
	h := fnv.New64a()
	if c.hook != nil {
		writeField(h, []byte(c.hook.typ))
		writeField(h, binary.BigEndian.AppendUint32(nil, uint32(*c.hook.hook)))
		writeField(h, binary.BigEndian.AppendUint32(nil, uint32(c.hook.prio)))
	}
	if c.key != nil {
		writeField(h, c.key)
		return h.Sum64()
	}
	for _, r := range c.rules {
		writeField(h, []byte("rule"))
		for _, e := range r.exprs {
			b, err := expr.Marshal(unix.NFPROTO_IPV4, e)
			if err != nil {
				b = []byte(err.Error()) // and the write fails on it
			}
			writeField(h, b)
		}
	}
	return h.Sum64()
}

// hash of the set's elements.
func (s *setModel) hash() uint64 {
	h := fnv.New64a()
	for _, e := range s.elems {
		writeField(h, e.Key)
		if e.IntervalEnd {
			writeField(h, []byte("end"))
		}
		if v := e.VerdictData; v != nil {
			writeField(h, binary.BigEndian.AppendUint32(nil, uint32(v.Kind)))
			writeField(h, []byte(v.Chain))
		}
	}
	return h.Sum64()
}

// writeField writes b with its length, so that fields cannot run into
// each other.
func writeField(h hash.Hash64, b []byte) {
	h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(b))))
	h.Write(b)
}
