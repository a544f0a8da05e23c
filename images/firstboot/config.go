package firstboot

import (
	"bytes"
	_ "embed" // Example
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/ssh"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/hw/led"
)

// Example is the commented isle.yaml.example the image ships on its FAT
// partition, every setting explained and commented out.
//
//go:embed isle.yaml.example
var Example string

// Roles of a board: the isle command its unit runs.
const (
	RoleAgent  = "agent"
	RoleServer = "server"
)

// DefaultInterface is the network interface of a Config without interface:.
const DefaultInterface = "eth0"

// Config is a parsed isle.yaml. The zero value of a field is its default.
type Config struct {
	// Role is RoleAgent or RoleServer. Empty: isle.yaml gave none, and the
	// caller sets the image's role before Apply.
	Role string
	// Token is the cluster token, in the form wire.ParseToken reads. Empty:
	// none, which only a server with Init may have.
	Token string
	// Init: the board, a server, starts a new cluster.
	Init bool
	// Join are boards of the cluster, host or host:port. Empty: isle finds
	// the cluster on the LAN by multicast DNS.
	Join []string
	// Hostname is the board's hostname and Node name, a DNS-1123 label.
	// Empty: DefaultHostname of the board.
	Hostname string
	// Address is the board's static IPv4 address and prefix. Invalid (the
	// zero Prefix): DHCP.
	Address netip.Prefix
	// Gateway is the default route's router; only with a static Address,
	// which requires it.
	Gateway netip.Addr
	// DNS are the board's DNS servers, only with a static Address. Empty:
	// the Gateway.
	DNS []netip.Addr
	// Interface is the network interface the address settings are for.
	// Empty: DefaultInterface.
	Interface string
	// LEDReady and LEDActivity are isle's --led-ready and --led-activity.
	// led.KindUnset: isle's default.
	LEDReady, LEDActivity led.Spec
	// SSHKeys are public keys, one authorized_keys line each, that may log
	// in as root over SSH. Empty: none, and no one can.
	SSHKeys []string
	// Isle are further settings of isle server or agent, in isle.yaml's
	// order.
	Isle []Setting

	// file is the name of isle.yaml, for errors.
	file string
	// lines are the lines of isle.yaml's keys, for errors (none: 0).
	lines map[string]int
	// withoutToken is isle.yaml's text with the token's lines replaced by
	// tokenComment; nil when it has no token.
	withoutToken []byte
}

// Setting is one setting of isle.yaml's isle: map: a flag of isle server
// or isle agent, as in /etc/isle/config.yaml.
type Setting struct {
	// Flag is the flag's long name, such as max-pods.
	Flag string
	// Values is its value, or its values when List.
	Values []string
	// List: given as a list (for a flag that takes several values).
	List bool
	// Line is its line in isle.yaml.
	Line int
}

// topLevelFlags are the flags that isle.yaml's own keys set in config.yaml,
// which its isle: map must not set too, and the key that sets each.
var topLevelFlags = map[string]string{
	"token":        "token",
	"join":         "join",
	"init":         "init",
	"name":         "hostname",
	"address":      "address",
	"led-ready":    "led-ready",
	"led-activity": "led-activity",
}

// keyReader reads one of isle.yaml's keys into a Config.
type keyReader struct {
	name string
	read func(c *Config, v *yaml.Node) error
}

// keys are isle.yaml's keys, in the order of the example.
var keys = []keyReader{
	{"role", func(c *Config, v *yaml.Node) (err error) { c.Role, err = scalar(v); return err }},
	{"token", readToken},
	{"init", readInit},
	{"join", func(c *Config, v *yaml.Node) (err error) { c.Join, err = scalars(v); return err }},
	{"hostname", func(c *Config, v *yaml.Node) (err error) { c.Hostname, err = scalar(v); return err }},
	{"address", readAddress},
	{"gateway", readGateway},
	{"dns", readDNS},
	{"interface", func(c *Config, v *yaml.Node) (err error) { c.Interface, err = scalar(v); return err }},
	{"led-ready", func(c *Config, v *yaml.Node) error { return readLED(&c.LEDReady, v) }},
	{"led-activity", func(c *Config, v *yaml.Node) error { return readLED(&c.LEDActivity, v) }},
	{"ssh-authorized-keys", readSSHKeys},
	{"isle", readIsle},
}

