package hw

import "runtime/debug"

// goarm is the ARM version the binary was built for (GOARM), which on a
// static isle build is the board's: the armv6 binary is the Pi Zero's.
func goarm() int {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "GOARM" && len(s.Value) > 0 && s.Value[0] >= '5' && s.Value[0] <= '7' {
				return int(s.Value[0] - '0')
			}
		}
	}
	return 7
}
