package main

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// writeConfig writes content to a config file under t.TempDir.
func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// configure builds the command (without running it) under an `isle` root,
// parses args as cobra would, and applies the config file.
func configure(t *testing.T, newCmd func() *cobra.Command, args ...string) (*pflag.FlagSet, error) {
	t.Helper()
	cmd := newCmd()
	(&cobra.Command{Use: "isle"}).AddCommand(cmd)
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return cmd.Flags(), applyConfigFile(cmd)
}

// flagValues returns the named flags' values as strings.
func flagValues(t *testing.T, fl *pflag.FlagSet, names ...string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, n := range names {
		f := fl.Lookup(n)
		if f == nil {
			t.Fatalf("no flag %s", n)
		}
		got[n] = f.Value.String()
	}
	return got
}

func TestConfigFileSetsAgentFlags(t *testing.T) {
	path := writeConfig(t, `# an agent board
join: [10.0.0.2, "10.0.0.3:7946"]
token: ISLE1::0123abcd::secretsecret
name: pi5
mdns: false
max-pods: 50
pod-resync: 2m
registry-mirror:
  - registry.lan=http://10.0.0.9:5000
  - registry.example.org=http://10.0.0.9:5001,5002
led-ready: gpio17
led-activity: sysfs:ACT
`)
	fl, err := configure(t, newAgentCommand, "--config", path)
	if err != nil {
		t.Fatal(err)
	}
	join, _ := fl.GetStringSlice("join")
	mirrors, _ := fl.GetStringArray("registry-mirror")
	mdns, _ := fl.GetBool("mdns")
	maxPods, _ := fl.GetInt("max-pods")
	resync, _ := fl.GetDuration("pod-resync")
	if want := []string{"10.0.0.2", "10.0.0.3:7946"}; !reflect.DeepEqual(join, want) {
		t.Errorf("join = %q, want %q", join, want)
	}
	if want := []string{"registry.lan=http://10.0.0.9:5000", "registry.example.org=http://10.0.0.9:5001,5002"}; !reflect.DeepEqual(mirrors, want) {
		t.Errorf("registry-mirror = %q, want %q (each element one value, commas kept)", mirrors, want)
	}
	if mdns || maxPods != 50 || resync != 2*time.Minute {
		t.Errorf("mdns, max-pods, pod-resync = %v, %d, %v; want false, 50, 2m", mdns, maxPods, resync)
	}
	want := map[string]string{"token": "ISLE1::0123abcd::secretsecret", "name": "pi5", "led-ready": "gpio17", "led-activity": "sysfs:ACT"}
	if got := flagValues(t, fl, "token", "name", "led-ready", "led-activity"); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for _, n := range []string{"name", "join", "registry-mirror", "led-ready"} {
		if !fl.Changed(n) {
			t.Errorf("%s from the file does not count as given", n)
		}
	}
	if fl.Changed("address") {
		t.Error("address counts as given, but neither the file nor the command line has it")
	}
}

func TestConfigFileSetsServerFlags(t *testing.T) {
	path := writeConfig(t, `init: true
join: 10.0.0.2,10.0.0.3
remove-dead-after: 5m
snapshot-entries: 1000
insecure-registry: 10.0.0.9:5000
vip: 192.168.1.10
`)
	fl, err := configure(t, newServerCommand, "--config", path)
	if err != nil {
		t.Fatal(err)
	}
	init, _ := fl.GetBool("init")
	join, _ := fl.GetStringSlice("join")
	dead, _ := fl.GetDuration("remove-dead-after")
	entries, _ := fl.GetUint64("snapshot-entries")
	insecure, _ := fl.GetStringArray("insecure-registry")
	vip, _ := fl.GetString("vip")
	if !init || dead != 5*time.Minute || entries != 1000 || vip != "192.168.1.10" {
		t.Errorf("init, remove-dead-after, snapshot-entries, vip = %v, %v, %d, %q", init, dead, entries, vip)
	}
	if want := []string{"10.0.0.2", "10.0.0.3"}; !reflect.DeepEqual(join, want) {
		t.Errorf("join = %q, want %q (a scalar is set as on the command line)", join, want)
	}
	if want := []string{"10.0.0.9:5000"}; !reflect.DeepEqual(insecure, want) {
		t.Errorf("insecure-registry = %q, want %q", insecure, want)
	}
}

func TestCommandLineWinsOverConfigFile(t *testing.T) {
	path := writeConfig(t, `name: pi5
join: [10.0.0.2, 10.0.0.3]
led-ready: gpio17
max-pods: 50
`)
	fl, err := configure(t, newAgentCommand, "--config", path, "--name", "pi9", "--join", "10.0.0.7", "--led-ready", "gpio27")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"name": "pi9", "join": "[10.0.0.7]", "led-ready": "gpio27", "max-pods": "50"}
	if got := flagValues(t, fl, "name", "join", "led-ready", "max-pods"); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestConfigFileDefault(t *testing.T) {
	cmd := newServerCommand()
	if def := cmd.PersistentFlags().Lookup("config").DefValue; def != "/etc/isle/config.yaml" {
		t.Errorf("--config defaults to %q", def)
	}
	// Stand in for the default path: a value that is not marked as given.
	useDefault := func(path string) func() *cobra.Command {
		return func() *cobra.Command {
			cmd := newAgentCommand()
			if err := cmd.PersistentFlags().Lookup("config").Value.Set(path); err != nil {
				t.Fatal(err)
			}
			return cmd
		}
	}
	absent := filepath.Join(t.TempDir(), "config.yaml")
	if _, err := configure(t, useDefault(absent)); err != nil {
		t.Errorf("absent default file: %v", err)
	}
	fl, err := configure(t, useDefault(writeConfig(t, "max-pods: 7\n")))
	if n, _ := fl.GetInt("max-pods"); err != nil || n != 7 {
		t.Errorf("default file present: max-pods %d, err %v; want 7 from the file", n, err)
	}
	if _, err := configure(t, newAgentCommand, "--config", absent); err == nil || !strings.Contains(err.Error(), absent) {
		t.Errorf("absent file given with --config: got %v, want an error naming it", err)
	}
	// The island's boards: no file at all, not even the machine's default.
	fl, err = configure(t, useDefault(writeConfig(t, "max-pods: 7\n")), "--config", "")
	if n, _ := fl.GetInt("max-pods"); err != nil || n != 110 {
		t.Errorf("--config \"\": max-pods %d, err %v; want the default 110, no file read", n, err)
	}
}

