package dns

import (
	"container/list"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// How long answers of upstreams are cached at most.
const (
	maxPositiveTTL = time.Hour
	maxNegativeTTL = 5 * time.Minute
)

// cacheKey is a question as the cache knows it.
type cacheKey struct {
	name   string // lower case
	qtype  uint16
	qclass uint16
	do     bool // DNSSEC records asked for
}

func keyOf(name string, qtype, qclass uint16, do bool) cacheKey {
	return cacheKey{name: strings.ToLower(name), qtype: qtype, qclass: qclass, do: do}
}

// cacheEntry is one answer, packed: a few hundred bytes rather than the
// many small objects of a dns.Msg, and a fresh copy for every hit.
type cacheEntry struct {
	key     cacheKey
	packed  []byte
	stored  time.Time
	expires time.Time
}

// cache is a bounded LRU of answers of upstreams.
type cache struct {
	mu    sync.Mutex
	size  int
	order *list.List // of *cacheEntry, most recently used first
	items map[cacheKey]*list.Element
}

func newCache(size int) *cache {
	return &cache{size: size, order: list.New(), items: make(map[cacheKey]*list.Element)}
}

// get returns a copy of the answer of k with its TTLs lowered by the time
// it spent in the cache, or false if there is none or it has expired.
func (c *cache) get(k cacheKey, now time.Time) (*dns.Msg, bool) {
	c.mu.Lock()
	el, ok := c.items[k]
	if !ok {
		c.mu.Unlock()
		return nil, false
	}
	e := el.Value.(*cacheEntry)
	if !now.Before(e.expires) {
		c.order.Remove(el)
		delete(c.items, k)
		c.mu.Unlock()
		return nil, false
	}
	c.order.MoveToFront(el)
	packed, stored := e.packed, e.stored
	c.mu.Unlock()

	m := new(dns.Msg)
	if err := m.Unpack(packed); err != nil {
		return nil, false
	}
	age := uint32(now.Sub(stored) / time.Second)
	for _, section := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range section {
			h := rr.Header()
			h.Ttl -= min(h.Ttl, age)
		}
	}
	return m, true
}

// put stores m (with no OPT record) as the answer of k for as long as
// cacheTTL allows, dropping the least recently used answer if the cache is
// full.
func (c *cache) put(k cacheKey, m *dns.Msg, now time.Time) {
	d := cacheTTL(m)
	if d <= 0 || c.size == 0 {
		return
	}
	packed, err := m.Pack()
	if err != nil {
		return
	}
	e := &cacheEntry{key: k, packed: packed, stored: now, expires: now.Add(d)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[k]; ok {
		el.Value = e
		c.order.MoveToFront(el)
		return
	}
	c.items[k] = c.order.PushFront(e)
	for c.order.Len() > c.size {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*cacheEntry).key)
	}
}

// len is the number of answers held, expired ones included.
func (c *cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// cacheTTL is how long an answer may be cached: a positive answer for its
// smallest TTL, a negative one (NXDOMAIN or no records) for the minimum of
// the SOA in it (RFC 2308); 0 for what is not to be cached (errors,
// truncated answers, negative answers with no SOA).
func cacheTTL(m *dns.Msg) time.Duration {
	if m.Truncated {
		return 0
	}
	switch {
	case m.Rcode == dns.RcodeSuccess && len(m.Answer) > 0:
		least := uint32(maxPositiveTTL / time.Second)
		for _, section := range [][]dns.RR{m.Answer, m.Ns} {
			for _, rr := range section {
				least = min(least, rr.Header().Ttl)
			}
		}
		return time.Duration(least) * time.Second
	case m.Rcode == dns.RcodeSuccess || m.Rcode == dns.RcodeNameError:
		for _, rr := range m.Ns {
			if soa, ok := rr.(*dns.SOA); ok {
				return min(time.Duration(min(soa.Hdr.Ttl, soa.Minttl))*time.Second, maxNegativeTTL)
			}
		}
	}
	return 0
}
