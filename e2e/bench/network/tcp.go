package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/isle-cluster/isle/e2e/bench/islandbench"
	"github.com/isle-cluster/isle/node/netns"
)

const (
	// chunk is the size of one write of a throughput run, and of the
	// server's reads.
	chunk = 128 << 10
	// roundTrips is how many 1-byte round trips the latency measure makes
	// over each path, in blocks of block, the paths taking turns.
	roundTrips, block = 2000, 100
)

// The first byte of a connection to the server says what it is for.
const (
	modeSink = 's' // the server reads to EOF, then answers the byte count (8 bytes, big endian)
	modeEcho = 'e' // the server echoes every byte back
)

// pathResult is what was measured over one path.
type pathResult struct {
	name  string
	gbits []float64       // one throughput run each, Gbit/s
	rtts  []time.Duration // round trips
}

// measure runs the throughput and latency measures over every path, the
// paths taking turns (and turns about which goes first).
func measure(ctx context.Context, paths []pathPair, trials int, d time.Duration) ([]pathResult, error) {
	res := make([]pathResult, len(paths))
	for i, p := range paths {
		srv, err := listen(p.serverNS, p.server)
		if err != nil {
			return nil, err
		}
		defer srv.close()
		res[i].name = p.name
	}
	for t := range trials {
		for _, i := range islandbench.Turns(len(paths), t) {
			g, err := throughput(ctx, paths[i], d)
			if err != nil {
				return nil, err
			}
			slog.Info("throughput", "path", paths[i].name, "run", t+1, "gbit/s", fmt.Sprintf("%.2f", g))
			res[i].gbits = append(res[i].gbits, g)
		}
	}
	conns := make([]net.Conn, len(paths))
	for i, p := range paths {
		c, err := dial(ctx, p, modeEcho, time.Minute)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		conns[i] = c
	}
	for b := range roundTrips / block {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("tcp: %w", err)
		}
		for _, i := range islandbench.Turns(len(paths), b) {
			rtts, err := pingPong(conns[i], block)
			if err != nil {
				return nil, fmt.Errorf("tcp: round trips over the %s path: %w", paths[i].name, err)
			}
			res[i].rtts = append(res[i].rtts, rtts...)
		}
	}
	return res, nil
}

// throughput sends chunks over one connection for d and returns the bytes
// the server received over the time until it said how many, in Gbit/s.
func throughput(ctx context.Context, p pathPair, d time.Duration) (float64, error) {
	c, err := dial(ctx, p, modeSink, d+time.Minute)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	buf := make([]byte, chunk)
	began := time.Now()
	for time.Since(began) < d {
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("tcp: %w", err)
		}
		if _, err := c.Write(buf); err != nil {
			return 0, fmt.Errorf("tcp: throughput over the %s path: %w", p.name, err)
		}
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return 0, fmt.Errorf("tcp: throughput over the %s path: %w", p.name, err)
	}
	var count [8]byte
	if _, err := io.ReadFull(c, count[:]); err != nil {
		return 0, fmt.Errorf("tcp: throughput over the %s path: the server's byte count: %w", p.name, err)
	}
	took := time.Since(began)
	return float64(binary.BigEndian.Uint64(count[:])) * 8 / took.Seconds() / 1e9, nil
}

// dial connects from the path's client namespace to its server, for
// mode, with a deadline of d from now.
func dial(ctx context.Context, p pathPair, mode byte, d time.Duration) (net.Conn, error) {
	c, err := netns.Dialer(p.clientNS)(ctx, "tcp", p.server.String())
	if err != nil {
		return nil, fmt.Errorf("tcp: the %s path to %v: %w", p.name, p.server, err)
	}
	c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte{mode}); err != nil {
		c.Close()
		return nil, fmt.Errorf("tcp: the %s path to %v: %w", p.name, p.server, err)
	}
	return c, nil
}

// pingPong makes n 1-byte round trips over c to an echoing server.
func pingPong(c net.Conn, n int) ([]time.Duration, error) {
	out := make([]time.Duration, n)
	b := []byte{0}
	for i := range out {
		began := time.Now()
		if _, err := c.Write(b); err != nil {
			return nil, err
		}
		if _, err := io.ReadFull(c, b); err != nil {
			return nil, err
		}
		out[i] = time.Since(began)
	}
	return out, nil
}

// server serves the bench's connections from a listener made in a
// network namespace; its connections stay in that namespace.
type server struct {
	l  net.Listener
	wg sync.WaitGroup
}

func listen(ns string, addr netip.AddrPort) (*server, error) {
	var l net.Listener
	err := netns.Do(ns, func() (err error) {
		l, err = net.Listen("tcp", addr.String())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("tcp: listen on %v in %s: %w", addr, ns, err)
	}
	s := &server{l: l}
	s.wg.Add(1)
	go s.serve()
	return s, nil
}

func (s *server) serve() {
	defer s.wg.Done()
	for {
		c, err := s.l.Accept()
		if err != nil {
			return // closed
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.Close()
			if err := handle(c); err != nil {
				slog.Warn("tcp server", "addr", s.l.Addr(), "err", err)
			}
		}()
	}
}

// close stops the server once its connections have ended (the clients
// close them).
func (s *server) close() {
	s.l.Close()
	s.wg.Wait()
}

func handle(c net.Conn) error {
	var mode [1]byte
	if _, err := io.ReadFull(c, mode[:]); err != nil {
		return err
	}
	switch mode[0] {
	case modeSink:
		buf := make([]byte, chunk)
		var n uint64
		for {
			k, err := c.Read(buf)
			n += uint64(k)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
		}
		_, err := c.Write(binary.BigEndian.AppendUint64(nil, n))
		return err
	case modeEcho:
		var buf [64]byte
		for {
			k, err := c.Read(buf[:])
			if k > 0 {
				if _, werr := c.Write(buf[:k]); werr != nil {
					return werr
				}
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("unknown mode %q", mode[0])
}
