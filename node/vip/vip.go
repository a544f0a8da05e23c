// Package vip holds the cluster's floating API address on the Raft
// leader: the address is added to the board's LAN interface and announced
// by gratuitous ARP, so switches and clients move to the new leader at
// once and one kubeconfig address survives the loss of any server.
package vip

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"syscall"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/vishvananda/netlink"
)

// Config says which address floats and where.
type Config struct {
	// VIP is the floating address (IPv4, on the board's LAN).
	VIP netip.Addr
	// Board is the board's own address; the VIP goes on its interface.
	Board  netip.Addr
	Logger *slog.Logger
}

// label marks the address as isle's in `ip addr` output.
const labelSuffix = ":isle"

func (c Config) validate() error {
	switch {
	case !c.VIP.Is4():
		return fmt.Errorf("vip: %v: want an IPv4 address on the boards' LAN", c.VIP)
	case c.VIP == c.Board:
		return fmt.Errorf("vip: %v is the board's own address; give a free one", c.VIP)
	}
	return nil
}

// link returns the interface holding the board's address.
func (c Config) link() (netlink.Link, error) {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("vip: list addresses: %w", err)
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && ip.Unmap() == c.Board {
			l, err := netlink.LinkByIndex(a.LinkIndex)
			if err != nil {
				return nil, fmt.Errorf("vip: interface of %v: %w", c.Board, err)
			}
			return l, nil
		}
	}
	return nil, fmt.Errorf("vip: no interface holds the board's address %v", c.Board)
}

func (c Config) addr(l netlink.Link) *netlink.Addr {
	name := l.Attrs().Name
	label := name + labelSuffix
	if len(label) > 15 { // IFNAMSIZ-1: the kernel refuses longer labels
		label = ""
	}
	return &netlink.Addr{IPNet: &net.IPNet{IP: c.VIP.AsSlice(), Mask: net.CIDRMask(32, 32)}, Label: label}
}

// Check validates the configuration and that the board can hold the
// address (its interface exists); it changes nothing.
func Check(c Config) error {
	if err := c.validate(); err != nil {
		return err
	}
	_, err := c.link()
	return err
}

// Release removes the address if this board holds it: at start, a board
// that crashed while leading must not keep answering for it.
func Release(c Config) error {
	l, err := c.link()
	if err != nil {
		return err
	}
	if err := removeDrain(); err != nil {
		return err
	}
	if err := netlink.AddrDel(l, c.addr(l)); err != nil && !errors.Is(err, syscall.EADDRNOTAVAIL) && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("vip: remove %v from %s: %w", c.VIP, l.Attrs().Name, err)
	}
	return nil
}

// Hold adds the address, announces it, and removes it when ctx ends (the
// board stopped leading).
func Hold(ctx context.Context, c Config) error {
	if err := c.validate(); err != nil {
		return err
	}
	l, err := c.link()
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(l, c.addr(l)); err != nil && !errors.Is(err, syscall.EEXIST) {
		return fmt.Errorf("vip: add %v to %s: %w", c.VIP, l.Attrs().Name, err)
	}
	c.Logger.Info("vip: holding the floating API address", "vip", c.VIP, "interface", l.Attrs().Name)
	defer func() {
		if err := Release(c); err != nil {
			c.Logger.Warn("vip: release", "err", err)
			return
		}
		c.Logger.Info("vip: released the floating API address", "vip", c.VIP)
	}()
	// Announce a few times: one lost frame must not leave a switch or a
	// client's ARP cache pointing at the old leader.
	for i := range 3 {
		if err := c.announce(l); err != nil {
			c.Logger.Warn("vip: gratuitous ARP", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Duration(i+1) * 500 * time.Millisecond):
		}
	}
	<-ctx.Done()
	return nil
}

// announce sends a gratuitous ARP request for the address: sender and
// target are the VIP, to the broadcast address.
func (c Config) announce(l netlink.Link) error {
	ifi, err := net.InterfaceByIndex(l.Attrs().Index)
	if err != nil {
		return fmt.Errorf("interface %s: %w", l.Attrs().Name, err)
	}
	if len(ifi.HardwareAddr) != 6 {
		return nil // no Ethernet (a point-to-point link): nothing to announce
	}
	client, err := arp.Dial(ifi)
	if err != nil {
		return fmt.Errorf("open ARP on %s: %w", ifi.Name, err)
	}
	defer client.Close()
	p, err := arp.NewPacket(arp.OperationRequest, ifi.HardwareAddr, c.VIP, ethernet.Broadcast, c.VIP)
	if err != nil {
		return err
	}
	return client.WriteTo(p, ethernet.Broadcast)
}
