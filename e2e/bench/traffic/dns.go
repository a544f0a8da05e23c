package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/miekg/dns"

	"github.com/isle-cluster/isle/node/netns"
)

// The cluster DNS and the name the bench asks it: the Service's A record.
var clusterDNS = netip.MustParseAddrPort("10.43.0.10:53")

const serviceName = "hello.default.svc.cluster.local."

// dnsTimeout bounds one query: the server answers from memory.
const dnsTimeout = 2 * time.Second

// measureDNS runs trials runs of clients querying the cluster DNS from the
// client board for the Service's A record, for d each.
func measureDNS(ctx context.Context, a app, trials, clients int, d time.Duration) ([]trial, error) {
	var out []trial
	for i := range trials {
		t, err := load(ctx, clients, d, func() (client, error) {
			return newDNSClient(ctx, a.clientNS, clusterDNS, serviceName, a.clusterIP)
		})
		if err != nil {
			return nil, err
		}
		slog.Info("dns", "run", i+1, "queries/s", int(t.rate()), "p50", t.p50, "p99", t.p99, "errors", t.errors)
		out = append(out, t)
	}
	return out, nil
}

// dnsClient sends A queries for one name over a UDP socket of its own and
// checks that the answer is want.
type dnsClient struct {
	conn  net.Conn
	name  string
	want  netip.Addr
	query []byte // packed; the ID (the first two bytes) changes per query
	id    uint16
	buf   []byte
	msg   dns.Msg
}

func newDNSClient(ctx context.Context, ns string, server netip.AddrPort, name string, want netip.Addr) (*dnsClient, error) {
	q := new(dns.Msg)
	q.SetQuestion(name, dns.TypeA)
	packed, err := q.Pack()
	if err != nil {
		return nil, fmt.Errorf("dns: query for %s: %w", name, err)
	}
	conn, err := netns.Dialer(ns)(ctx, "udp", server.String())
	if err != nil {
		return nil, fmt.Errorf("dns: %w", err)
	}
	return &dnsClient{conn: conn, name: name, want: want, query: packed, id: q.Id, buf: make([]byte, dns.MaxMsgSize)}, nil
}

func (c *dnsClient) do(context.Context) error {
	c.id++
	binary.BigEndian.PutUint16(c.query, c.id)
	if err := c.conn.SetDeadline(time.Now().Add(dnsTimeout)); err != nil {
		return fmt.Errorf("dns: %w", err)
	}
	if _, err := c.conn.Write(c.query); err != nil {
		return fmt.Errorf("dns: query %s: %w", c.name, err)
	}
	for {
		n, err := c.conn.Read(c.buf)
		if err != nil {
			return fmt.Errorf("dns: query %s: %w", c.name, err)
		}
		if n >= 2 && binary.BigEndian.Uint16(c.buf) != c.id {
			continue // the late answer of a query that timed out
		}
		if err := c.msg.Unpack(c.buf[:n]); err != nil {
			return fmt.Errorf("dns: answer for %s: %w", c.name, err)
		}
		return checkDNSAnswer(&c.msg, c.want)
	}
}

func (c *dnsClient) close() { c.conn.Close() }

// checkDNSAnswer checks that m answers with want alone.
func checkDNSAnswer(m *dns.Msg, want netip.Addr) error {
	if m.Rcode != dns.RcodeSuccess {
		return fmt.Errorf("dns: answer %s, want NOERROR", dns.RcodeToString[m.Rcode])
	}
	if len(m.Answer) != 1 {
		return fmt.Errorf("dns: %d answer records, want one A %s", len(m.Answer), want)
	}
	a, ok := m.Answer[0].(*dns.A)
	if !ok {
		return fmt.Errorf("dns: answer %s, want A %s", m.Answer[0], want)
	}
	if got, _ := netip.AddrFromSlice(a.A); got.Unmap() != want {
		return fmt.Errorf("dns: answer A %s, want A %s", a.A, want)
	}
	return nil
}