// lineError is an error at a line of its own, below the key's (an element
// of a list, a setting under isle:).
type lineError struct {
	line int
	err  error
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %v", e.line, e.err) }

// errorAt makes a lineError.
func errorAt(line int, format string, args ...any) error {
	return &lineError{line: line, err: fmt.Errorf(format, args...)}
}

// Parse reads isle.yaml (name is used in errors) and checks every
// setting, except those that depend on the role when it gives none (Apply
// checks them).
func Parse(name string, data []byte) (*Config, error) {
	c := &Config{file: name, lines: map[string]int{}}
	m, err := c.mapping(data)
	if err != nil {
		return nil, err
	}
	if m == nil {
		return c, nil // comments only: valid until a role needs a token
	}
	var token *yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!null" {
			return nil, c.errorf("", k.Line, "want a setting's name, such as hostname:, before the colon")
		}
		key := k.Value
		if line, ok := c.lines[key]; ok {
			return nil, c.errorf(key, k.Line, "given twice (first at line %d)", line)
		}
		c.lines[key] = k.Line
		r := slices.IndexFunc(keys, func(r keyReader) bool { return r.name == key })
		if r < 0 {
			return nil, c.errorf(key, k.Line, "no such setting; isle.yaml has %s (further isle flags go under isle:)", keyList())
		}
		if err := keys[r].read(c, v); err != nil {
			line := k.Line
			if le := (*lineError)(nil); errors.As(err, &le) {
				line, err = le.line, le.err
			}
			return nil, c.errorf(key, line, "%v", err)
		}
		if key == "token" && c.Token != "" {
			token = k
		}
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	if token != nil {
		if c.withoutToken, err = removeTokenLines(data, token); err != nil {
			return nil, c.errorf("token", token.Line, "%v", err)
		}
	}
	return c, nil
}

// mapping decodes isle.yaml's one document: its mapping of settings, nil
// for a file of comments only.
func (c *Config) mapping(data []byte) (*yaml.Node, error) {
	var doc, next yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("firstboot: %s: %w", c.file, err)
	}
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("firstboot: %s: want one YAML document, not several", c.file)
	}
	if line, alias := findAlias(&doc); alias != "" {
		return nil, c.errorf("", line, "aliases (*%s) are not supported: write the value itself", alias)
	}
	m := doc.Content[0]
	switch {
	case m.ShortTag() == "!!null":
		return nil, nil
	case m.Kind != yaml.MappingNode:
		return nil, c.errorf("", m.Line, "want settings, one a line, such as hostname: pi-kitchen")
	case m.Style&yaml.FlowStyle != 0:
		return nil, c.errorf("", m.Line, "want settings one a line, such as hostname: pi-kitchen, not in {braces}")
	}
	return m, nil
}

// findAlias finds a YAML alias (*name), which would let a value, the
// token's among them, stand in several places; "" when there is none.
func findAlias(n *yaml.Node) (line int, alias string) {
	if n.Kind == yaml.AliasNode {
		return n.Line, n.Value
	}
	for _, e := range n.Content {
		if line, alias := findAlias(e); alias != "" {
			return line, alias
		}
	}
	return 0, ""
}

// keyList lists isle.yaml's keys for an error.
func keyList() string {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.name
	}
	return strings.Join(names, ", ")
}

// errorf makes an error naming isle.yaml, the line (if known: not 0) and
// the key (if any).
func (c *Config) errorf(key string, line int, format string, args ...any) error {
	where := c.file
	if where == "" {
		where = "isle.yaml"
	}
	if line > 0 {
		where += ":" + strconv.Itoa(line)
	}
	if key != "" {
		where += ": " + key
	}
	return fmt.Errorf("firstboot: %s: %s", where, fmt.Sprintf(format, args...))
}

// keyError is errorf for a key of isle.yaml, at its line.
func (c *Config) keyError(key, format string, args ...any) error {
	return c.errorf(key, c.lines[key], format, args...)
}

// scalar reads a value that is one scalar.
func scalar(v *yaml.Node) (string, error) {
	switch {
	case v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null":
		return "", errors.New("no value (remove the line to keep the default)")
	case v.Kind != yaml.ScalarNode:
		return "", errors.New("want one value, not a list or a mapping")
	}
	return v.Value, nil
}

// scalars reads a value that is a list of scalars, or one scalar (a list
// of one).
func scalars(v *yaml.Node) ([]string, error) {
	switch v.Kind {
	case yaml.MappingNode:
		return nil, errors.New("want a value or a list of values, such as [a, b], not a mapping")
	case yaml.ScalarNode:
		s, err := scalar(v)
		if err != nil {
			return nil, err
		}
		return []string{s}, nil
	}
	vals := make([]string, 0, len(v.Content))
	for _, e := range v.Content {
		if e.Kind != yaml.ScalarNode || e.ShortTag() == "!!null" {
			return nil, errorAt(e.Line, "want each element of the list a value")
		}
		vals = append(vals, e.Value)
	}
	return vals, nil
}

