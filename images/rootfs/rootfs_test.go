package rootfs

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func spec() Spec {
	return Spec{Suite: "bookworm", Arch: "arm64", Variant: "minbase", Components: []string{"main", "non-free-firmware"},
		Packages: []string{"systemd", "containerd"}, Mirror: "http://mirror.test/debian",
		Setup: map[string]string{"/etc/initramfs-tools/conf.d/isle.conf": "MODULES=list\n"}}
}

func TestKey(t *testing.T) {
	a, b := spec(), spec()
	slices.Reverse(b.Packages)
	slices.Reverse(b.Components)
	if a.Key() != b.Key() {
		t.Error("the order of packages changed the key")
	}
	for name, change := range map[string]func(*Spec){
		"package":    func(s *Spec) { s.Packages = append(s.Packages, "nftables") },
		"suite":      func(s *Spec) { s.Suite = "trixie" },
		"mirror":     func(s *Spec) { s.Mirror = "http://other.test/debian" },
		"setup file": func(s *Spec) { s.Setup["/etc/initramfs-tools/conf.d/isle.conf"] = "MODULES=most\n" },
		// Fields are length-prefixed: moving a character between two
		// packages is another root filesystem.
		"split": func(s *Spec) { s.Packages = []string{"systemdc", "ontainerd"} },
	} {
		c := spec()
		change(&c)
		if c.Key() == a.Key() {
			t.Errorf("a different %s, the same key", name)
		}
	}
}

func TestArgs(t *testing.T) {
	got := strings.Join(spec().args("/c/out.tar", "/c/setup"), " ")
	want := "--verbose --mode=root --arch=arm64 --format=tar --variant=minbase --components=main,non-free-firmware " +
		"--include=systemd,containerd --setup-hook=sync-in /c/setup / bookworm /c/out.tar http://mirror.test/debian"
	if got != want {
		t.Errorf("mmdebstrap %s\nwant         %s", got, want)
	}
}

// relay logs mmdebstrap's own lines and counts what apt sets up, and
// keeps the last lines for an error.
func TestRelay(t *testing.T) {
	out := `I: installing essential packages...
Get:1 http://mirror.test/debian bookworm/main arm64 base-files arm64 12.4 [70.9 kB]
0 upgraded, 3 newly installed, 0 to remove and 0 not upgraded.
Setting up base-files (12.4) ...
Setting up dpkg (1.21) ...
Setting up libc6 (2.36) ...
I: installing remaining packages inside the chroot...
0 upgraded, 2 newly installed, 0 to remove and 0 not upgraded.
Setting up containerd (1.6.20) ...
Setting up runc (1.1.5) ...
I: done
`
	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == slog.LevelKey {
				return slog.Attr{}
			}
			return a
		}}))
	// Every line counts at interval 0; with an hour, only the last of
	// each install.
	for every, want := range map[time.Duration][]string{
		0:         {"essential", "done=1 of=3", "done=2 of=3", "done=3 of=3", "remaining", "done=1 of=2", "done=2 of=2", "done"},
		time.Hour: {"essential", "done=1 of=3", "done=3 of=3", "remaining", "done=2 of=2", "done"},
	} {
		logged.Reset()
		lines := <-relay(strings.NewReader(out), log, every)
		got := strings.Split(strings.TrimSpace(logged.String()), "\n")
		if len(got) != len(want) {
			t.Fatalf("interval %v: logged\n%s\nwant %d lines", every, logged.String(), len(want))
		}
		for i, w := range want {
			if !strings.Contains(got[i], w) {
				t.Errorf("interval %v: line %d %q, want %q in it", every, i, got[i], w)
			}
		}
		if strings.Contains(logged.String(), "mirror.test") {
			t.Errorf("apt's download lines were logged:\n%s", logged.String())
		}
		if len(lines) != 11 || lines[10] != "I: done" {
			t.Errorf("last lines %q", lines)
		}
	}
}

func TestCheck(t *testing.T) {
	for name, change := range map[string]func(*Spec){
		"no suite":         func(s *Spec) { s.Suite = "" },
		"bad arch":         func(s *Spec) { s.Arch = "arm64,armhf" },
		"mirror no scheme": func(s *Spec) { s.Mirror = "mirror.test/debian" },
		"package quote":    func(s *Spec) { s.Packages = append(s.Packages, "a'b") },
		"relative setup":   func(s *Spec) { s.Setup["etc/x"] = "" },
	} {
		s := spec()
		change(&s)
		if err := s.check(); err == nil || !strings.HasPrefix(err.Error(), "rootfs: ") {
			t.Errorf("%s: %v, want an error", name, err)
		}
	}
	if err := spec().check(); err != nil {
		t.Errorf("a good spec: %v", err)
	}
}

func TestHostMirror(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"deb822", map[string]string{
			"sources.list.d/debian.sources": "Types: deb\n# a comment\nURIs: http://mirror.test/debian\nSuites: bookworm bookworm-updates\n" +
				"Components: main\n\nTypes: deb\nURIs: http://mirror.test/debian-security\nSuites: bookworm-security\nComponents: main\n",
			"sources.list.d/other.sources": "Types: deb\nURIs: https://vendor.test/apt\nSuites: nodistro\nComponents: main\n",
		}, "http://mirror.test/debian"},
		{"one line, security first", map[string]string{
			"sources.list": "# deb http://old.test/debian bookworm main\n" +
				"deb http://sec.test/debian bookworm-security main\n" +
				"deb [arch=amd64 signed-by=/k.gpg] http://mirror.test/debian/ bookworm main contrib\n",
		}, "http://mirror.test/debian"},
		{"disabled entry passed by", map[string]string{
			"sources.list.d/a.sources": "Enabled: no\nTypes: deb\nURIs: http://off.test/debian\nSuites: bookworm\n",
			"sources.list.d/b.sources": "Types: deb deb-src\nURIs:\n http://mirror.test/debian\nSuites: bookworm\n",
		}, "http://mirror.test/debian"},
		{"none", map[string]string{"sources.list.d/x.sources": "Types: deb\nURIs: https://vendor.test/apt\nSuites: stable\n"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for p, content := range tc.files {
				f := filepath.Join(root, "etc/apt", p)
				if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := HostMirror(root)
			if tc.want == "" {
				if err == nil {
					t.Errorf("HostMirror = %q, want an error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("HostMirror = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
