package dns

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// maxChase is how many CNAMEs an answer follows at most.
const maxChase = 8

// Server is the cluster DNS server of a board. New makes it, Start serves,
// Update changes the records, Close stops it.
type Server struct {
	cfg     Config
	log     *slog.Logger
	m       *metrics
	fwd     *forwarder
	nsAddrs []netip.Addr // the addresses of ns.dns.<domain>
	now     func() time.Time

	table atomic.Pointer[table]
	rot   atomic.Uint32 // turns the order of addresses in answers

	mu      sync.Mutex
	started bool
	closed  bool
	servers []*dns.Server
	serving sync.WaitGroup
}

// New checks cfg and makes a Server with no Services: until the first
// Update, names of the cluster domain other than its own get NXDOMAIN.
func New(cfg Config) (*Server, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	c := newCache(cfg.CacheSize)
	m := newMetrics(c)
	s := &Server{cfg: cfg, log: cfg.Logger, m: m, now: time.Now}
	s.fwd = newForwarder(cfg.Upstreams, c, m, cfg.Logger)
	for _, a := range cfg.Addrs {
		if ip := netip.MustParseAddrPort(a).Addr(); !ip.IsUnspecified() {
			s.nsAddrs = append(s.nsAddrs, ip.WithZone(""))
		}
	}
	s.Update(nil, nil)
	return s, nil
}

// Start binds a UDP and a TCP socket on every address of Config.Addrs and
// serves them in the background. It fails, naming the address, if one
// cannot be bound; then nothing is left bound.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.closed {
		return errors.New("dns: start: already started or closed")
	}
	var servers []*dns.Server
	for _, a := range s.cfg.Addrs {
		pc, l, err := listenPair(a)
		if err != nil {
			closeAll(servers)
			return err
		}
		servers = append(servers, s.newServer(pc, nil), s.newServer(nil, l))
	}
	var up sync.WaitGroup
	for _, srv := range servers {
		up.Add(1)
		s.serving.Add(1)
		notify := sync.OnceFunc(up.Done)
		srv.NotifyStartedFunc = notify
		go func() {
			defer s.serving.Done()
			defer notify()
			if err := srv.ActivateAndServe(); err != nil {
				s.log.Error("dns: serving stopped", "addr", listenAddr(srv), "err", err)
			}
		}()
	}
	up.Wait()
	s.servers, s.started = servers, true
	s.log.Info("dns: serving", "addrs", s.cfg.Addrs, "domain", s.cfg.Domain, "upstreams", s.cfg.Upstreams)
	return nil
}

func (s *Server) newServer(pc net.PacketConn, l net.Listener) *dns.Server {
	return &dns.Server{PacketConn: pc, Listener: l, Handler: dns.HandlerFunc(s.serveDNS), MsgAcceptFunc: s.accept}
}

// closeAll closes the sockets of servers that have not started.
func closeAll(servers []*dns.Server) {
	for _, srv := range servers {
		if srv.PacketConn != nil {
			srv.PacketConn.Close()
		}
		if srv.Listener != nil {
			srv.Listener.Close()
		}
	}
}

func listenAddr(srv *dns.Server) string {
	if srv.PacketConn != nil {
		return "udp " + srv.PacketConn.LocalAddr().String()
	}
	return "tcp " + srv.Listener.Addr().String()
}

// Update swaps in the records of svcs and of the EndpointSlices of the
// headless ones among them (slices of other services are ignored). The
// table is built off to the side; queries see the old one or the new one,
// whole. Calls should not overlap: the last to finish wins.
func (s *Server) Update(svcs []*corev1.Service, slices []*discoveryv1.EndpointSlice) {
	s.table.Store(buildTable(s.cfg.Domain, uint32(s.now().Unix()), s.nsAddrs, svcs, slices, s.log))
}

// Collector returns the server's metrics, for the caller to register:
// queries by type and response code, cache hits and misses, forwarding
// errors, the answer time, and the size of the cache.
func (s *Server) Collector() prometheus.Collector {
	return s.m
}

// Close stops serving, waits for the queries under way, and releases the
// sockets. A closed Server cannot start again.
func (s *Server) Close() error {
	s.mu.Lock()
	servers := s.servers
	s.servers, s.closed = nil, true
	s.mu.Unlock()
	var errs []error
	for _, srv := range servers {
		if err := srv.Shutdown(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", listenAddr(srv), err))
		}
	}
	s.serving.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("dns: close: %w", err)
	}
	return nil
}

// accept rejects, before reading it whole, what is no plain query: answers
// are dropped, other opcodes get NOTIMP, and queries with other than one
// question (or records where a query has none) get FORMERR.
func (s *Server) accept(h dns.Header) dns.MsgAcceptAction {
	const qr = 1 << 15
	if h.Bits&qr != 0 {
		return dns.MsgIgnore
	}
	if opcode := int(h.Bits>>11) & 0xF; opcode != dns.OpcodeQuery {
		s.m.count(0, dns.RcodeNotImplemented, "", 0)
		return dns.MsgRejectNotImplemented
	}
	if h.Qdcount != 1 || h.Ancount != 0 || h.Nscount != 0 || h.Arcount > 2 {
		s.m.count(0, dns.RcodeFormatError, "", 0)
		return dns.MsgReject
	}
	return dns.MsgAccept
}