func readToken(c *Config, v *yaml.Node) error {
	s, err := scalar(v)
	if err != nil {
		return err
	}
	t, err := wire.ParseToken(s) // its errors never show the secret
	if err != nil {
		return fmt.Errorf("not a join token (an agent token, as the first server keeps it in its /var/lib/isle/agent-token, or the server token of its /var/lib/isle/token): %w", err)
	}
	c.Token = t.String()
	return nil
}

func readInit(c *Config, v *yaml.Node) error {
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" {
		return errors.New("want true or false")
	}
	return v.Decode(&c.Init)
}

func readAddress(c *Config, v *yaml.Node) error {
	s, err := scalar(v)
	if err != nil || s == "dhcp" {
		return err
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return fmt.Errorf("%q: want dhcp, or a static IPv4 address with its prefix length, such as 192.168.1.50/24", s)
	}
	c.Address = p
	return nil
}

func readGateway(c *Config, v *yaml.Node) error {
	s, err := scalar(v)
	if err != nil {
		return err
	}
	if c.Gateway, err = netip.ParseAddr(s); err != nil {
		return fmt.Errorf("%q: want the router's IPv4 address, such as 192.168.1.1", s)
	}
	return nil
}

func readDNS(c *Config, v *yaml.Node) error {
	vals, err := scalars(v)
	if err != nil {
		return err
	}
	for _, s := range vals {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return fmt.Errorf("%q: want IPv4 addresses of DNS servers, such as [192.168.1.1]", s)
		}
		c.DNS = append(c.DNS, a)
	}
	return nil
}

func readLED(spec *led.Spec, v *yaml.Node) error {
	s, err := scalar(v)
	if err != nil {
		return err
	}
	return spec.Set(s)
}

func readSSHKeys(c *Config, v *yaml.Node) error {
	elems := []*yaml.Node{v}
	if v.Kind == yaml.SequenceNode {
		elems = v.Content
	}
	for _, e := range elems {
		s, err := scalar(e)
		if err != nil {
			return errorAt(e.Line, "%v", err)
		}
		s = strings.TrimSpace(s)
		if _, _, _, rest, err := ssh.ParseAuthorizedKey([]byte(s)); err != nil || len(rest) > 0 {
			return errorAt(e.Line, "want a public key (ed25519, ECDSA or RSA) as in authorized_keys or id_ed25519.pub (ssh-ed25519 AAAA... you@pc), one a list element")
		}
		c.SSHKeys = append(c.SSHKeys, s)
	}
	return nil
}

func readIsle(c *Config, v *yaml.Node) error {
	if v.Kind != yaml.MappingNode {
		return errors.New("want a mapping of isle flag names to values, such as max-pods: 30, one a line below isle:")
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, e := v.Content[i], v.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!null" {
			return errorAt(k.Line, "want a flag name before the colon")
		}
		if line, ok := seen[k.Value]; ok {
			return errorAt(k.Line, "%s: given twice (first at line %d)", k.Value, line)
		}
		seen[k.Value] = k.Line
		vals, err := scalars(e)
		if le := (*lineError)(nil); errors.As(err, &le) {
			return errorAt(le.line, "%s: %v", k.Value, le.err)
		} else if err != nil {
			return errorAt(k.Line, "%s: %v", k.Value, err)
		}
		c.Isle = append(c.Isle, Setting{Flag: k.Value, Values: vals, List: e.Kind == yaml.SequenceNode, Line: k.Line})
	}
	return nil
}

