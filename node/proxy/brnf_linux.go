package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
)

// bridgeNFSysctl sends bridged IPv4 through the ip family's hooks, and so
// through conntrack, in the namespace that opens it. It exists once the
// br_netfilter module is loaded.
const bridgeNFSysctl = "/proc/sys/net/bridge/bridge-nf-call-iptables"

// bridgeNetfilter makes bridged IPv4 traffic pass nftables' ip hooks: if
// the sysctl file is missing it loads br_netfilter (modprobe) and looks
// again; if it holds 0 it writes 1. It reports whether the traffic passes,
// and if not why.
//
// It matters for a pod reaching a Service whose endpoint is on the same
// bridge: the request is DNATed by the board, but the endpoint answers the
// pod directly, over the bridge; only with br_netfilter does conntrack see
// that reply and give it the Service's address back.
func bridgeNetfilter(path string, modprobe func() error) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := modprobe(); err != nil {
			return false, err
		}
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return false, fmt.Errorf("br_netfilter: %w", err)
	}
	if string(bytes.TrimSpace(b)) == "1" {
		return true, nil
	}
	if err := os.WriteFile(path, []byte("1\n"), 0o644); err != nil {
		return false, fmt.Errorf("br_netfilter: %w", err)
	}
	return true, nil
}

// modprobeBrNetfilter loads the br_netfilter module, if there is a
// modprobe to do it.
func modprobeBrNetfilter() error {
	path, err := exec.LookPath("modprobe")
	if err != nil {
		return fmt.Errorf("br_netfilter: not loaded, and no modprobe to load it: %w", err)
	}
	if out, err := exec.Command(path, "br_netfilter").CombinedOutput(); err != nil {
		return fmt.Errorf("br_netfilter: modprobe: %w: %s", err, bytes.TrimSpace(out))
	}
	return nil
}