func (s *Server) serveDNS(w dns.ResponseWriter, req *dns.Msg) {
	start := time.Now()
	resp, source := s.answer(req)
	var qtype uint16
	if len(req.Question) == 1 {
		qtype = req.Question[0].Qtype
	}
	// Counted before the answer leaves, so that a client holding it finds
	// it on /metrics.
	s.m.count(qtype, resp.Rcode, source, time.Since(start))
	s.write(w, req, resp)
}

// answer makes the response to req, and says where it came from.
func (s *Server) answer(req *dns.Msg) (*dns.Msg, string) {
	resp := new(dns.Msg)
	resp.SetReply(req)
	resp.RecursionAvailable = true
	if len(req.Question) != 1 { // accept lets none through; answer needs one
		resp.Rcode = dns.RcodeFormatError
		return resp, sourceError
	}
	opt := req.IsEdns0()
	if opt != nil && opt.Version() != 0 {
		resp.Rcode = dns.RcodeBadVers
		return resp, sourceError
	}
	q := req.Question[0]
	if q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR {
		resp.Rcode = dns.RcodeRefused
		return resp, sourceError
	}
	do := opt != nil && opt.Do()
	t := s.table.Load()
	if r, ok := t.lookup(q, s.rot.Add(1)); ok {
		resp.Authoritative = r.auth
		resp.Rcode, resp.Answer, resp.Ns, resp.Extra = r.rcode, r.answer, r.ns, r.extra
		s.chase(t, resp, q, do)
		return resp, sourceCluster
	}
	m, fromCache, err := s.fwd.resolve(q.Name, q.Qtype, q.Qclass, do)
	if err != nil {
		resp.Rcode = dns.RcodeServerFailure
		return resp, sourceError
	}
	resp.Rcode, resp.Answer, resp.Ns, resp.Extra = m.Rcode, m.Answer, m.Ns, m.Extra
	resp.AuthenticatedData = do && m.AuthenticatedData
	if fromCache {
		return resp, sourceCache
	}
	return resp, sourceForward
}

// chase follows the CNAME an answer from the table ends with, when the
// question asked for other records: through the table for names of the
// cluster, through the upstreams (which follow the rest) for others. If an
// upstream fails, the answer stays the CNAME, for the client to follow.
func (s *Server) chase(t *table, resp *dns.Msg, q dns.Question, do bool) {
	if q.Qtype == dns.TypeCNAME || q.Qtype == dns.TypeANY {
		return
	}
	for range maxChase {
		if resp.Rcode != dns.RcodeSuccess || len(resp.Answer) == 0 {
			return
		}
		c, ok := resp.Answer[len(resp.Answer)-1].(*dns.CNAME)
		if !ok {
			return
		}
		next := dns.Question{Name: c.Target, Qtype: q.Qtype, Qclass: q.Qclass}
		if r, ok := t.lookup(next, s.rot.Add(1)); ok {
			resp.Rcode, resp.Ns = r.rcode, r.ns
			resp.Answer = append(resp.Answer, r.answer...)
			resp.Extra = append(resp.Extra, r.extra...)
			continue
		}
		m, _, err := s.fwd.resolve(next.Name, next.Qtype, next.Qclass, do)
		if err != nil {
			return
		}
		resp.Rcode, resp.Ns = m.Rcode, m.Ns
		resp.Answer = append(resp.Answer, m.Answer...)
		return
	}
}

// listenPair listens on a (host:port) over UDP and TCP. Port 0 is one free
// port for both: the one UDP got, tried again with another when TCP finds
// it taken.
func listenPair(a string) (net.PacketConn, net.Listener, error) {
	ap := netip.MustParseAddrPort(a)
	for try := 1; ; try++ {
		pc, err := net.ListenPacket("udp", a)
		if err != nil {
			return nil, nil, fmt.Errorf("dns: listen udp %s: %w", a, err)
		}
		tcpAddr := a
		if ap.Port() == 0 {
			tcpAddr = netip.AddrPortFrom(ap.Addr(), uint16(pc.LocalAddr().(*net.UDPAddr).Port)).String()
		}
		l, err := net.Listen("tcp", tcpAddr)
		if err == nil {
			return pc, l, nil
		}
		pc.Close()
		if ap.Port() != 0 || try == 10 {
			return nil, nil, fmt.Errorf("dns: listen tcp %s: %w", tcpAddr, err)
		}
	}
}

// write sends resp, truncated (with TC set) to what the client takes over
// UDP: 512 bytes, or the size of its EDNS0 record up to ednsSize.
func (s *Server) write(w dns.ResponseWriter, req, resp *dns.Msg) {
	size := dns.MaxMsgSize
	opt := req.IsEdns0()
	if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
		size = dns.MinMsgSize
		if opt != nil {
			size = min(max(int(opt.UDPSize()), dns.MinMsgSize), ednsSize)
		}
	}
	if opt != nil {
		resp.SetEdns0(ednsSize, opt.Do())
	}
	resp.Truncate(size)
	if err := w.WriteMsg(resp); err != nil {
		s.log.Debug("dns: write answer", "client", w.RemoteAddr().String(), "err", err)
	}
}
