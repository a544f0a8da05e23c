package dns

import (
	"testing"
	"time"

	"github.com/miekg/dns"
)

func answerMsg(t *testing.T, rcode int, rrs ...string) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion("example.org.", dns.TypeA)
	m.Response, m.Rcode = true, rcode
	for _, s := range rrs {
		rr, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := rr.(*dns.SOA); ok {
			m.Ns = append(m.Ns, rr)
		} else {
			m.Answer = append(m.Answer, rr)
		}
	}
	return m
}

func TestCacheTTL(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  *dns.Msg
		want time.Duration
	}{
		{"least TTL of the answer", answerMsg(t, dns.RcodeSuccess, "example.org. 60 IN CNAME b.example.org.", "b.example.org. 30 IN A 192.0.2.1"), 30 * time.Second},
		{"capped at an hour", answerMsg(t, dns.RcodeSuccess, "example.org. 86400 IN A 192.0.2.1"), time.Hour},
		{"TTL 0 is not cached", answerMsg(t, dns.RcodeSuccess, "example.org. 0 IN A 192.0.2.1"), 0},
		{"NXDOMAIN for the SOA minimum", answerMsg(t, dns.RcodeNameError, "example.org. 900 IN SOA ns.example.org. h.example.org. 1 2 3 4 120"), 120 * time.Second},
		{"NODATA for the SOA TTL if less", answerMsg(t, dns.RcodeSuccess, "example.org. 10 IN SOA ns.example.org. h.example.org. 1 2 3 4 120"), 10 * time.Second},
		{"negative capped at 5 minutes", answerMsg(t, dns.RcodeNameError, "example.org. 3600 IN SOA ns.example.org. h.example.org. 1 2 3 4 3600"), 5 * time.Minute},
		{"negative without SOA is not cached", answerMsg(t, dns.RcodeNameError), 0},
		{"SERVFAIL is not cached", answerMsg(t, dns.RcodeServerFailure), 0},
		{"truncated is not cached", func() *dns.Msg {
			m := answerMsg(t, dns.RcodeSuccess, "example.org. 60 IN A 192.0.2.1")
			m.Truncated = true
			return m
		}(), 0},
	} {
		if got := cacheTTL(tc.msg); got != tc.want {
			t.Errorf("%s: cacheTTL %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestCacheAgesAndExpires(t *testing.T) {
	c := newCache(10)
	now := time.Unix(1000, 0)
	k := keyOf("Example.ORG.", dns.TypeA, dns.ClassINET, false)
	c.put(k, answerMsg(t, dns.RcodeSuccess, "example.org. 60 IN A 192.0.2.1", "example.org. 3600 IN SOA ns.example.org. h.example.org. 1 2 3 4 5"), now)

	m, ok := c.get(keyOf("example.org.", dns.TypeA, dns.ClassINET, false), now.Add(25*time.Second))
	if !ok {
		t.Fatal("no hit for the same name in another case")
	}
	if ttl := m.Answer[0].Header().Ttl; ttl != 35 {
		t.Errorf("TTL after 25 s: %d, want 35", ttl)
	}
	m.Answer[0].Header().Ttl = 9999 // a copy: the cache does not see this
	if m, _ := c.get(k, now.Add(30*time.Second)); m.Answer[0].Header().Ttl != 30 {
		t.Errorf("TTL after 30 s: %d, want 30", m.Answer[0].Header().Ttl)
	}
	if _, ok := c.get(keyOf("example.org.", dns.TypeA, dns.ClassINET, true), now); ok {
		t.Error("hit for a question with DO set")
	}
	if _, ok := c.get(k, now.Add(60*time.Second)); ok {
		t.Error("hit after the TTL")
	}
	if n := c.len(); n != 0 {
		t.Errorf("%d entries after expiry, want 0", n)
	}
}

func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	c := newCache(2)
	now := time.Unix(1000, 0)
	key := func(name string) cacheKey { return keyOf(name, dns.TypeA, dns.ClassINET, false) }
	msg := answerMsg(t, dns.RcodeSuccess, "example.org. 60 IN A 192.0.2.1")
	c.put(key("a."), msg, now)
	c.put(key("b."), msg, now)
	c.get(key("a."), now) // b is now the least recently used
	c.put(key("c."), msg, now)
	if _, ok := c.get(key("b."), now); ok {
		t.Error("b still cached")
	}
	for _, name := range []string{"a.", "c."} {
		if _, ok := c.get(key(name), now); !ok {
			t.Errorf("%s evicted", name)
		}
	}
	if n := c.len(); n != 2 {
		t.Errorf("%d entries, want 2", n)
	}
}
