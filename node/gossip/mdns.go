package gossip

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/mdns"
	"github.com/miekg/dns"
	"golang.org/x/net/ipv4"
)

// mdnsService is the DNS-SD service boards advertise on their LAN, so a
// freshly flashed board with only the token finds its cluster.
const mdnsService = "_isle._tcp"

// caTXT is the TXT record naming the cluster (by its CA hash), so a board
// on a LAN with two clusters joins the one its token belongs to.
const caTXT = "ca="

// LANInterface returns the interface holding addr if it can carry
// multicast DNS: up, multicast-capable, not loopback. nil means mDNS is
// not possible there (a board on loopback in tests, say).
func LANInterface(addr netip.Addr) (*net.Interface, error) {
	if addr.IsLoopback() {
		return nil, nil
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("gossip: list interfaces: %w", err)
	}
	for i := range ifaces {
		ifc := &ifaces[i]
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			pfx, err := netip.ParsePrefix(a.String())
			if err != nil || pfx.Addr() != addr {
				continue
			}
			if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagMulticast == 0 || ifc.Flags&net.FlagLoopback != 0 {
				return nil, nil
			}
			return ifc, nil
		}
	}
	return nil, fmt.Errorf("gossip: no interface holds %v", addr)
}

// Advertiser answers mDNS queries for the cluster on one interface.
type Advertiser struct{ srv *mdns.Server }

// Advertise announces this board's gossip address on iface, tagged with
// the cluster's CA hash.
func Advertise(iface *net.Interface, name string, addr netip.Addr, port int, caHash string, logger *slog.Logger) (*Advertiser, error) {
	svc, err := mdns.NewMDNSService(name, mdnsService, "", name+".local.", port, []net.IP{addr.AsSlice()}, []string{caTXT + caHash})
	if err != nil {
		return nil, fmt.Errorf("gossip: mDNS service: %w", err)
	}
	srv, err := mdns.NewServer(&mdns.Config{Zone: svc, Iface: iface, Logger: debugLog(logger)})
	if err != nil {
		return nil, fmt.Errorf("gossip: mDNS on %s: %w", iface.Name, err)
	}
	logger.Info("gossip: advertising the cluster by mDNS", "interface", iface.Name, "service", mdnsService)
	return &Advertiser{srv: srv}, nil
}

// Stop stops answering.
func (a *Advertiser) Stop() { _ = a.srv.Shutdown() }

// mdnsGroup is the IPv4 multicast DNS group.
var mdnsGroup = &net.UDPAddr{IP: net.IPv4(224, 0, 0, 251), Port: 5353}

// Browse asks the LAN on iface, once, for boards of the cluster whose CA
// hash is caHash and returns their gossip addresses. The query asks for
// unicast answers (the QU bit), so the board needs no listener on port
// 5353 and no multicast route: it sends from its own address on iface.
func Browse(ctx context.Context, iface *net.Interface, addr netip.Addr, caHash string, wait time.Duration) ([]string, error) {
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: addr.AsSlice()})
	if err != nil {
		return nil, fmt.Errorf("gossip: mDNS query on %s: %w", iface.Name, err)
	}
	defer conn.Close()
	pc := ipv4.NewPacketConn(conn)
	if err := pc.SetMulticastInterface(iface); err != nil {
		return nil, fmt.Errorf("gossip: mDNS query on %s: %w", iface.Name, err)
	}
	_ = pc.SetMulticastTTL(255)
	q := new(dns.Msg)
	q.SetQuestion(mdnsService+".local.", dns.TypePTR)
	q.RecursionDesired = false
	q.Question[0].Qclass |= 1 << 15 // QU: answer me directly
	msg, err := q.Pack()
	if err != nil {
		return nil, fmt.Errorf("gossip: mDNS query: %w", err)
	}
	if _, err := conn.WriteToUDP(msg, mdnsGroup); err != nil {
		return nil, fmt.Errorf("gossip: mDNS query on %s: %w", iface.Name, err)
	}
	deadline := time.Now().Add(wait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetReadDeadline(deadline)
	var answers []dns.RR
	buf := make([]byte, 9000)
	for {
		n, _, err := conn.ReadFromUDP(buf)
		if err != nil {
			break // the deadline: every board had its chance to answer
		}
		var m dns.Msg
		if m.Unpack(buf[:n]) != nil || !m.Response {
			continue
		}
		answers = append(append(answers, m.Answer...), m.Extra...)
	}
	return boardsIn(answers, caHash), nil
}

