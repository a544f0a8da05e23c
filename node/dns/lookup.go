package dns

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

// ttl is the TTL of every cluster record, and the SOA minimum (how long
// negative answers may be cached).
const ttl = 5

// result is the table's answer to one question.
type result struct {
	rcode  int
	answer []dns.RR
	ns     []dns.RR
	extra  []dns.RR
	// auth says the answer comes from the cluster's data (AA).
	auth bool
}

// lookup answers q from the table. ok is false when the name is not the
// table's to answer: outside the domain (or of another class), or a
// reverse name of an address the table does not hold. rot rotates
// the order of addresses, so that clients taking the first one spread over
// all of them.
func (t *table) lookup(q dns.Question, rot uint32) (r result, ok bool) {
	if q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY {
		return r, false
	}
	name := strings.ToLower(q.Name)
	if dns.IsSubDomain(t.domain, name) {
		return t.zone(q, name, rot), true
	}
	if a, ok := reverseAddr(name); ok {
		if names := t.ptr[a]; len(names) > 0 {
			return t.reverse(q, names), true
		}
	}
	return r, false
}

// zone answers a name of the cluster domain.
func (t *table) zone(q dns.Question, name string, rot uint32) result {
	r := result{rcode: dns.RcodeSuccess, auth: true}
	if name == t.domain {
		if want(q, dns.TypeSOA) {
			r.answer = append(r.answer, t.soa())
		}
		if want(q, dns.TypeNS) {
			ns := "ns.dns." + t.domain
			r.answer = append(r.answer, &dns.NS{Hdr: hdr(q.Name, dns.TypeNS), Ns: ns})
			r.extra = t.addrRecords(r.extra, ns, dns.TypeANY, 0)
		}
	} else if n := t.find(name); n != nil {
		r.answer, r.extra = t.records(q, n, rot)
	} else {
		r.rcode = dns.RcodeNameError
	}
	if len(r.answer) == 0 {
		r.ns = []dns.RR{t.soa()}
	}
	return r
}

// find returns the node of a name under the domain, or nil if there is no
// such name. Names under pod.<domain> are made up: <ns>.pod.<domain>
// exists (with nothing) and a-b-c-d.<ns>.pod.<domain> has the address
// a.b.c.d.
func (t *table) find(name string) *node {
	if n := t.names[name]; n != nil {
		return n
	}
	rest, ok := strings.CutSuffix(name, "."+t.podSuffix)
	if !ok {
		return nil
	}
	host, ns, ok := strings.Cut(rest, ".")
	if !ok {
		if checkLabel(rest) != nil {
			return nil
		}
		return &node{} // <ns>.pod.<domain>
	}
	if strings.Contains(ns, ".") || checkLabel(ns) != nil {
		return nil
	}
	a, ok := undashed(host)
	if !ok {
		return nil
	}
	return &node{addrs: []netip.Addr{a}}
}

// records are the answer to q from the node n, and the addresses of the
// targets of SRV records for the additional section.
func (t *table) records(q dns.Question, n *node, rot uint32) (answer, extra []dns.RR) {
	if n.cname != "" {
		// A CNAME is all a name holds: it answers every type.
		return []dns.RR{&dns.CNAME{Hdr: hdr(q.Name, dns.TypeCNAME), Target: n.cname}}, nil
	}
	answer = addrRecords(answer, q.Name, q.Qtype, n.addrs, rot)
	if want(q, dns.TypeSRV) && len(n.srvs) > 0 {
		weight := uint16(max(1, 100/len(n.srvs)))
		for i, s := range n.srvs {
			answer = append(answer, &dns.SRV{Hdr: hdr(q.Name, dns.TypeSRV), Weight: weight, Port: s.port, Target: s.target})
			if i == 0 || n.srvs[i-1].target != s.target {
				extra = t.addrRecords(extra, s.target, dns.TypeANY, 0)
			}
		}
	}
	if want(q, dns.TypeTXT) && n.txt != "" {
		answer = append(answer, &dns.TXT{Hdr: hdr(q.Name, dns.TypeTXT), Txt: []string{n.txt}})
	}
	return answer, extra
}