func TestConfigFileWithoutSettings(t *testing.T) {
	for _, content := range []string{"", "# nothing yet\n", "---\n", "{}\n"} {
		fl, err := configure(t, newAgentCommand, "--config", writeConfig(t, content))
		if err != nil {
			t.Errorf("%q: %v", content, err)
			continue
		}
		if fl.Changed("token") || fl.Changed("join") {
			t.Errorf("%q: flags count as given", content)
		}
	}
}

func TestConfigFileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		want          []string // substrings of the error besides the path
	}{
		{"unknown key", "name: pi5\nled-redy: gpio17\n", []string{":2: led-redy: no such flag of isle agent", "did you mean led-ready?"}},
		{"key with underscores", "max_pods: 5\n", []string{":1: max_pods: no such flag", "did you mean max-pods?"}},
		{"server flag on an agent", "init: true\n", []string{":1: init: no such flag of isle agent"}},
		{"config in the file", "config: /etc/other.yaml\n", []string{":1: config: not allowed"}},
		{"nested mapping", "name: pi5\ntoken:\n  secret: ISLE1::x\n", []string{":2: token: want a value", "not a mapping"}},
		{"null value", "token:\n", []string{":1: token: no value"}},
		{"explicit null", "name: ~\n", []string{":1: name: no value"}},
		{"list for a single value", "token: [ISLE1::secretsecret]\n", []string{":1: token: takes one value, not a list"}},
		{"list of lists", "join:\n  - [10.0.0.2]\n", []string{":1: join: line 2: want each element a value"}},
		{"value the flag rejects", "max-pods: many\n", []string{":1: max-pods: invalid argument", "--max-pods"}},
		{"LED the flag rejects", "led-ready: blinkenlights\n", []string{":1: led-ready: invalid argument"}},
		{"bool as yes", "mdns: yes\n", []string{":1: mdns: invalid argument"}},
		{"duplicate key", "name: pi5\njoin: 10.0.0.2\nname: pi6\n", []string{":3: name: given twice (first at line 1)"}},
		{"not a mapping", "- join\n- token\n", []string{":1: want a mapping"}},
		{"plain text", "join 10.0.0.2\n", []string{":1: want a mapping"}},
		{"bad YAML", "join: [10.0.0.2\n", []string{"yaml: line"}},
		{"two documents", "name: pi5\n---\nname: pi6\n", []string{"one YAML document"}},
		{"too large", strings.Repeat("#\n", 40<<10), []string{"larger than 64 KiB"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, tc.content)
			_, err := configure(t, newAgentCommand, "--config", path)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			for _, w := range append([]string{"agent: config file " + path}, tc.want...) {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
			if strings.Contains(msg, "secret") {
				t.Errorf("error %q shows the token", msg)
			}
		})
	}
}

// TestConfigFileBeforeRun checks the wiring: cobra applies the file after
// parsing the command line and before RunE, for both commands.
func TestConfigFileBeforeRun(t *testing.T) {
	path := writeConfig(t, "name: pi5\nmax-pods: 50\n")
	for _, sub := range []string{"server", "agent"} {
		root := newRootCommand()
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		cmd, _, err := root.Find([]string{sub})
		if err != nil {
			t.Fatal(err)
		}
		var name string
		cmd.RunE = func(cmd *cobra.Command, _ []string) error { // instead of running a board
			if cmd.Flags().Changed("name") {
				name, _ = cmd.Flags().GetString("name")
			}
			return nil
		}
		root.SetArgs([]string{sub, "--config", path, "--max-pods", "9"})
		if err := root.Execute(); err != nil {
			t.Fatalf("%s: %v", sub, err)
		}
		if n, _ := cmd.Flags().GetInt("max-pods"); name != "pi5" || n != 9 {
			t.Errorf("%s: RunE saw name %q (given: pi5 in the file), max-pods %d (given: 9 on the command line)", sub, name, n)
		}
	}
}

// TestDeployConfigExample keeps deploy/config.yaml a file isle agent takes.
func TestDeployConfigExample(t *testing.T) {
	// Installed as /etc/isle/config.yaml is, readable by its owner alone.
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	fl, err := configure(t, newAgentCommand, "--config", path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"join": "[192.168.1.11,192.168.1.12]", "led-ready": "gpio17", "led-activity": "sysfs:ACT", "max-pods": "30"}
	if got := flagValues(t, fl, "join", "led-ready", "led-activity", "max-pods"); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
