package island

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPlan(t *testing.T) {
	s := plan(Config{Dir: "/x", Servers: 3, Agents: 2})
	want := []struct{ name, role, addr string }{
		{"pi1", RoleServer, "10.77.0.11"}, {"pi2", RoleServer, "10.77.0.12"}, {"pi3", RoleServer, "10.77.0.13"},
		{"pi4", RoleAgent, "10.77.0.14"}, {"pi5", RoleAgent, "10.77.0.15"},
	}
	if len(s.Boards) != len(want) {
		t.Fatalf("%d boards, want %d", len(s.Boards), len(want))
	}
	for i, w := range want {
		b := s.Boards[i]
		if b.Name != w.name || b.Role != w.role || b.Addr.String() != w.addr || !b.Down {
			t.Errorf("board %d: %+v, want %+v (down until started)", i, b, w)
		}
	}
	if s.Host.String() != "10.77.0.1" || s.VIP.String() != "10.77.0.10" || s.RegistryAddr() != "10.77.0.1:5000" {
		t.Errorf("host %v, VIP %v, registry %s", s.Host, s.VIP, s.RegistryAddr())
	}
	if err := s.check("/x"); err != nil {
		t.Errorf("a planned island fails its own check: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"defaults", Config{}, ""},
		{"one server", Config{Servers: 1}, ""},
		{"too many servers", Config{Servers: 8}, "--servers"},
		{"negative agents", Config{Agents: -1}, "--agents"},
		{"too many agents", Config{Agents: 41}, "--agents"},
		{"a mirrored registry", Config{Mirrors: []string{"registry.k8s.io"}}, ""},
		{"a mirror with a path", Config{Mirrors: []string{"registry.k8s.io/e2e"}}, "--mirror"},
		{"the island's own name", Config{Mirrors: []string{RegistryHost}}, "--mirror"},
		{"an empty mirror", Config{Mirrors: []string{""}}, "--mirror"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.cfg.validate()
			if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Fatalf("validate: %v, want %q", err, c.want)
			}
			if err == nil && (c.cfg.Dir != DefaultDir || c.cfg.Servers == 0 || c.cfg.Bin == "" || c.cfg.Timeout == 0) {
				t.Errorf("defaults not filled: %+v", c.cfg)
			}
		})
	}
}

func TestStateSaveLoad(t *testing.T) {
	dir := t.TempDir()
	s := plan(Config{Dir: dir, Servers: 1, Agents: 1})
	s.Boards[0].Isle = Proc{PID: 42, Start: 7}
	if err := s.save(); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Boards[0].Isle != s.Boards[0].Isle || got.VIP != s.VIP || len(got.Boards) != 2 {
		t.Fatalf("loaded %+v, saved %+v", got, s)
	}
	if _, err := os.Stat(filepath.Join(dir, stateFile+".tmp")); err == nil {
		t.Error("the temporary file is left behind")
	}
}

// TestLoadRefuses: a state that would make isle down signal or remove
// the wrong things is refused, naming the file.
func TestLoadRefuses(t *testing.T) {
	for _, c := range []struct{ name, json, want string }{
		{"not JSON", `{"dir":`, "damaged"},
		{"other directory", `{"dir":"/elsewhere","lan":"10.77.0.0/24","host":"10.77.0.1"}`, "made for directory"},
		{"host outside the LAN", `{"dir":"DIR","lan":"10.77.0.0/24","host":"10.1.0.1"}`, "do not fit"},
		{"bad board name", `{"dir":"DIR","lan":"10.77.0.0/24","host":"10.77.0.1","boards":[{"name":"../etc","role":"agent","addr":"10.77.0.11"}]}`, "board name"},
		{"repeated board", `{"dir":"DIR","lan":"10.77.0.0/24","host":"10.77.0.1","boards":[{"name":"pi1","role":"agent","addr":"10.77.0.11"},{"name":"pi1","role":"agent","addr":"10.77.0.12"}]}`, "repeated"},
		{"bad role", `{"dir":"DIR","lan":"10.77.0.0/24","host":"10.77.0.1","boards":[{"name":"pi1","role":"king","addr":"10.77.0.11"}]}`, "role"},
		{"address off the LAN", `{"dir":"DIR","lan":"10.77.0.0/24","host":"10.77.0.1","boards":[{"name":"pi1","role":"agent","addr":"10.78.0.11"}]}`, "outside the LAN"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, stateFile), []byte(strings.ReplaceAll(c.json, "DIR", dir)), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(dir)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), stateFile) {
				t.Fatalf("Load: %v, want an error naming %s with %q", err, stateFile, c.want)
			}
		})
	}
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no island") {
		t.Errorf("Load of an empty directory: %v", err)
	}
}

func TestLockIsExclusive(t *testing.T) {
	dir := t.TempDir()
	release, err := lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock(dir); err == nil || !strings.Contains(err.Error(), "another isle") {
		t.Fatalf("second lock: %v", err)
	}
	release()
	release2, err := lock(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	release2()
}

func TestProcIdentity(t *testing.T) {
	self := Proc{PID: os.Getpid()}
	var err error
	if self.Start, err = startTime(self.PID); err != nil {
		t.Fatal(err)
	}
	if !self.Alive() {
		t.Error("this process is not alive")
	}
	if (Proc{PID: self.PID, Start: self.Start + 1}).Alive() {
		t.Error("a process with another start time (a reused PID) is taken for the recorded one")
	}
	if (Proc{}).Alive() {
		t.Error("the zero Proc is alive")
	}
}
