package vip

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/isle-cluster/isle/node/netns"
	"github.com/isle-cluster/isle/node/netns/nstest"
)

// TestDrain holds back new connections to the floating address, not
// those already made, nor new ones to the board's own address, until
// undone; Release removes a drain left behind.
func TestDrain(t *testing.T) {
	nstest.RequireRoot(t, "network namespaces and nftables")
	nstest.RequireNetfilter(t)
	dir := t.TempDir()
	ns, lan := nstest.NS(t, dir, "board"), nstest.NS(t, dir, "lan")
	h := nstest.Handle(t, ns)
	nstest.Veth(t, h, "lan0", lan)
	board, vip := netip.MustParsePrefix("10.99.0.2/24"), netip.MustParsePrefix("10.99.0.10/24")
	nstest.AddrUp(t, h, "lan0", board)
	nstest.AddrUp(t, h, "lan0", vip)
	c := Config{VIP: vip.Addr(), Board: board.Addr(), Logger: nil}

	var lis net.Listener
	if err := netns.Do(ns, func() (err error) { lis, err = net.Listen("tcp", ":8080"); return err }); err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() { b := make([]byte, 1); c.Read(b); c.Write(b); c.Close() }()
		}
	}()
	dial := netns.Dialer(ns)
	connect := func(addr netip.Addr) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
		defer cancel()
		return dial(ctx, "tcp", netip.AddrPortFrom(addr, 8080).String())
	}
	held, err := connect(vip.Addr())
	if err != nil {
		t.Fatalf("a connection to the floating address before the drain: %v", err)
	}
	defer held.Close()

	var undo func() error
	if err := netns.Do(ns, func() (err error) { undo, err = Drain(c); return err }); err != nil {
		t.Fatal(err)
	}
	if conn, err := connect(vip.Addr()); err == nil {
		conn.Close()
		t.Error("a new connection to the floating address while draining was made")
	}
	if conn, err := connect(board.Addr()); err != nil {
		t.Errorf("a new connection to the board's own address while draining: %v", err)
	} else {
		conn.Close()
	}
	// The connection made before goes on.
	if _, err := held.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	held.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := held.Read(make([]byte, 1)); err != nil {
		t.Errorf("the connection made before the drain: %v", err)
	}
	if err := netns.Do(ns, undo); err != nil {
		t.Fatal(err)
	}
	if conn, err := connect(vip.Addr()); err != nil {
		t.Errorf("a new connection to the floating address after undo: %v", err)
	} else {
		conn.Close()
	}

	// A drain left by a board that crashed: Release removes it.
	if err := netns.Do(ns, func() (err error) { _, err = Drain(c); return err }); err != nil {
		t.Fatal(err)
	}
	if err := netns.Do(ns, func() error { return Release(c) }); err != nil {
		t.Fatal(err)
	}
	if conn, err := connect(board.Addr()); err != nil {
		t.Fatalf("after Release: %v", err)
	} else {
		conn.Close()
	}
	tables, err := nstest.NFTables(t, ns).ListTables()
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		if tb.Name == drainTable {
			t.Error("Release left the drain's table")
		}
	}
}
