package firstboot_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/images/firstboot"
)

// testToken is a well-formed cluster token.
const testToken = "ISLE1::0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef::abcdefghijklmnopqrstuvwxyz234567"

// testSSHKey is a well-formed public key.
const testSSHKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICE8pRXBZYhHlkegA5gL392Cvsuxtj3yaHTZNDzV66S9 you@pc"

// debianHosts is /etc/hosts as Debian's root filesystem has it.
const debianHosts = "127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\nff02::1\t\tip6-allnodes\nff02::2\t\tip6-allrouters\n"

// fullSettings sets every key of isle.yaml.
const fullSettings = `# the kitchen's board
role: agent
token: ` + testToken + `   # from the first server
join: [192.168.1.10, "pi-1.lan:7946"]
hostname: pi-kitchen
address: 192.168.1.50/24
gateway: 192.168.1.1
dns: [192.168.1.1, 192.168.1.2]
interface: eth0
led-ready: gpio17
led-activity: sysfs:ACT
ssh-authorized-keys:
  - ` + testSSHKey + `
  - "` + testSSHKey + `-laptop"
isle:
  max-pods: 30
  registry-mirror: [registry.lan=http://192.168.1.5:5000]
  mdns: false
`

// writeBoot writes isle.yaml in a temporary boot partition and returns
// its path.
func writeBoot(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "isle.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// parse parses text as isle.yaml at path.
func parse(t *testing.T, path, text string) *firstboot.Config {
	t.Helper()
	c, err := firstboot.Parse(path, []byte(text))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

// newRoot returns a board's root filesystem with Debian's /etc/hosts.
func newRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/hosts"), []byte(debianHosts), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// readFile returns a file's text under root.
func readFile(t *testing.T, root, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkFile checks a file's text and mode under root.
func checkFile(t *testing.T, root, name, want string, mode os.FileMode) {
	t.Helper()
	if got := readFile(t, root, name); got != want {
		t.Errorf("%s:\n%s\nwant:\n%s", name, got, want)
	}
	fi, err := os.Stat(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != mode {
		t.Errorf("%s: mode %v, want %v", name, fi.Mode().Perm(), mode)
	}
}

// checkConfig checks config.yaml under root: its header, written between
// before and now, then body.
func checkConfig(t *testing.T, root, isleYAML string, before time.Time, body string) {
	t.Helper()
	got := readFile(t, root, firstboot.ConfigFile)
	for _, at := range []time.Time{before, time.Now()} {
		want := "# Written by isle firstboot from " + isleYAML + " on " + at.UTC().Format(time.DateOnly) + ".\n" +
			"# isle server and isle agent read it: its keys are their flags' names.\n" + body
		if got == want {
			checkFile(t, root, firstboot.ConfigFile, want, 0o600)
			return
		}
	}
	t.Errorf("config.yaml:\n%s\nwant the header, then:\n%s", got, body)
}

// checkUnit checks that the role's unit, and only it, is enabled.
func checkUnit(t *testing.T, root, role string) {
	t.Helper()
	wants := filepath.Join(root, "etc/systemd/system/multi-user.target.wants")
	for _, r := range []string{"agent", "server"} {
		target, err := os.Readlink(filepath.Join(wants, "isle-"+r+".service"))
		switch {
		case r == role && err != nil:
			t.Errorf("isle-%s.service not enabled: %v", r, err)
		case r == role && target != "/lib/systemd/system/isle-"+r+".service":
			t.Errorf("isle-%s.service links to %s", r, target)
		case r != role && !os.IsNotExist(err):
			t.Errorf("isle-%s.service enabled too (%q, %v)", r, target, err)
		}
	}
	if entries, _ := os.ReadDir(wants); len(entries) != 1 {
		t.Errorf("%s holds %d entries, want 1", wants, len(entries))
	}
}

func TestApplyFullSettings(t *testing.T) {
	boot := writeBoot(t, fullSettings)
	c := parse(t, boot, fullSettings)
	root := newRoot(t)
	// A server's link from an earlier run is replaced by the agent's.
	wants := filepath.Join(root, "etc/systemd/system/multi-user.target.wants")
	if err := os.MkdirAll(wants, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/lib/systemd/system/isle-server.service", filepath.Join(wants, "isle-server.service")); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if err := firstboot.Apply(root, c, firstboot.Board{Serial: "10000000d94a609b"}); err != nil {
		t.Fatal(err)
	}
	checkConfig(t, root, boot, before, `token: `+testToken+`
join:
  - 192.168.1.10
  - pi-1.lan:7946
name: pi-kitchen
address: 192.168.1.50
led-ready: gpio17
led-activity: sysfs:ACT
max-pods: 30
registry-mirror:
  - registry.lan=http://192.168.1.5:5000
mdns: false
`)
	checkFile(t, root, "etc/hostname", "pi-kitchen\n", 0o644)
	checkFile(t, root, "etc/hosts", "127.0.0.1\tlocalhost\n127.0.1.1\tpi-kitchen\n::1\t\tlocalhost ip6-localhost ip6-loopback\nff02::1\t\tip6-allnodes\nff02::2\t\tip6-allrouters\n", 0o644)
	checkFile(t, root, firstboot.NetworkFile, "# Written by isle firstboot from "+boot+".\n[Match]\nName=eth0\n\n[Network]\n"+
		"Address=192.168.1.50/24\nGateway=192.168.1.1\nDNS=192.168.1.1\nDNS=192.168.1.2\n", 0o644)
	checkUnit(t, root, "agent")
	checkFile(t, root, firstboot.SSHKeysFile, testSSHKey+"\n"+testSSHKey+"-laptop\n", 0o600)
	if fi, err := os.Stat(filepath.Join(root, "root/.ssh")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("root's .ssh: %v, %v; want mode 0700 (sshd refuses keys others can reach)", fi, err)
	}

	if err := firstboot.RemoveToken(boot, c); err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(fullSettings, "token: "+testToken+"   # from the first server\n",
		"# token: moved to /etc/isle/config.yaml (readable by root only)\n", 1)
	checkFile(t, filepath.Dir(boot), "isle.yaml", want, 0o600)
	if _, err := os.Stat(boot + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("isle.yaml.tmp left behind: %v", err)
	}
	// Run again, it asks for the token, and says where it went.
	if _, err := firstboot.Parse(boot, []byte(want)); err == nil || !strings.Contains(err.Error(), "token: required") ||
		!strings.Contains(err.Error(), "moved it to /etc/isle/config.yaml") {
		t.Errorf("isle.yaml without the token: Parse error %v, want token: required, moved", err)
	}
}

func TestNetwork(t *testing.T) {
	for _, tc := range []struct {
		name, settings, network, address string
	}{
		{"default", "", "DHCP=ipv4\n", "auto"},
		{"dhcp", "address: dhcp\ninterface: end0\n", "DHCP=ipv4\n", "auto"},
		{"static", "address: 10.1.2.3/8\ngateway: 10.0.0.1\n", "Address=10.1.2.3/8\nGateway=10.0.0.1\nDNS=10.0.0.1\n", "10.1.2.3"},
		{"point-to-point", "address: 192.168.7.1/31\ngateway: 192.168.7.0\ndns: 9.9.9.9\n", "Address=192.168.7.1/31\nGateway=192.168.7.0\nDNS=9.9.9.9\n", "192.168.7.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := "role: server\ninit: true\nhostname: s1\n" + tc.settings
			c := parse(t, "/boot/isle.yaml", text)
			root := newRoot(t)
			before := time.Now()
			if err := firstboot.Apply(root, c, firstboot.Board{}); err != nil {
				t.Fatal(err)
			}
			ifname := "eth0"
			if c.Interface != "" {
				ifname = c.Interface
			}
			checkFile(t, root, firstboot.NetworkFile, "# Written by isle firstboot from /boot/isle.yaml.\n[Match]\nName="+ifname+
				"\n\n[Network]\n"+tc.network, 0o644)
			checkConfig(t, root, "/boot/isle.yaml", before, "init: true\nname: s1\naddress: "+tc.address+"\n")
			checkUnit(t, root, "server")
		})
	}
}

func TestDefaultHostname(t *testing.T) {
	for _, tc := range []struct {
		name  string
		board firstboot.Board
		want  string
	}{
		{"serial", firstboot.Board{Serial: "10000000D94A609B", MAC: "dc:a6:32:01:02:03"}, "isle-4a609b"},
		{"short serial", firstboot.Board{Serial: "9b"}, "isle-9b"},
		{"MAC", firstboot.Board{MAC: "DC:A6:32:0A:0B:0C"}, "isle-0a0b0c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := firstboot.DefaultHostname(tc.board)
			if err != nil || got != tc.want {
				t.Fatalf("DefaultHostname(%+v) = %q, %v; want %q", tc.board, got, err, tc.want)
			}
			root := newRoot(t)
			c := parse(t, "isle.yaml", "token: "+testToken+"\n")
			c.Role = "agent"
			if err := firstboot.Apply(root, c, tc.board); err != nil {
				t.Fatal(err)
			}
			checkFile(t, root, "etc/hostname", tc.want+"\n", 0o644)
			if cfg := readFile(t, root, firstboot.ConfigFile); !strings.Contains(cfg, "\nname: "+tc.want+"\n") {
				t.Errorf("config.yaml without name: %s:\n%s", tc.want, cfg)
			}
		})
	}
	for _, b := range []firstboot.Board{{}, {Serial: "not-hex"}, {MAC: "dc:a6"}} {
		if got, err := firstboot.DefaultHostname(b); err == nil {
			t.Errorf("DefaultHostname(%+v) = %q, want an error", b, got)
		}
	}
	c := parse(t, "/boot/isle.yaml", "token: "+testToken+"\n")
	c.Role = "agent"
	err := firstboot.Apply(t.TempDir(), c, firstboot.Board{})
	if err == nil || !strings.Contains(err.Error(), "/boot/isle.yaml: hostname: not given") {
		t.Errorf("Apply on a board without serial and MAC: %v, want an error naming hostname", err)
	}
}

func TestHosts(t *testing.T) {
	for _, tc := range []struct{ name, hosts, want string }{
		{"replaced in place", "127.0.0.1 localhost\n::1 localhost\n127.0.1.1 raspberrypi\n", "127.0.0.1 localhost\n::1 localhost\n127.0.1.1\tb1\n"},
		{"further ones dropped", "127.0.1.1 a\n# keep me\n127.0.1.1 b\n", "127.0.1.1\tb1\n# keep me\n"},
		{"added at the end", "::1 localhost", "::1 localhost\n127.0.1.1\tb1\n"},
		{"empty", "", "127.0.1.1\tb1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := newRoot(t)
			if err := os.WriteFile(filepath.Join(root, "etc/hosts"), []byte(tc.hosts), 0o644); err != nil {
				t.Fatal(err)
			}
			c := parse(t, "isle.yaml", "role: server\ninit: true\nhostname: b1\n")
			if err := firstboot.Apply(root, c, firstboot.Board{}); err != nil {
				t.Fatal(err)
			}
			checkFile(t, root, "etc/hosts", tc.want, 0o644)
		})
	}
	root := t.TempDir()
	c := parse(t, "isle.yaml", "role: server\ninit: true\nhostname: b1\n")
	if err := firstboot.Apply(root, c, firstboot.Board{}); err != nil {
		t.Fatal(err)
	}
	checkFile(t, root, "etc/hosts", "127.0.0.1\tlocalhost\n127.0.1.1\tb1\n", 0o644)
}

func TestRemoveToken(t *testing.T) {
	const moved = "# token: moved to /etc/isle/config.yaml (readable by root only)"
	for _, tc := range []struct{ name, text, want string }{
		{"one line",
			"# head\nrole: agent\n\n# the token:\ntoken: " + testToken + "\n# after\nhostname: h # the name\n",
			"# head\nrole: agent\n\n# the token:\n" + moved + "\n# after\nhostname: h # the name\n"},
		{"last line without newline",
			"hostname: h\ntoken: '" + testToken + "'",
			"hostname: h\n" + moved},
		{"value on the next line",
			"token:\n  " + testToken + "\n  # a comment\nhostname: h\n",
			moved + "\n  # a comment\nhostname: h\n"},
		{"double-quoted on several lines",
			"token: \"" + testToken[:40] + "\\\n  " + testToken[40:] + "\"\n\nhostname: h\n",
			moved + "\n\nhostname: h\n"},
		{"block scalar with a blank line",
			"token: >-\n\n  " + testToken + "\n\n# a comment\nhostname: h\n",
			moved + "\n\n# a comment\nhostname: h\n"},
		{"CRLF",
			"role: agent\r\ntoken: " + testToken + "\r\nhostname: h\r\n",
			"role: agent\r\n" + moved + "\r\nhostname: h\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeBoot(t, tc.text)
			c := parse(t, path, tc.text)
			if c.Token != testToken {
				t.Fatalf("token %q, want %q", c.Token, testToken)
			}
			if err := firstboot.RemoveToken(path, c); err != nil {
				t.Fatal(err)
			}
			checkFile(t, filepath.Dir(path), "isle.yaml", tc.want, 0o600)
		})
	}
	// Without a token, isle.yaml is left alone.
	text := "role: server\ninit: true\n"
	path := writeBoot(t, text)
	if err := firstboot.RemoveToken(path, parse(t, path, text)); err != nil {
		t.Fatal(err)
	}
	checkFile(t, filepath.Dir(path), "isle.yaml", text, 0o644)
}

