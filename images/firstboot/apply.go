package firstboot

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/isle-cluster/isle/hw/led"
)

// Where Apply writes, under its root.
const (
	// ConfigFile is isle's configuration, read by isle server and agent.
	ConfigFile = "/etc/isle/config.yaml"
	// NetworkFile is systemd-networkd's configuration of the interface.
	NetworkFile = "/etc/systemd/network/10-isle.network"
	// SSHKeysFile holds isle.yaml's ssh-authorized-keys, root's keys.
	SSHKeysFile  = "/root/.ssh/authorized_keys"
	hostnameFile = "/etc/hostname"
	hostsFile    = "/etc/hosts"
	// unitDir holds the units of the image; wantsDir the links that
	// enable them at boot.
	unitDir  = "/lib/systemd/system"
	wantsDir = "/etc/systemd/system/multi-user.target.wants"
)

// Board is what first boot needs to know of the board.
type Board struct {
	// Serial is the device tree's serial number, hexadecimal (see
	// hw.Board); empty: none.
	Serial string
	// MAC is the hardware address of the Config's interface, such as
	// dc:a6:32:01:02:03; empty: unknown.
	MAC string
}

// DefaultHostname is the hostname of a board whose isle.yaml gives none:
// "isle-" and the last 6 hexadecimal digits, in lower case, of its serial
// or, without a serial, of its MAC address.
func DefaultHostname(b Board) (string, error) {
	digits := strings.ToLower(b.Serial)
	switch {
	case digits != "" && strings.Trim(digits, "0123456789abcdef") != "":
		return "", fmt.Errorf("board serial %q is not hexadecimal", b.Serial)
	case digits == "" && b.MAC != "":
		mac, err := net.ParseMAC(b.MAC)
		if err != nil {
			return "", fmt.Errorf("board MAC address %q: %w", b.MAC, err)
		}
		digits = hex.EncodeToString(mac)
	case digits == "":
		return "", errors.New("the board has neither a serial number nor a MAC address to name it by")
	}
	name := "isle-" + digits[max(0, len(digits)-6):]
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return "", fmt.Errorf("%q: %s", name, strings.Join(msgs, "; "))
	}
	return name, nil
}

// boardFile is a file Apply writes.
type boardFile struct {
	path string
	data []byte
	mode fs.FileMode
}

// Apply writes the board's configuration under root ("/" on a board, a
// temporary directory in tests): see the package documentation. c needs a
// role (isle.yaml's or the image's). Nothing is written unless c is valid.
func Apply(root string, c *Config, b Board) error {
	if err := c.validate(); err != nil {
		return err
	}
	if err := c.validateRole(); err != nil {
		return err
	}
	name := c.Hostname
	if name == "" {
		var err error
		if name, err = DefaultHostname(b); err != nil {
			return c.keyError("hostname", "not given, and no default: %v", err)
		}
	}
	config, err := c.isleConfig(name, time.Now())
	if err != nil {
		return err
	}
	hosts, err := os.ReadFile(filepath.Join(root, hostsFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("firstboot: %w", err)
	}
	files := []boardFile{
		{ConfigFile, config, 0o600},
		{hostnameFile, []byte(name + "\n"), 0o644},
		{hostsFile, hostsWithName(hosts, name), 0o644},
		{NetworkFile, c.networkFile(), 0o644},
	}
	if len(c.SSHKeys) > 0 {
		// sshd wants root's .ssh its own; writeFile would make it readable.
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(SSHKeysFile)), 0o700); err != nil {
			return fmt.Errorf("firstboot: %w", err)
		}
		files = append(files, boardFile{SSHKeysFile, []byte(strings.Join(c.SSHKeys, "\n") + "\n"), 0o600})
	}
	for _, f := range files {
		if err := writeFile(filepath.Join(root, f.path), f.data, f.mode); err != nil {
			return fmt.Errorf("firstboot: %w", err)
		}
	}
	for _, role := range []string{RoleAgent, RoleServer} {
		unit := "isle-" + role + ".service"
		link := filepath.Join(root, wantsDir, unit)
		var err error
		if role == c.Role {
			err = symlink(filepath.Join(unitDir, unit), link)
		} else {
			err = remove(link)
		}
		if err != nil {
			return fmt.Errorf("firstboot: enable %s: %w", "isle-"+c.Role+".service", err)
		}
	}
	return nil
}

