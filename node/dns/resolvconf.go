package dns

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Limits of a pod's resolv.conf, as the kubelet keeps them.
const (
	maxNameservers = 3    // what glibc reads
	maxSearch      = 32   // domains on the search line
	maxSearchChars = 2048 // characters of the search line's domains and the spaces between them
)

// resolvConf is what this package reads of and writes in a resolv.conf.
type resolvConf struct {
	nameservers []netip.Addr
	search      []string
	options     []option
}

// option is one word of an options line: name or name:value.
type option struct {
	name, value string
	hasValue    bool
}

func (o option) String() string {
	if o.hasValue {
		return o.name + ":" + o.value
	}
	return o.name
}

func parseOption(s string) option {
	name, value, ok := strings.Cut(s, ":")
	return option{name: name, value: value, hasValue: ok}
}

// parseResolvConf reads a resolv.conf leniently, as the C library does:
// comments (from # or ;) and lines it does not know are ignored, and so are
// nameserver addresses and search domains that do not parse. The last
// search or domain line wins; options lines add up.
func parseResolvConf(b []byte) resolvConf {
	var rc resolvConf
	for line := range bytes.Lines(b) {
		if i := bytes.IndexAny(line, "#;"); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(string(line))
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "nameserver":
			if a, err := netip.ParseAddr(f[1]); err == nil {
				rc.nameservers = append(rc.nameservers, a)
			}
		case "search", "domain":
			if f[0] == "domain" {
				f = f[:2]
			}
			rc.search = rc.search[:0]
			for _, s := range f[1:] {
				if _, ok := dns.IsDomainName(s); ok && s != "." {
					rc.search = append(rc.search, s)
				}
			}
		case "options":
			for _, s := range f[1:] {
				rc.options = append(rc.options, parseOption(s))
			}
		}
	}
	return rc
}

// UpstreamsFromResolvConf returns the resolvers of a resolv.conf (the
// board's own, usually /etc/resolv.conf) as ip:53, for Config.Upstreams:
// the first three nameservers, as the C library reads them, without
// duplicates. Loopback resolvers (systemd-resolved's 127.0.0.53, ::1) are
// kept: the server runs in the board's own network namespace, where they
// answer. A file with no nameserver line gives none (and outside names get
// SERVFAIL); addresses that do not parse are skipped.
func UpstreamsFromResolvConf(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("dns: upstreams: %w", err)
	}
	var out []string
	for _, a := range compactAddrs(parseResolvConf(b).nameservers) {
		out = append(out, netip.AddrPortFrom(a, 53).String())
	}
	return out, nil
}

