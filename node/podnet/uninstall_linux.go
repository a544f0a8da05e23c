package podnet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/isle-cluster/isle/node/netns"
)

// Uninstall removes what the Pod network made on the board: the pods'
// veths and the bridge (and with them their addresses and pods' eth0s),
// the routes of RouteProtocol, the nftables table, the LAN link's
// forwarding and rp_filter as they were, and Config.StateDir. It needs no
// NodeIP, and must not run while a Network of cfg does. A board
// namespace that is gone leaves only the state to remove. The state is
// kept if anything else could not be removed, so that a second try can
// restore the LAN link's settings.
func Uninstall(cfg Config) error {
	cfg, err := cfg.validate(false)
	if err != nil {
		return err
	}
	if cfg.Netns != "" {
		switch ok, err := netns.Exists(cfg.Netns); {
		case err != nil:
			return fmt.Errorf("podnet: uninstall: %w", err)
		case !ok:
			cfg.Logger.Info("podnet: uninstall: the board's namespace is gone, removing the state alone", "netns", cfg.Netns)
			return removeState(cfg.StateDir)
		}
	}
	if err := uninstallBoard(cfg); err != nil {
		return err
	}
	return removeState(cfg.StateDir)
}

func removeState(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("podnet: uninstall: %w", err)
	}
	return nil
}

// uninstallBoard removes links, routes and table, and restores the LAN
// link's settings.
func uninstallBoard(cfg Config) error {
	ns, h, err := openBoard(cfg.Netns)
	if err != nil {
		return err
	}
	defer ns.Close()
	defer h.Close()
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf("podnet: uninstall: "+format, a...)) }

	links, err := retryDump(h.LinkList)
	if err != nil {
		fail("list links: %w", err)
	}
	bridgeIndex := 0
	for _, l := range links {
		if l.Attrs().Name == cfg.Bridge && l.Type() == "bridge" {
			bridgeIndex = l.Attrs().Index
		}
	}
	for _, l := range links {
		a := l.Attrs()
		// Or made, and a crash came before the alias was set: the
		// bridge by its name, a pod's veth by being in it.
		ours := strings.HasPrefix(a.Alias, aliasPrefix) || (a.Name == cfg.Bridge && l.Type() == "bridge") ||
			(a.Alias == "" && l.Type() == "veth" && a.MasterIndex != 0 && a.MasterIndex == bridgeIndex)
		if !ours {
			continue
		}
		if err := h.LinkDel(l); err != nil && !errors.As(err, new(netlink.LinkNotFoundError)) {
			fail("remove link %s: %w", a.Name, err)
		}
	}

	routes, err := retryDump(func() ([]netlink.Route, error) {
		return h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_MAIN, Protocol: RouteProtocol},
			netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PROTOCOL)
	})
	if err != nil {
		fail("list routes: %w", err)
	}
	for _, r := range routes {
		if err := h.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) {
			fail("remove route to %v: %w", r.Dst, err)
		}
	}

	c, err := nftConn(ns)
	if err == nil {
		t := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: TableName}
		c.AddTable(t) // the delete then never fails for a missing table
		c.DelTable(t)
		err = c.Flush()
	}
	if err != nil {
		fail("nftables table %s: %w", TableName, err)
	}

	st := store{dir: cfg.StateDir, log: cfg.Logger}
	switch lan, ok, err := st.lan(); {
	case err != nil:
		errs = append(errs, err)
	case ok:
		err := inNamespace(cfg.Netns, func() error {
			if _, err := os.Stat(sysctlPath(lan.Link, "forwarding")); errors.Is(err, fs.ErrNotExist) {
				return nil // the link is gone
			}
			if err := writeSysctl(lan.Link, "forwarding", lan.Forwarding); err != nil {
				return err
			}
			return writeSysctl(lan.Link, "rp_filter", lan.RPFilter)
		})
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
