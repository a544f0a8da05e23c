package pageout

import (
	"fmt"
	"strconv"
	"strings"
)

// statusField is the "key: N kB" line of a /proc/PID/status, in bytes.
func statusField(status []byte, key string) (uint64, error) {
	for line := range strings.Lines(string(status)) {
		k, v, ok := strings.Cut(line, ":")
		if !ok || k != key {
			continue
		}
		n, err := kB(v)
		if err != nil {
			return 0, fmt.Errorf("pageout: status: %s: %w", key, err)
		}
		return n, nil
	}
	return 0, fmt.Errorf("pageout: status: no %s line", key)
}

// kB is a size as /proc writes it ("  27648 kB"), in bytes.
func kB(v string) (uint64, error) {
	v, ok := strings.CutSuffix(strings.TrimSpace(v), " kB")
	n, err := strconv.ParseUint(v, 10, 64)
	if !ok || err != nil {
		return 0, fmt.Errorf("%q is not a size in kB", strings.TrimSpace(v))
	}
	return n << 10, nil
}
