package main

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAutoAddress(t *testing.T) {
	root := t.TempDir()
	table := filepath.Join(root, "proc", "net", "route")
	if err := os.MkdirAll(filepath.Dir(table), 0o755); err != nil {
		t.Fatal(err)
	}
	const header = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
	write := func(rows string) {
		t.Helper()
		// Whole, as the kernel's table reads.
		if err := os.WriteFile(table+".new", []byte(header+rows), 0o644); err != nil {
			t.Error(err)
		}
		if err := os.Rename(table+".new", table); err != nil {
			t.Error(err)
		}
	}
	addrs := map[string]netip.Addr{"eth0": netip.MustParseAddr("192.168.1.50")}
	addrOf := func(name string) (netip.Addr, bool) { a, ok := addrs[name]; return a, ok }
	log := slog.New(slog.DiscardHandler)

	// No default route: it waits, then says what to do.
	write("eth0\t0001A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n")
	if _, err := autoAddress(context.Background(), root, addrOf, 30*time.Millisecond, 10*time.Millisecond, log); err == nil || !strings.Contains(err.Error(), "give --address") {
		t.Errorf("no default route: %v, want an error saying to give --address", err)
	}

	// DHCP answers while it waits.
	go func() {
		time.Sleep(50 * time.Millisecond)
		write("eth0\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n")
	}()
	got, err := autoAddress(context.Background(), root, addrOf, 5*time.Second, 10*time.Millisecond, log)
	if err != nil || got != "192.168.1.50" {
		t.Errorf("autoAddress = %q, %v; want eth0's 192.168.1.50", got, err)
	}

	// A default route through an interface without an address: not yet.
	write("wlan0\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n")
	if _, err := autoAddress(context.Background(), root, addrOf, 30*time.Millisecond, 10*time.Millisecond, log); err == nil {
		t.Error("a default route on an interface without an address gave an address")
	}

	// Stopped (SIGTERM) while it waits: it ends at once.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	start := time.Now()
	if _, err := autoAddress(ctx, root, addrOf, time.Minute, 10*time.Millisecond, log); !errors.Is(err, context.Canceled) {
		t.Errorf("stopped while waiting: %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("stopped while waiting: returned after %v", d)
	}
}
