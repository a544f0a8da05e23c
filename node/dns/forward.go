package dns

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

const (
	// upstreamTimeout is how long an upstream has to answer before the
	// next one is asked.
	upstreamTimeout = 2 * time.Second
	// ednsSize is the UDP payload size this server offers and asks for
	// (the size of DNS flag day 2020: no fragments on common paths).
	ednsSize = 1232
	// warnEvery spaces the warnings about failing upstreams.
	warnEvery = time.Minute
)

// errNoUpstream is the error of resolving an outside name with no upstream.
var errNoUpstream = errors.New("no upstream resolver configured")

// forwarder asks the upstreams, through the cache, what the table does not
// answer.
type forwarder struct {
	upstreams []string
	cache     *cache
	udp, tcp  *dns.Client
	m         *metrics
	now       func() time.Time
	log       *slog.Logger

	mu     sync.Mutex
	warned time.Time // last warning about all upstreams failing
}

func newForwarder(upstreams []string, c *cache, m *metrics, log *slog.Logger) *forwarder {
	return &forwarder{
		upstreams: upstreams,
		cache:     c,
		udp:       &dns.Client{Net: "udp", Timeout: upstreamTimeout},
		tcp:       &dns.Client{Net: "tcp", Timeout: upstreamTimeout},
		m:         m,
		now:       time.Now,
		log:       log,
	}
}

// resolve returns the answer to a question from the cache or from the
// first upstream that gives one: a message of the caller's own, with no
// OPT record. fromCache says where it came from.
func (f *forwarder) resolve(name string, qtype, qclass uint16, do bool) (m *dns.Msg, fromCache bool, err error) {
	k := keyOf(name, qtype, qclass, do)
	if m, ok := f.cache.get(k, f.now()); ok {
		f.m.cacheHits.Inc()
		return m, true, nil
	}
	f.m.cacheMisses.Inc()
	if len(f.upstreams) == 0 {
		return nil, false, fmt.Errorf("dns: forward %s: %w", name, errNoUpstream)
	}
	q := new(dns.Msg)
	q.SetQuestion(name, qtype)
	q.Question[0].Qclass = qclass
	q.SetEdns0(ednsSize, do)
	var errs []error
	for _, u := range f.upstreams {
		m, err := f.exchange(q, u)
		if err != nil {
			f.m.forwardErrors.Inc()
			f.log.Debug("dns: upstream failed", "upstream", u, "name", name, "err", err)
			errs = append(errs, err)
			continue
		}
		f.cache.put(k, m, f.now())
		return m, false, nil
	}
	err = fmt.Errorf("dns: forward %s %s: %w", name, dns.TypeToString[qtype], errors.Join(errs...))
	f.mu.Lock()
	if now := f.now(); now.Sub(f.warned) >= warnEvery {
		f.warned = now
		f.log.Warn("dns: every upstream failed; outside names get SERVFAIL", "err", err)
	}
	f.mu.Unlock()
	return nil, false, err
}

// exchange asks one upstream over UDP, and over TCP if the answer was
// truncated. Answers other than NOERROR and NXDOMAIN, and answers to
// another question, are errors. The OPT record is dropped from the answer.
func (f *forwarder) exchange(q *dns.Msg, upstream string) (*dns.Msg, error) {
	m, _, err := f.udp.Exchange(q, upstream)
	if err == nil && m.Truncated {
		m, _, err = f.tcp.Exchange(q, upstream)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", upstream, err)
	}
	want := q.Question[0]
	if len(m.Question) != 1 || !strings.EqualFold(m.Question[0].Name, want.Name) ||
		m.Question[0].Qtype != want.Qtype || m.Question[0].Qclass != want.Qclass {
		return nil, fmt.Errorf("%s: answered another question", upstream)
	}
	if m.Rcode != dns.RcodeSuccess && m.Rcode != dns.RcodeNameError {
		return nil, fmt.Errorf("%s: answered %s", upstream, dns.RcodeToString[m.Rcode])
	}
	extra := m.Extra[:0]
	for _, rr := range m.Extra {
		if rr.Header().Rrtype != dns.TypeOPT {
			extra = append(extra, rr)
		}
	}
	m.Extra = extra
	return m, nil
}
