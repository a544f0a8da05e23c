package wire

import (
	"fmt"
	"strconv"
	"strings"
)

// Release is the isle release line this binary belongs to, MAJOR.MINOR.
// The version skew policy (README, "Upgrades") is stated in releases:
// servers are upgraded first, one at a time; a server may join servers
// one minor release apart; an agent may be at most one minor release
// behind the servers and never ahead of them. Bump the minor with every
// release whose boards must be upgraded in that order.
const Release = "0.2"

// preRelease is what a board that sends no release runs: an isle from
// before releases were named, the line before the first one named.
const preRelease = "0.1"

// ParseRelease reads MAJOR.MINOR; "" is the release before the first
// one named.
func ParseRelease(s string) (major, minor int, err error) {
	if s == "" {
		s = preRelease
	}
	a, b, ok := strings.Cut(s, ".")
	if ok {
		if major, err = strconv.Atoi(a); err == nil {
			minor, err = strconv.Atoi(b)
		}
	}
	if !ok || err != nil || major < 0 || minor < 0 || len(s) > 16 {
		return 0, 0, fmt.Errorf("release %q: want MAJOR.MINOR, such as %s", s, Release)
	}
	return major, minor, nil
}

// CheckSkew says whether a board of release joiner, joining as role, may
// join a cluster whose server runs release server, and if not, what to
// upgrade.
func CheckSkew(server, joiner string, role Role) error {
	sMaj, sMin, err := ParseRelease(server)
	if err != nil {
		return err
	}
	jMaj, jMin, err := ParseRelease(joiner)
	if err != nil {
		return err
	}
	if joiner == "" {
		joiner = preRelease
	}
	switch {
	case jMaj != sMaj:
		return fmt.Errorf("isle %s cannot join servers of isle %s: a major release apart; upgrade every board to the same major release, servers first", joiner, server)
	case role == RoleAgent && jMin > sMin:
		return fmt.Errorf("an agent of isle %s cannot join servers of isle %s: upgrade the servers first, one at a time", joiner, server)
	case role == RoleAgent && jMin < sMin-1:
		return fmt.Errorf("an agent of isle %s is more than one minor release behind the servers' isle %s: upgrade it to %s", joiner, server, server)
	case role == RoleServer && (jMin > sMin+1 || jMin < sMin-1):
		return fmt.Errorf("a server of isle %s cannot join servers of isle %s: servers may be one minor release apart; upgrade one minor release at a time", joiner, server)
	}
	return nil
}
