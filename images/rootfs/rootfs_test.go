package rootfs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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
	want := "--mode=root --arch=arm64 --format=tar --variant=minbase --components=main,non-free-firmware " +
		"--include=systemd,containerd --setup-hook=sync-in /c/setup / bookworm /c/out.tar http://mirror.test/debian"
	if got != want {
		t.Errorf("mmdebstrap %s\nwant         %s", got, want)
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
