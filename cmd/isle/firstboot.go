package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/isle-cluster/isle/hw"
	"github.com/isle-cluster/isle/images/firstboot"
)

// firstbootFlags are the flags of `isle firstboot`.
type firstbootFlags struct {
	boot  string
	root  string
	role  string
	force bool
}

func newFirstbootCommand() *cobra.Command {
	var f firstbootFlags
	cmd := &cobra.Command{
		Use:   "firstboot --role ROLE",
		Short: "Configure a board flashed from an isle image from isle.yaml on its boot partition, once",
		Long: `Configure a board flashed from an isle image, at its first boot: grow the
root partition and filesystem to fill the card, then apply BOOT/isle.yaml,
which the user wrote on the card's boot partition (see isle.yaml.example
beside it): isle's /etc/isle/config.yaml, the hostname, the network
(systemd-networkd) and the isle unit of the board's role, which it starts.
It moves the cluster token off the boot partition into
/etc/isle/config.yaml and marks the first boot done in
/var/lib/isle/firstboot.done; later runs do nothing, unless --force.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runFirstboot(cmd.Context(), f, slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.boot, "boot", "/boot/firmware", "the card's boot partition, which holds isle.yaml")
	fl.StringVar(&f.root, "root", "/", "the board's root filesystem, where the configuration is written")
	fl.StringVar(&f.role, "role", "", "the image's role, agent or server, for an isle.yaml without role:")
	fl.BoolVar(&f.force, "force", false, "run again though the first boot is done")
	_ = cmd.MarkFlagRequired("role") // the flag exists: no error
	return cmd
}

func runFirstboot(ctx context.Context, f firstbootFlags, log *slog.Logger) error {
	if f.role != firstboot.RoleAgent && f.role != firstboot.RoleServer {
		return fmt.Errorf("firstboot: --role %q: want %s or %s", f.role, firstboot.RoleAgent, firstboot.RoleServer)
	}
	done, err := firstboot.IsDone(f.root)
	if err != nil {
		return err
	}
	path := filepath.Join(f.boot, "isle.yaml")
	if done && !f.force {
		// A power cut may have come between the mark and the token's
		// move: finish it, if isle.yaml still holds the token applied.
		if data, err := readSettings(path); err == nil {
			if c, err := firstboot.Parse(path, data); err == nil && c.Token != "" && c.Token == appliedToken(f.root) {
				if err := firstboot.RemoveToken(path, c); err != nil {
					return err
				}
				log.Info("cluster token moved off the boot partition", "from", path)
			}
		}
		log.Info("first boot already done; nothing to do (--force runs it again)", "marker", filepath.Join(f.root, firstboot.DoneFile))
		return nil
	}
	growRoot(ctx, f.root, log)
	data, err := readSettings(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("firstboot: %s not found: write this board's settings there (see isle.yaml.example beside it; "+
			"at least the cluster token) from a PC, and power the board on again", path)
	}
	if err != nil {
		return fmt.Errorf("firstboot: %w", err)
	}
	c, err := firstboot.Parse(path, data)
	if err != nil {
		return err
	}
	if c.Role == "" {
		c.Role = f.role
	}
	if err := checkIsleSettings(path, c); err != nil {
		return err
	}
	var b firstboot.Board
	if c.Hostname == "" {
		b, err = readBoardIDs(f.root, c.Interface)
		if err != nil {
			log.Warn("reading the board's serial number and MAC address", "err", err)
		}
		if c.Hostname, err = firstboot.DefaultHostname(b); err != nil {
			return fmt.Errorf("firstboot: %s: hostname: not given, and no default: %w", path, err)
		}
	}
	if err := firstboot.Apply(f.root, c, b); err != nil {
		return err
	}
	network := "dhcp"
	if c.Address.IsValid() {
		network = c.Address.String()
	}
	log.Info("board configured", "role", c.Role, "hostname", c.Hostname, "network", network,
		"interface", c.Interface, "join", c.Join, "init", c.Init, "config", filepath.Join(f.root, firstboot.ConfigFile))
	// Marked done before the token leaves isle.yaml: a run after a power
	// cut between the two finishes the move (above).
	if err := firstboot.MarkDone(f.root, time.Now()); err != nil {
		return err
	}
	if err := firstboot.RemoveToken(path, c); err != nil {
		return err
	}
	if c.Token != "" {
		log.Info("cluster token moved off the boot partition", "from", path, "to", filepath.Join(f.root, firstboot.ConfigFile))
	}
	log.Info("first boot done", "marker", filepath.Join(f.root, firstboot.DoneFile))
	startIsle(ctx, f.root, c.Role, log)
	return nil
}

// startIsle starts the unit of the role just enabled, when root is the
// running system's: systemd planned this boot before the unit's link was
// made, so only later boots start it by themselves. It does not wait
// (first boot runs before the network, which isle waits for).
func startIsle(ctx context.Context, root, role string, log *slog.Logger) {
	if filepath.Clean(root) != "/" {
		return
	}
	unit := "isle-" + role + ".service"
	if out, err := exec.CommandContext(ctx, "systemctl", "--no-block", "start", unit).CombinedOutput(); err != nil {
		log.Warn("isle not started; it starts at the next boot", "unit", unit, "err", err, "output", strings.TrimSpace(string(out)))
		return
	}
	log.Info("isle starting", "unit", unit)
}

// growRoot grows the root partition to the end of the card and the root
// filesystem to the partition's end, when root is the running system's.
// A failure is logged, not returned: a board whose root was not grown
// still works, and one left unconfigured cannot be reached.
func growRoot(ctx context.Context, root string, log *slog.Logger) {
	if filepath.Clean(root) != "/" {
		log.Info("root partition not grown: --root is not the running system's /", "root", root)
		return
	}
	const failed = "growing the root partition and filesystem failed; the board works with the space it has"
	dev, disk, partition, err := firstboot.RootDevice(root)
	if err != nil {
		log.Warn(failed, "err", err)
		return
	}
	g, err := firstboot.GrowRoot(ctx, dev, disk, partition) // g says what was done before an error
	switch {
	case g.Skipped != "":
		log.Info("root partition not grown", "device", dev, "why", g.Skipped, "bytes", g.PartitionAfter)
	case g.PartitionAfter != g.PartitionBefore:
		log.Info("root partition grown to the end of the card", "device", dev, "from_bytes", g.PartitionBefore, "to_bytes", g.PartitionAfter)
	}
	if g.FilesystemAfter != g.FilesystemBefore {
		log.Info("root filesystem grown", "device", dev, "from_bytes", g.FilesystemBefore, "to_bytes", g.FilesystemAfter)
	}
	if err != nil {
		log.Warn(failed, "device", dev, "err", err)
	}
}

// readSettings reads isle.yaml, of at most maxConfigFile bytes.
func readSettings(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxConfigFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxConfigFile {
		return nil, fmt.Errorf("%s: larger than %d KiB", path, maxConfigFile>>10)
	}
	return data, nil
}

// checkIsleSettings checks the settings of isle.yaml's isle: map as isle
// of c's role reads them from its config file: flags it has, values it
// takes.
func checkIsleSettings(path string, c *firstboot.Config) error {
	cmd := newAgentCommand()
	if c.Role == firstboot.RoleServer {
		cmd = newServerCommand()
	}
	(&cobra.Command{Use: "isle"}).AddCommand(cmd) // for its path, "isle agent"
	for _, s := range c.Isle {
		v := &yaml.Node{Kind: yaml.SequenceNode}
		for _, val := range s.Values {
			v.Content = append(v.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: val})
		}
		if !s.List {
			v = v.Content[0]
		}
		if err := setFromConfig(cmd.Flags(), s.Flag, v, cmd.CommandPath()); err != nil {
			return fmt.Errorf("firstboot: %s:%d: isle: %s: %w", path, s.Line, s.Flag, err)
		}
	}
	return nil
}

// readBoardIDs reads what names a board without a hostname: its serial
// number under root or, without one, the MAC address of its interface
// ifname (empty: the default). err says why neither could be read.
func readBoardIDs(root, ifname string) (firstboot.Board, error) {
	hb, err := hw.ReadBoard(root) // err may be of other facts than the serial
	if hb.Serial != "" {
		return firstboot.Board{Serial: hb.Serial}, nil
	}
	if ifname == "" {
		ifname = firstboot.DefaultInterface
	}
	ifi, ierr := net.InterfaceByName(ifname)
	if ierr != nil {
		return firstboot.Board{}, errors.Join(err, fmt.Errorf("interface %s: %w", ifname, ierr))
	}
	return firstboot.Board{MAC: ifi.HardwareAddr.String()}, nil
}

// appliedToken is the token of the config.yaml a first boot wrote under
// root, or "".
func appliedToken(root string) string {
	data, err := os.ReadFile(filepath.Join(root, firstboot.ConfigFile))
	if err != nil {
		return ""
	}
	var settings struct {
		Token string `yaml:"token"`
	}
	if yaml.Unmarshal(data, &settings) != nil {
		return ""
	}
	return settings.Token
}