// boardsIn reads the gossip addresses of the cluster's boards out of mDNS
// records: instances (SRV: host and port) with the cluster's TXT, and the
// hosts' A records.
func boardsIn(rrs []dns.RR, caHash string) []string {
	srv := map[string]*dns.SRV{}
	ours := map[string]bool{}
	hosts := map[string]net.IP{}
	for _, rr := range rrs {
		switch r := rr.(type) {
		case *dns.SRV:
			srv[r.Hdr.Name] = r
		case *dns.TXT:
			ours[r.Hdr.Name] = slices.Contains(r.Txt, caTXT+caHash)
		case *dns.A:
			hosts[r.Hdr.Name] = r.A
		}
	}
	var found []string
	for name, s := range srv {
		if ip := hosts[s.Target]; ours[name] && ip != nil && s.Port != 0 {
			found = append(found, net.JoinHostPort(ip.String(), strconv.Itoa(int(s.Port))))
		}
	}
	slices.Sort(found)
	return slices.Compact(found)
}

// BrowseRetry browses until a board of the cluster answers or ctx ends.
func BrowseRetry(ctx context.Context, iface *net.Interface, addr netip.Addr, caHash string, logger *slog.Logger) ([]string, error) {
	for attempt := 0; ; attempt++ {
		found, err := Browse(ctx, iface, addr, caHash, 2*time.Second)
		if err != nil {
			return nil, err
		}
		if len(found) > 0 {
			logger.Info("gossip: found the cluster by mDNS", "boards", found)
			return found, nil
		}
		if attempt%5 == 0 {
			logger.Warn("gossip: no board of the cluster answered mDNS on the LAN yet; retrying (or give --join ADDR)", "interface", iface.Name)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("gossip: find the cluster by mDNS: %w", ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// FindOnLAN finds boards of the cluster whose CA hash is caHash by mDNS
// on the LAN interface of addr, waiting for one to answer.
func FindOnLAN(ctx context.Context, addr netip.Addr, caHash string, logger *slog.Logger) ([]string, error) {
	iface, err := LANInterface(addr)
	if err != nil {
		return nil, err
	}
	if iface == nil {
		return nil, fmt.Errorf("gossip: no --join given and %v is not on a multicast LAN interface for mDNS: give --join ADDR of any board of the cluster", addr)
	}
	return BrowseRetry(ctx, iface, addr, caHash, logger)
}

// AdvertiseOnLAN advertises the board by mDNS on the LAN interface of
// addr, if it has one, and returns how to stop (nil if not advertising).
func AdvertiseOnLAN(name string, addr netip.Addr, port int, caHash string, logger *slog.Logger) func() {
	iface, err := LANInterface(addr)
	if err != nil || iface == nil {
		logger.Debug("gossip: not advertising by mDNS: no multicast LAN interface", "address", addr, "err", err)
		return nil
	}
	a, err := Advertise(iface, name, addr, port, caHash, logger)
	if err != nil {
		logger.Warn("gossip: not advertising by mDNS", "err", err)
		return nil
	}
	return a.Stop
}

// debugLog turns the mdns package's log lines into slog debug records.
func debugLog(l *slog.Logger) *log.Logger {
	return log.New(writerFunc(func(p []byte) (int, error) {
		l.Debug("gossip: " + strings.TrimPrefix(string(bytes.TrimSpace(p)), "[INFO] "))
		return len(p), nil
	}), "", 0)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