// PodResolvConf returns the /etc/resolv.conf of a pod, as the kubelet
// writes it for the pod's dnsPolicy:
//
//   - ClusterFirst (the default) for a pod not on the host's network, and
//     ClusterFirstWithHostNet: clusterDNS as the nameserver, the search
//     domains <ns>.svc.<domain>, svc.<domain>, <domain> then the host's,
//     and options ndots:5;
//   - ClusterFirst on the host's network, and Default: the host's
//     nameservers, search domains and options (host is the board's
//     resolv.conf, read leniently);
//   - None: nothing but spec.dnsConfig.
//
// spec.dnsConfig adds to every policy: its nameservers and search domains
// after the others, without duplicates, and its options, replacing those of
// the same name. As the kubelet does, only the first three nameservers are
// kept, and search domains past 32 or past 2048 characters of the search
// line are dropped.
func PodResolvConf(pod *corev1.Pod, clusterDNS netip.Addr, domain string, host []byte) ([]byte, error) {
	if pod == nil {
		return nil, errors.New("dns: pod resolv.conf: no pod")
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("dns: pod %s/%s: resolv.conf: %s", pod.Namespace, pod.Name, fmt.Sprintf(format, args...))
	}
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = corev1.DNSClusterFirst
	}
	var rc resolvConf
	switch {
	case policy == corev1.DNSClusterFirstWithHostNet || (policy == corev1.DNSClusterFirst && !pod.Spec.HostNetwork):
		if !clusterDNS.IsValid() {
			return nil, fail("dnsPolicy %s: no cluster DNS address", policy)
		}
		domain = strings.ToLower(strings.TrimSuffix(domain, "."))
		if msgs := validation.IsDNS1123Subdomain(domain); len(msgs) > 0 {
			return nil, fail("cluster domain %q: %s", domain, strings.Join(msgs, "; "))
		}
		if err := checkLabel(pod.Namespace); err != nil {
			return nil, fail("namespace: %v", err)
		}
		rc.nameservers = []netip.Addr{clusterDNS}
		rc.search = append([]string{pod.Namespace + ".svc." + domain, "svc." + domain, domain}, parseResolvConf(host).search...)
		rc.options = []option{{name: "ndots", value: "5", hasValue: true}}
	case policy == corev1.DNSClusterFirst || policy == corev1.DNSDefault:
		rc = parseResolvConf(host)
	case policy == corev1.DNSNone:
	default:
		return nil, fail("dnsPolicy %q: want ClusterFirst, ClusterFirstWithHostNet, Default or None", policy)
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		for i, s := range dc.Nameservers {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, fail("spec.dnsConfig.nameservers[%d] %q: not an IP address", i, s)
			}
			rc.nameservers = append(rc.nameservers, a)
		}
		for i, s := range dc.Searches {
			if msgs := validation.IsDNS1123Subdomain(strings.TrimSuffix(s, ".")); len(msgs) > 0 {
				return nil, fail("spec.dnsConfig.searches[%d] %q: %s", i, s, strings.Join(msgs, "; "))
			}
			rc.search = append(rc.search, s)
		}
		for i, o := range dc.Options {
			if o.Name == "" || strings.ContainsAny(o.Name, ": \t\n") {
				return nil, fail("spec.dnsConfig.options[%d]: name %q: want a word with no colon", i, o.Name)
			}
			opt := option{name: o.Name}
			if o.Value != nil {
				if strings.ContainsAny(*o.Value, " \t\n") {
					return nil, fail("spec.dnsConfig.options[%d] %s: value %q has spaces", i, o.Name, *o.Value)
				}
				opt.value, opt.hasValue = *o.Value, true
			}
			rc.options = mergeOption(rc.options, opt)
		}
	}
	if policy == corev1.DNSNone && len(rc.nameservers) == 0 {
		return nil, fail("dnsPolicy None: spec.dnsConfig gives no nameserver")
	}
	rc.nameservers = compactAddrs(rc.nameservers)
	rc.search = limitSearch(rc.search)
	return rc.bytes(), nil
}

// compactAddrs drops repeated addresses and those past maxNameservers.
func compactAddrs(addrs []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, a := range addrs {
		if !slices.Contains(out, a) && len(out) < maxNameservers {
			out = append(out, a)
		}
	}
	return out
}

// mergeOption puts o in place of the option of the same name, or at the
// end.
func mergeOption(opts []option, o option) []option {
	for i := range opts {
		if opts[i].name == o.name {
			opts[i] = o
			return opts
		}
	}
	return append(opts, o)
}

// limitSearch drops repeated search domains, then keeps as many of the
// rest, in order, as fit in maxSearch domains and maxSearchChars. (Domains
// too long for the C library, of more than 253 characters, do not get
// here: they are no domain names.)
func limitSearch(search []string) []string {
	var out []string
	chars := -1 // no space before the first domain
	for _, s := range search {
		if slices.Contains(out, s) {
			continue
		}
		if len(out) == maxSearch || chars+1+len(s) > maxSearchChars {
			break
		}
		out = append(out, s)
		chars += 1 + len(s)
	}
	return out
}

func (rc resolvConf) bytes() []byte {
	var b bytes.Buffer
	for _, a := range rc.nameservers {
		fmt.Fprintf(&b, "nameserver %s\n", a)
	}
	if len(rc.search) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(rc.search, " "))
	}
	if len(rc.options) > 0 {
		words := make([]string, len(rc.options))
		for i, o := range rc.options {
			words[i] = o.String()
		}
		fmt.Fprintf(&b, "options %s\n", strings.Join(words, " "))
	}
	return b.Bytes()
}
