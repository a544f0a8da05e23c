package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/isle-cluster/isle/hw"
)

// autoAddressWait is how long `--address auto` waits for the board's
// default route, which DHCP may not have given yet at boot.
const autoAddressWait = 2 * time.Minute

// autoAddress is the board's own address for `--address auto`: the first
// IPv4 address (addrOf) of the interface that holds its default route in
// root's routing table ("/" on a board). It waits up to wait for one,
// looking every poll, or until ctx ends.
func autoAddress(ctx context.Context, root string, addrOf func(ifname string) (netip.Addr, bool), wait, poll time.Duration, log *slog.Logger) (string, error) {
	deadline := time.Now().Add(wait)
	logged := false
	for {
		ifname, err := hw.DefaultRouteInterface(root)
		if err != nil {
			return "", fmt.Errorf("--address auto: %w", err)
		}
		if ifname != "" {
			if a, ok := addrOf(ifname); ok {
				log.Info("board address from the default route", "interface", ifname, "address", a)
				return a.String(), nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("--address auto: no IPv4 default route with an address after %v (is the network cable in, does DHCP answer?); give --address", wait)
		}
		if !logged {
			log.Info("waiting for the board's default route to pick its address (--address auto)")
			logged = true
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("--address auto: %w", ctx.Err())
		case <-time.After(poll):
		}
	}
}

// interfaceIPv4 returns the first global IPv4 address of the interface.
func interfaceIPv4(name string) (netip.Addr, bool) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return netip.Addr{}, false
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}, false
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && p.Addr().IsGlobalUnicast() {
			return p.Addr(), true
		}
	}
	return netip.Addr{}, false
}
