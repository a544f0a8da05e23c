package hw

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestRead(t *testing.T) {
	f, err := Read()
	if err != nil {
		t.Fatal(err)
	}
	if f.Arch != runtime.GOARCH || f.CPUs < 1 || f.Memory < 1<<20 {
		t.Fatalf("facts: %+v", f)
	}
	if (f.Arch == "arm") != (f.ARMVersion > 0) {
		t.Fatalf("ARM version %d on %s", f.ARMVersion, f.Arch)
	}
}

func TestPlatform(t *testing.T) {
	for _, tc := range []struct {
		f    Facts
		want string
	}{{Facts{Arch: "arm", ARMVersion: 6}, "arm/v6"}, {Facts{Arch: "arm64"}, "arm64"}, {Facts{Arch: "amd64"}, "amd64"}} {
		if got := tc.f.Platform(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.f, got, tc.want)
		}
	}
}

func TestMemTotal(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text string
		want       int64
	}{
		{"pi zero", "MemTotal:         439592 kB\nMemFree:  1 kB\n", 439592 * 1024},
		{"missing", "MemFree: 1 kB\n", -1},
		{"garbage", "MemTotal: lots kB\n", -1},
		{"zero", "MemTotal: 0 kB\n", -1},
	} {
		p := filepath.Join(dir, tc.name)
		if err := os.WriteFile(p, []byte(tc.text), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := memTotal(p)
		if tc.want < 0 {
			if err == nil {
				t.Errorf("%s: accepted (%d)", tc.name, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}
	if _, err := memTotal(filepath.Join(dir, "absent")); err == nil {
		t.Error("absent file accepted")
	}
}