func TestDone(t *testing.T) {
	root := t.TempDir()
	if done, err := firstboot.IsDone(root); done || err != nil {
		t.Fatalf("IsDone of a new board = %v, %v", done, err)
	}
	if err := firstboot.MarkDone(root, time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	if done, err := firstboot.IsDone(root); !done || err != nil {
		t.Fatalf("IsDone after MarkDone = %v, %v", done, err)
	}
	checkFile(t, root, firstboot.DoneFile, "isle firstboot applied isle.yaml on 2025-06-01T12:00:00Z\n", 0o644)

	// Applying again writes the same files.
	c := parse(t, "isle.yaml", fullSettings)
	if err := firstboot.Apply(root, c, firstboot.Board{}); err != nil {
		t.Fatal(err)
	}
	var first []string
	for _, name := range []string{firstboot.ConfigFile, "etc/hostname", "etc/hosts", firstboot.NetworkFile} {
		first = append(first, readFile(t, root, name))
	}
	if err := firstboot.Apply(root, c, firstboot.Board{}); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{firstboot.ConfigFile, "etc/hostname", "etc/hosts", firstboot.NetworkFile} {
		if got := readFile(t, root, name); got != first[i] {
			t.Errorf("%s changed when applied again:\n%s\nwas:\n%s", name, got, first[i])
		}
	}
	checkUnit(t, root, "agent")
}

func TestExample(t *testing.T) {
	// Every setting of the example, its # removed, is one Parse knows.
	uncomment := regexp.MustCompile(`(?m)^#([a-z]|  )`)
	text := uncomment.ReplaceAllString(firstboot.Example, "$1")
	text = strings.Replace(text, "token: ISLE1::<CA hash>::<id>.<secret>::<gossip key>", "token: "+testToken, 1)
	text = strings.Replace(text, "\ninit: true\n", "\ninit: false\n", 1)
	c, err := firstboot.Parse("isle.yaml.example", []byte(text))
	if err != nil {
		t.Fatalf("the example, uncommented:\n%s\n%v", text, err)
	}
	if c.Role != "agent" || c.Token != testToken || len(c.Isle) != 2 || c.Hostname == "" || !c.Address.IsValid() ||
		c.LEDReady.String() == "" || c.LEDActivity.String() == "" || len(c.Join) != 1 || len(c.DNS) != 1 || c.Interface == "" {
		t.Errorf("the example, uncommented, does not set every setting: %+v", c)
	}
	// As shipped, it sets nothing.
	c, err = firstboot.Parse("isle.yaml", []byte(firstboot.Example))
	if err != nil || c.Role != "" || c.Token != "" || len(c.Isle) != 0 {
		t.Errorf("the example as shipped: %+v, %v; want no settings", c, err)
	}
}

func TestBadSettings(t *testing.T) {
	tok := "token: " + testToken + "\n"
	for _, tc := range []struct {
		name, text string
		want       string // in the error, after "isle.yaml:"
	}{
		{"unknown key", tok + "hostnme: a\n", "2: hostnme: no such setting"},
		{"twice", tok + "hostname: a\nhostname: b\n", "3: hostname: given twice (first at line 2)"},
		{"role", "role: worker\n" + tok, "1: role: \"worker\""},
		{"init on an agent", "role: agent\ninit: true\n", "2: init: only a server"},
		{"init not a bool", "role: server\ninit: yes\n", "2: init: want true or false"},
		{"init and join", "role: server\ninit: true\njoin: [a]\n", "3: join: not with init"},
		{"no token", "role: agent\n", "isle.yaml: token: required"},
		{"bad token", "role: agent\ntoken: ISLE1::abc::def\n", "2: token: not a join token"},
		{"token a list", "token: [a]\n", "1: token: want one value"},
		{"empty value", tok + "hostname:\n", "2: hostname: no value"},
		{"join element", tok + "join:\n  - a\n  - [b]\n", "4: join: want each element"},
		{"join port", tok + "join: [a:99999]\n", "2: join: \"a:99999\""},
		{"join host", tok + "join: [\"a b\"]\n", "2: join: \"a b\""},
		{"hostname", tok + "hostname: Pi_Kitchen\n", "2: hostname: \"Pi_Kitchen\""},
		{"long hostname", tok + "hostname: " + strings.Repeat("a", 64) + "\n", "2: hostname:"},
		{"address", tok + "address: 192.168.1.50\n", "2: address: \"192.168.1.50\""},
		{"IPv6 address", tok + "address: fd00::5/64\ngateway: fd00::1\n", "2: address: fd00::5/64"},
		{"network address", tok + "address: 192.168.1.0/24\ngateway: 192.168.1.1\n", "2: address: 192.168.1.0/24 is the address of the network"},
		{"broadcast address", tok + "address: 192.168.1.255/24\ngateway: 192.168.1.1\n", "2: address: 192.168.1.255/24 is"},
		{"no gateway", tok + "address: 192.168.1.50/24\n", "2: address: a static address needs gateway"},
		{"gateway outside", tok + "address: 192.168.1.50/24\ngateway: 192.168.2.1\n", "3: gateway: 192.168.2.1"},
		{"gateway with dhcp", tok + "gateway: 192.168.1.1\n", "2: gateway: only with a static address"},
		{"dns with dhcp", tok + "dns: [1.1.1.1]\n", "2: dns: only with a static address"},
		{"dns", tok + "address: 192.168.1.50/24\ngateway: 192.168.1.1\ndns: [dns.lan]\n", "4: dns: \"dns.lan\""},
		{"interface", tok + "interface: eth0/1\n", "2: interface: \"eth0/1\""},
		{"led", tok + "led-ready: gpio99\n", "2: led-ready: hw: led \"gpio99\""},
		{"ssh key", tok + "ssh-authorized-keys:\n  - " + testSSHKey + "\n  - ssh-ed25519 AAAA you@pc\n", "4: ssh-authorized-keys: want a public key"},
		{"ssh private key", tok + "ssh-authorized-keys: -----BEGIN OPENSSH PRIVATE KEY-----\n", "2: ssh-authorized-keys: want a public key"},
		{"ssh two keys a line", tok + "ssh-authorized-keys: \"" + testSSHKey + "\\n" + testSSHKey + "\"\n", "2: ssh-authorized-keys: want a public key"},
		{"isle not a mapping", tok + "isle: [a]\n", "2: isle: want a mapping"},
		{"isle value a mapping", tok + "isle:\n  max-pods: {a: 1}\n", "3: isle: max-pods: want a value or a list"},
		{"isle sets a top-level key", tok + "isle:\n  max-pods: 3\n  name: x\n", "4: isle: name: set by hostname:"},
		{"isle null", tok + "isle:\n  max-pods:\n", "3: isle: max-pods: no value"},
		{"isle twice", tok + "isle:\n  max-pods: 3\n  max-pods: 4\n", "4: isle: max-pods: given twice"},
		{"alias", "x: &t " + testToken + "\ntoken: *t\n", "2: aliases (*t)"},
		{"not a mapping", "- token\n", "1: want settings"},
		{"flow mapping", "{token: " + testToken + "}\n", "1: want settings one a line"},
		{"key not a name", tok + "[a]: b\n", "2: want a setting's name"},
		{"two documents", tok + "---\nrole: agent\n", "isle.yaml: want one YAML document"},
		{"YAML syntax", tok + "hostname: a: b\n", "isle.yaml: yaml: line 2"},
		{"token lines not removable", "token: \"" + testToken[:40] + "\\\n" + testToken[40:] + "\"\n", "1: token: cannot be moved off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := firstboot.Parse("/boot/isle.yaml", []byte(tc.text))
			if err == nil {
				if c.Role == "" {
					c.Role = "agent"
				}
				err = firstboot.Apply(t.TempDir(), c, firstboot.Board{Serial: "abc123"})
			}
			want := "firstboot: /boot/isle.yaml:" + tc.want
			if strings.HasPrefix(tc.want, "isle.yaml") {
				want = "firstboot: /boot/" + tc.want
			}
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("error %v, want one containing %q", err, want)
			}
			if err != nil && strings.Contains(err.Error(), testToken[10:]) {
				t.Errorf("error %v shows the token", err)
			}
		})
	}
}