// isleConfig is the text of ConfigFile for the board named name, written
// at now.
func (c *Config) isleConfig(name string, now time.Time) ([]byte, error) {
	m := &yaml.Node{Kind: yaml.MappingNode}
	add := func(key string, list bool, vals ...string) {
		v := &yaml.Node{Kind: yaml.SequenceNode}
		for _, s := range vals {
			v.Content = append(v.Content, stringNode(s))
		}
		if !list {
			v = v.Content[0]
		}
		m.Content = append(m.Content, stringNode(key), v)
	}
	if c.Token != "" {
		add("token", false, c.Token)
	}
	if len(c.Join) > 0 {
		add("join", true, c.Join...)
	}
	if c.Init {
		add("init", false, "true")
	}
	add("name", false, name)
	if c.Address.IsValid() {
		add("address", false, c.Address.Addr().String())
	} else {
		add("address", false, "auto")
	}
	if c.LEDReady.Kind != led.KindUnset {
		add("led-ready", false, c.LEDReady.String())
	}
	if c.LEDActivity.Kind != led.KindUnset {
		add("led-activity", false, c.LEDActivity.String())
	}
	for _, s := range c.Isle {
		add(s.Flag, s.List, s.Values...)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Written by isle firstboot from %s on %s.\n", c.fileName(), now.UTC().Format(time.DateOnly))
	b.WriteString("# isle server and isle agent read it: its keys are their flags' names.\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("firstboot: %s: %w", ConfigFile, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("firstboot: %s: %w", ConfigFile, err)
	}
	return b.Bytes(), nil
}

// stringNode is a YAML scalar that reads back as s: isle takes every
// setting's text, but rejects null, which an empty or a "null" would read
// as if written plain.
func stringNode(s string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Value: s}
	switch s {
	case "", "~", "null", "Null", "NULL":
		n.Tag = "!!str" // quoted
	}
	return n
}

// fileName is isle.yaml's name as Parse was given it.
func (c *Config) fileName() string {
	if c.file == "" {
		return "isle.yaml"
	}
	return c.file
}

// networkFile is the text of NetworkFile.
func (c *Config) networkFile() []byte {
	ifname := c.Interface
	if ifname == "" {
		ifname = DefaultInterface
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by isle firstboot from %s.\n[Match]\nName=%s\n\n[Network]\n", c.fileName(), ifname)
	if !c.Address.IsValid() {
		b.WriteString("DHCP=ipv4\n")
		return []byte(b.String())
	}
	fmt.Fprintf(&b, "Address=%s\nGateway=%s\n", c.Address, c.Gateway)
	dns := c.DNS
	if len(dns) == 0 {
		dns = append(dns, c.Gateway)
	}
	for _, d := range dns {
		fmt.Fprintf(&b, "DNS=%s\n", d)
	}
	return []byte(b.String())
}

// hostsWithName returns the text of /etc/hosts (nil: none) with its
// 127.0.1.1 line naming the board name: the first such line replaced (any
// further one dropped), or one added after the 127.0.0.1 line (at the end
// without one). Every other line is kept.
func hostsWithName(hosts []byte, name string) []byte {
	entry := "127.0.1.1\t" + name
	if hosts == nil {
		return []byte("127.0.0.1\tlocalhost\n" + entry + "\n")
	}
	address := func(line string) string {
		if f := strings.Fields(line); len(f) > 0 {
			return f[0]
		}
		return ""
	}
	var lines []string
	if text := strings.TrimSuffix(string(hosts), "\n"); text != "" {
		lines = strings.Split(text, "\n")
	}
	out := make([]string, 0, len(lines)+1)
	replaced := false
	for _, l := range lines {
		switch {
		case address(l) != "127.0.1.1":
			out = append(out, l)
		case !replaced:
			out = append(out, entry)
			replaced = true
		}
	}
	if !replaced {
		at := len(out)
		if i := slices.IndexFunc(out, func(l string) bool { return address(l) == "127.0.0.1" }); i >= 0 {
			at = i + 1
		}
		out = slices.Insert(out, at, entry)
	}
	return []byte(strings.Join(out, "\n") + "\n")
}