// addrRecords appends the A and AAAA records (as qtype asks) of the table's
// name to rrs.
func (t *table) addrRecords(rrs []dns.RR, name string, qtype uint16, rot uint32) []dns.RR {
	if n := t.names[name]; n != nil {
		rrs = addrRecords(rrs, name, qtype, n.addrs, rot)
	}
	return rrs
}

// addrRecords appends to rrs an A or AAAA record of owner for every
// address in addrs that qtype asks for, starting at addrs[rot%len].
func addrRecords(rrs []dns.RR, owner string, qtype uint16, addrs []netip.Addr, rot uint32) []dns.RR {
	wantA := qtype == dns.TypeA || qtype == dns.TypeANY
	wantAAAA := qtype == dns.TypeAAAA || qtype == dns.TypeANY
	if !wantA && !wantAAAA {
		return rrs
	}
	start := int(rot % uint32(max(len(addrs), 1)))
	for i := range addrs {
		a := addrs[(i+start)%len(addrs)]
		switch {
		case a.Is4() && wantA:
			rrs = append(rrs, &dns.A{Hdr: hdr(owner, dns.TypeA), A: a.AsSlice()})
		case a.Is6() && wantAAAA:
			rrs = append(rrs, &dns.AAAA{Hdr: hdr(owner, dns.TypeAAAA), AAAA: a.AsSlice()})
		}
	}
	return rrs
}

// reverse answers the reverse name of an address the table holds.
func (t *table) reverse(q dns.Question, names []string) result {
	r := result{rcode: dns.RcodeSuccess, auth: true}
	if want(q, dns.TypePTR) {
		for _, n := range names {
			r.answer = append(r.answer, &dns.PTR{Hdr: hdr(q.Name, dns.TypePTR), Ptr: n})
		}
	}
	return r
}

// soa is the SOA record of the domain.
func (t *table) soa() dns.RR {
	return &dns.SOA{
		Hdr:     hdr(t.domain, dns.TypeSOA),
		Ns:      "ns.dns." + t.domain,
		Mbox:    "hostmaster." + t.domain,
		Serial:  t.serial,
		Refresh: 7200,
		Retry:   1800,
		Expire:  86400,
		Minttl:  ttl,
	}
}

func hdr(name string, rrtype uint16) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: rrtype, Class: dns.ClassINET, Ttl: ttl}
}

// want says whether q asks for records of type rrtype.
func want(q dns.Question, rrtype uint16) bool {
	return q.Qtype == rrtype || q.Qtype == dns.TypeANY
}

// undashed parses the label of a pod name: an address with dashes for its
// dots (IPv4) or colons (IPv6).
func undashed(label string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(strings.ReplaceAll(label, "-", ".")); err == nil && a.Is4() {
		return a, true
	}
	a, err := netip.ParseAddr(strings.ReplaceAll(label, "-", ":"))
	if err != nil || !a.Is6() || a.Zone() != "" || a.Is4In6() {
		return netip.Addr{}, false
	}
	return a, true
}

// reverseAddr parses a reverse name (lower case, with a trailing dot) of
// in-addr.arpa or ip6.arpa into its address.
func reverseAddr(name string) (netip.Addr, bool) {
	if rest, ok := strings.CutSuffix(name, ".in-addr.arpa."); ok {
		labels := strings.Split(rest, ".")
		if len(labels) != 4 {
			return netip.Addr{}, false
		}
		var b [4]byte
		for i, l := range labels {
			v, err := strconv.ParseUint(l, 10, 8)
			if err != nil || (len(l) > 1 && l[0] == '0') {
				return netip.Addr{}, false
			}
			b[3-i] = byte(v)
		}
		return netip.AddrFrom4(b), true
	}
	if rest, ok := strings.CutSuffix(name, ".ip6.arpa."); ok {
		labels := strings.Split(rest, ".")
		if len(labels) != 32 {
			return netip.Addr{}, false
		}
		var b [16]byte
		for i, l := range labels {
			if len(l) != 1 {
				return netip.Addr{}, false
			}
			v, err := strconv.ParseUint(l, 16, 8)
			if err != nil {
				return netip.Addr{}, false
			}
			// labels[0] is the low nibble of the last byte.
			j := 31 - i
			b[j/2] |= byte(v) << (4 * (1 - j%2))
		}
		return netip.AddrFrom16(b), true
	}
	return netip.Addr{}, false
}