// validate checks the Config's fields, together. The role's own checks
// wait for a role: isle.yaml's, or the image's at Apply.
func (c *Config) validate() error {
	if c.Role != "" {
		if err := c.validateRole(); err != nil {
			return err
		}
	}
	if c.Token != "" {
		if _, err := wire.ParseToken(c.Token); err != nil {
			return c.keyError("token", "%v", err)
		}
	}
	if c.Init && len(c.Join) > 0 {
		return c.keyError("join", "not with init: true, which starts a new cluster (give join: to join one)")
	}
	if err := checkJoin(c.Join); err != nil {
		return c.keyError("join", "%v", err)
	}
	if c.Hostname != "" {
		if msgs := validation.IsDNS1123Label(c.Hostname); len(msgs) > 0 {
			return c.keyError("hostname", "%q: %s", c.Hostname, strings.Join(msgs, "; "))
		}
	}
	if err := c.validateNetwork(); err != nil {
		return err
	}
	if c.Interface != "" {
		if err := checkInterface(c.Interface); err != nil {
			return c.keyError("interface", "%v", err)
		}
	}
	for _, s := range c.Isle {
		if top, ok := topLevelFlags[s.Flag]; ok {
			return c.errorf("isle", s.Line, "%s: set by %s: at the top level of isle.yaml; give it there", s.Flag, top)
		}
		if s.Flag == "" || !s.List && len(s.Values) != 1 {
			return c.errorf("isle", s.Line, "%q: want a flag name and its value, or a list of values", s.Flag)
		}
	}
	return nil
}

// validateRole checks the settings that depend on the role.
func (c *Config) validateRole() error {
	switch {
	case c.Role != RoleAgent && c.Role != RoleServer:
		return c.keyError("role", "%q: want %s or %s", c.Role, RoleAgent, RoleServer)
	case c.Init && c.Role != RoleServer:
		return c.keyError("init", "only a server starts a cluster, and this board's role is %s (give role: server)", c.Role)
	case c.Token == "" && !c.Init:
		return c.keyError("token", "required to join the cluster (the first server keeps it in its /var/lib/isle/token); "+
			"after a first boot, isle firstboot moved it to %s: give it again to run it again", ConfigFile)
	}
	return nil
}

// checkJoin checks boards' addresses, host or host:port.
func checkJoin(addrs []string) error {
	for _, a := range addrs {
		host := a
		if h, port, err := net.SplitHostPort(a); err == nil {
			if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
				return fmt.Errorf("%q: port %q is not a port number 1-65535", a, port)
			}
			host = h
		}
		if _, err := netip.ParseAddr(host); err == nil {
			continue
		}
		if msgs := validation.IsDNS1123Subdomain(host); len(msgs) > 0 {
			return fmt.Errorf("%q: want a board's address or name, host or host:port", a)
		}
	}
	return nil
}

// validateNetwork checks address, gateway and dns together.
func (c *Config) validateNetwork() error {
	if !c.Address.IsValid() {
		switch {
		case c.Gateway.IsValid():
			return c.keyError("gateway", "only with a static address: (DHCP gives the gateway)")
		case len(c.DNS) > 0:
			return c.keyError("dns", "only with a static address: (DHCP gives the DNS servers)")
		}
		return nil
	}
	p := c.Address
	a := p.Addr()
	if !a.Is4() || p.Bits() < 1 || !a.IsGlobalUnicast() {
		return c.keyError("address", "%s: want an IPv4 address of the LAN with its prefix length, such as 192.168.1.50/24", p)
	}
	if isNetworkOrBroadcast(p, a) {
		return c.keyError("address", "%s is the address of the network or its broadcast address, not of a board", p)
	}
	g := c.Gateway
	switch {
	case !g.IsValid():
		return c.keyError("address", "a static address needs gateway: (the router's address)")
	case !g.Is4() || !p.Contains(g) || isNetworkOrBroadcast(p, g):
		return c.keyError("gateway", "%s: want the router's IPv4 address in %s", g, p.Masked())
	case g == a:
		return c.keyError("gateway", "%s is the board's own address: want the router's", g)
	}
	for _, d := range c.DNS {
		if !d.Is4() || d.IsUnspecified() || d.IsMulticast() {
			return c.keyError("dns", "%s: want IPv4 addresses of DNS servers", d)
		}
	}
	return nil
}

// isNetworkOrBroadcast tells whether a is the first or the last address of
// the network p, which are not boards' below /31.
func isNetworkOrBroadcast(p netip.Prefix, a netip.Addr) bool {
	if p.Bits() >= 31 {
		return false
	}
	first := p.Masked().Addr().As4()
	last := first
	for i := p.Bits(); i < 32; i++ {
		last[i/8] |= 0x80 >> (i % 8)
	}
	return a == netip.AddrFrom4(first) || a == netip.AddrFrom4(last)
}

// checkInterface checks a Linux network interface name.
func checkInterface(name string) error {
	if len(name) > 15 || name == "." || name == ".." || strings.ContainsAny(name, "/: \t\n\x00") {
		return fmt.Errorf("%q: want a network interface's name, such as eth0", name)
	}
	return nil
}
