package main

import (
	"fmt"
	"strings"
)

// platform is one target of the image: where the binary runs and how the
// Go toolchain builds for it. The OS is always linux.
type platform struct {
	name    string // as written in -platforms: "linux/arm/v7"
	goarch  string // GOARCH, also the image's architecture
	goarm   string // GOARM, for arm only
	variant string // the image's CPU variant
}

// knownPlatforms are the platforms mkimage builds for, in the default
// order: the simulated boards' machine and the Raspberry Pis (Pi 3/4/5 in
// 64 bits, Pi 2/3 in 32 bits, Pi Zero and 1).
var knownPlatforms = []platform{
	{name: "linux/amd64", goarch: "amd64"},
	{name: "linux/arm64", goarch: "arm64", variant: "v8"},
	{name: "linux/arm/v7", goarch: "arm", goarm: "7", variant: "v7"},
	{name: "linux/arm/v6", goarch: "arm", goarm: "6", variant: "v6"},
}

func knownNames() []string {
	names := make([]string, len(knownPlatforms))
	for i, p := range knownPlatforms {
		names[i] = p.name
	}
	return names
}

// parsePlatforms reads a comma-separated list of platform names
// ("linux/amd64,linux/arm/v6"), keeping its order.
func parsePlatforms(list string) ([]platform, error) {
	var out []platform
	seen := map[string]bool{}
	for _, entry := range strings.Split(list, ",") {
		entry = strings.TrimSpace(entry)
		p, ok := lookupPlatform(entry)
		if !ok {
			return nil, fmt.Errorf("-platforms: unknown platform %q (allowed: %s)", entry, strings.Join(knownNames(), ", "))
		}
		if seen[entry] {
			return nil, fmt.Errorf("-platforms: %q is listed twice", entry)
		}
		seen[entry] = true
		out = append(out, p)
	}
	return out, nil
}

func lookupPlatform(name string) (platform, bool) {
	for _, p := range knownPlatforms {
		if p.name == name {
			return p, true
		}
	}
	return platform{}, false
}
