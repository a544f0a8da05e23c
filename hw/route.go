package hw

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// routeTable is the kernel's IPv4 routing table, as text.
const routeTable = "/proc/net/route"

// DefaultRouteInterface returns the interface of the board's IPv4 default
// route (the one of lowest metric), read from root's /proc/net/route: ""
// while there is none, as before DHCP has answered.
func DefaultRouteInterface(root string) (string, error) {
	path := filepath.Join(root, routeTable)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("hw: %w", err)
	}
	const rtfUp = 0x1
	best, bestMetric := "", uint64(0)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if n == 1 {
			if len(f) < 8 || f[0] != "Iface" || f[1] != "Destination" || f[3] != "Flags" || f[6] != "Metric" || f[7] != "Mask" {
				return "", fmt.Errorf("hw: %s line 1: not the header of a routing table: %q", path, sc.Text())
			}
			continue
		}
		if len(f) < 8 {
			return "", fmt.Errorf("hw: %s line %d: %d fields, want at least 8", path, n, len(f))
		}
		dest, err1 := strconv.ParseUint(f[1], 16, 32)
		flags, err2 := strconv.ParseUint(f[3], 16, 16)
		metric, err3 := strconv.ParseUint(f[6], 10, 32)
		mask, err4 := strconv.ParseUint(f[7], 16, 32)
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			return "", fmt.Errorf("hw: %s line %d: %w", path, n, err)
		}
		if dest != 0 || mask != 0 || flags&rtfUp == 0 {
			continue
		}
		if best == "" || metric < bestMetric {
			best, bestMetric = f[0], metric
		}
	}
	return best, nil
}
