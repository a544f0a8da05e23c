package nstest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/node/netns"
)

// udpWait is how long Ask waits for a UDP answer before it asks again.
const udpWait = 500 * time.Millisecond

// Listen listens on addr ("tcp", "tcp4"...) inside the namespace at ns;
// the listener is closed at the end of the test.
func Listen(t testing.TB, ns, network, addr string) net.Listener {
	t.Helper()
	var l net.Listener
	if err := netns.Do(ns, func() (err error) {
		l, err = net.Listen(network, addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// ServeTCP listens on addr (IPv4) inside the namespace at ns until the
// end of the test; every connection is told "NAME saw SOURCE", SOURCE
// being its address as the server sees it, and closed.
func ServeTCP(t testing.TB, ns, addr, name string) {
	t.Helper()
	l := Listen(t, ns, "tcp4", addr)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			fmt.Fprintf(c, "%s saw %s\n", name, host)
			c.Close()
		}
	}()
}

// ServeUDP answers every datagram on addr (IPv4) inside the namespace at
// ns as ServeTCP does, until the end of the test.
func ServeUDP(t testing.TB, ns, addr, name string) {
	t.Helper()
	var c net.PacketConn
	if err := netns.Do(ns, func() (err error) {
		c, err = net.ListenPacket("udp4", addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 64)
		for {
			_, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(from.String())
			c.WriteTo(fmt.Appendf(nil, "%s saw %s\n", name, host), from)
		}
	}()
}

// Ask connects from the namespace at ns to addr over network ("tcp" or
// "udp") and returns the first line the server sends ("NAME saw SOURCE"
// from ServeTCP and ServeUDP), trimmed, giving up after timeout. Over UDP
// it sends a datagram and, while no answer comes, asks again (the first
// may be lost while ARP resolves); an error other than a timeout, such as
// ECONNREFUSED, ends it at once.
func Ask(ns, network, addr string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	udp := strings.HasPrefix(network, "udp")
	for {
		c, err := netns.Dialer(ns)(ctx, network, addr)
		if err != nil {
			return "", err
		}
		deadline, _ := ctx.Deadline()
		if udp {
			deadline = time.Now().Add(udpWait)
			c.Write([]byte("hi"))
		}
		c.SetReadDeadline(deadline)
		line, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		var ne net.Error
		if udp && errors.As(err, &ne) && ne.Timeout() && ctx.Err() == nil {
			continue
		}
		return strings.TrimSpace(line), err
	}
}
