package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/isle-cluster/isle/images/firstboot"
)

// fbSecret is the secret of fbToken, which no log may show.
const (
	fbSecret = "abcdefghijklmnopqrstuvwxyz234567"
	fbToken  = "ISLE1::0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef::" + fbSecret
)

// firstbootDirs makes a boot partition holding isle.yaml (unless empty)
// and a board's root filesystem with a device-tree serial number.
func firstbootDirs(t *testing.T, isleYAML string) (boot, root string) {
	t.Helper()
	boot, root = t.TempDir(), t.TempDir()
	if isleYAML != "" {
		writeTestFile(t, filepath.Join(boot, "isle.yaml"), isleYAML)
	}
	writeTestFile(t, filepath.Join(root, "proc/device-tree/serial-number"), "10000000d94a609b\x00")
	writeTestFile(t, filepath.Join(root, "etc/hosts"), "127.0.0.1\tlocalhost\n")
	return boot, root
}

func writeTestFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// runIsle runs isle with args and returns its error and what it wrote.
func runIsle(args ...string) (string, error) {
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestFirstbootCommand(t *testing.T) {
	boot, root := firstbootDirs(t, "# my board\ntoken: "+fbToken+"\njoin: [10.0.0.2, 10.0.0.3]\nled-ready: gpio17:active-low\n"+
		"isle:\n  max-pods: 30\n  registry-mirror: [registry.lan=http://10.0.0.9:5000]\n")
	args := []string{"firstboot", "--boot", boot, "--root", root, "--role", "agent"}
	out, err := runIsle(args...)
	if err != nil {
		t.Fatalf("isle firstboot: %v\n%s", err, out)
	}
	if strings.Contains(out, fbSecret) {
		t.Errorf("the log shows the token:\n%s", out)
	}
	if !strings.Contains(out, "hostname=isle-4a609b") || !strings.Contains(out, "first boot done") {
		t.Errorf("the log does not say what was done:\n%s", out)
	}
	config, err := os.ReadFile(filepath.Join(root, firstboot.ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\ntoken: " + fbToken + "\n", "\nname: isle-4a609b\n", "\naddress: auto\n", "\nmax-pods: 30\n"} {
		if !bytes.Contains(config, []byte(want)) {
			t.Errorf("config.yaml lacks %q:\n%s", want, config)
		}
	}
	if _, err := os.Readlink(filepath.Join(root, "etc/systemd/system/multi-user.target.wants/isle-agent.service")); err != nil {
		t.Errorf("isle-agent.service not enabled: %v", err)
	}
	moved, err := os.ReadFile(filepath.Join(boot, "isle.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "# my board\n# token: moved to /etc/isle/config.yaml (readable by root only)\njoin: [10.0.0.2, 10.0.0.3]\n" +
		"led-ready: gpio17:active-low\nisle:\n  max-pods: 30\n  registry-mirror: [registry.lan=http://10.0.0.9:5000]\n"; string(moved) != want {
		t.Errorf("isle.yaml after first boot:\n%s\nwant:\n%s", moved, want)
	}
	if done, err := firstboot.IsDone(root); !done || err != nil {
		t.Errorf("first boot not marked done: %v, %v", done, err)
	}
	// isle agent takes the config.yaml written.
	fl, err := configure(t, newAgentCommand, "--config", filepath.Join(root, firstboot.ConfigFile))
	if err != nil {
		t.Fatalf("isle agent --config: %v", err)
	}
	got := flagValues(t, fl, "token", "join", "name", "address", "led-ready", "max-pods", "registry-mirror")
	want := map[string]string{"token": fbToken, "join": "[10.0.0.2,10.0.0.3]", "name": "isle-4a609b", "address": "auto",
		"led-ready": "gpio17:active-low", "max-pods": "30", "registry-mirror": "[registry.lan=http://10.0.0.9:5000]"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("isle agent's flags from config.yaml:\n%v\nwant:\n%v", got, want)
	}

	// Done: a second run changes nothing, though isle.yaml did.
	// A token other than the one applied stays where the user wrote it.
	other := strings.Replace(fbToken, "0123", "4567", 1)
	writeTestFile(t, filepath.Join(boot, "isle.yaml"), "hostname: other\ntoken: "+other+"\n")
	if out, err := runIsle(args...); err != nil || !strings.Contains(out, "already done") {
		t.Fatalf("isle firstboot again: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(filepath.Join(boot, "isle.yaml")); !strings.Contains(string(got), other) {
		t.Errorf("a token not applied was moved off isle.yaml:\n%s", got)
	}
	if got, _ := os.ReadFile(filepath.Join(root, firstboot.ConfigFile)); !bytes.Equal(got, config) {
		t.Errorf("config.yaml changed by a second run:\n%s", got)
	}
	// A power cut between the done mark and the token's move: the next
	// boot moves the token it applied (and no other).
	writeTestFile(t, filepath.Join(boot, "isle.yaml"), "join: [10.0.0.2]\ntoken: "+fbToken+"\n")
	if out, err := runIsle(args...); err != nil || !strings.Contains(out, "token moved") {
		t.Fatalf("isle firstboot after a power cut: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(filepath.Join(boot, "isle.yaml")); strings.Contains(string(got), fbSecret) {
		t.Errorf("the applied token left on the boot partition:\n%s", got)
	}
	if got, _ := os.ReadFile(filepath.Join(root, firstboot.ConfigFile)); !bytes.Equal(got, config) {
		t.Errorf("config.yaml changed by a run after the first boot:\n%s", got)
	}
	// --force runs it again.
	writeTestFile(t, filepath.Join(boot, "isle.yaml"), "hostname: other\ntoken: "+fbToken+"\n")
	if out, err := runIsle(append(args, "--force")...); err != nil {
		t.Fatalf("isle firstboot --force: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "etc/hostname")); string(got) != "other\n" {
		t.Errorf("hostname after --force: %q, want other", got)
	}
}

func TestFirstbootCommandErrors(t *testing.T) {
	for _, tc := range []struct {
		name, isleYAML string
		args           []string
		want           string
	}{
		{"no isle.yaml", "", nil, "isle.yaml not found: write this board's settings there"},
		{"no role", "token: " + fbToken + "\n", []string{"--role", ""}, `--role "": want agent or server`},
		{"not an agent's flag", "token: " + fbToken + "\nisle:\n  max-pods: 3\n  api-port: 7\n", nil,
			"isle.yaml:4: isle: api-port: no such flag of isle agent"},
		{"misspelt flag", "role: server\ninit: true\nisle:\n  max-podz: 3\n", nil,
			"isle.yaml:4: isle: max-podz: no such flag of isle server (did you mean max-pods?)"},
		{"bad value", "token: " + fbToken + "\nisle:\n  max-pods: many\n", nil, "isle.yaml:3: isle: max-pods: invalid argument"},
		{"bad setting", "token: " + fbToken + "\nhostname: -a\n", nil, "isle.yaml:2: hostname:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			boot, root := firstbootDirs(t, tc.isleYAML)
			args := append([]string{"firstboot", "--boot", boot, "--root", root, "--role", "agent"}, tc.args...)
			out, err := runIsle(args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("isle firstboot: %v, want an error containing %q\n%s", err, tc.want, out)
			}
			if _, err := os.Stat(filepath.Join(root, firstboot.ConfigFile)); !os.IsNotExist(err) {
				t.Errorf("config.yaml written despite the error (%v)", err)
			}
			if done, _ := firstboot.IsDone(root); done {
				t.Error("first boot marked done despite the error")
			}
		})
	}
}
