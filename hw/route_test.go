package hw

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeRoutes(t *testing.T, table string) string {
	t.Helper()
	root := t.TempDir()
	p := filepath.Join(root, routeTable)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

const routeHeader = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"

func TestDefaultRouteInterface(t *testing.T) {
	for _, tc := range []struct {
		name, table, want string
	}{
		// A Pi on DHCP: the default route and the LAN's.
		{"dhcp", routeHeader +
			"eth0\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n" +
			"eth0\t0001A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n", "eth0"},
		// Wi-Fi and Ethernet both up: the lower metric wins.
		{"two", routeHeader +
			"wlan0\t00000000\t0101A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\n" +
			"eth0\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n", "eth0"},
		{"no default yet", routeHeader +
			"eth0\t0001A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n", ""},
		{"default route down", routeHeader +
			"eth0\t00000000\t0101A8C0\t0002\t0\t0\t100\t00000000\t0\t0\t0\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DefaultRouteInterface(writeRoutes(t, tc.table))
			if err != nil || got != tc.want {
				t.Errorf("DefaultRouteInterface = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if got, err := DefaultRouteInterface(t.TempDir()); err != nil || got != "" {
		t.Errorf("no routing table: %q, %v", got, err)
	}
	for _, bad := range []string{
		"nonsense\n",
		routeHeader + "eth0\t00000000\n",
		routeHeader + "eth0\tZZ\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n",
	} {
		if _, err := DefaultRouteInterface(writeRoutes(t, bad)); err == nil || !strings.Contains(err.Error(), "/proc/net/route line") {
			t.Errorf("table %q: %v, want an error naming the file and line", bad, err)
		}
	}
}
