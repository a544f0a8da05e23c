package images

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/isle-cluster/isle/images/firstboot"
)

// elf writes a file with an ELF header of the class and machine given.
func elf(t *testing.T, class byte, machine uint16) string {
	t.Helper()
	h := make([]byte, 64)
	copy(h, "\x7fELF")
	h[4], h[5] = class, 1
	h[18], h[19] = byte(machine), byte(machine>>8)
	p := filepath.Join(t.TempDir(), "isle")
	if err := os.WriteFile(p, h, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestOptionsCheck(t *testing.T) {
	arm64 := elf(t, 2, 183)
	good := Options{Board: "rpi4", Role: "agent", Isle: arm64, Out: "x.img", CacheDir: "/c"}
	if err := good.check(); err != nil {
		t.Fatalf("good options: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*Options)
		want   string
	}{
		{"rpi5", func(o *Options) { o.Board = "rpi5" }, "no Raspberry Pi 5 support"},
		{"unknown board", func(o *Options) { o.Board = "rpi2" }, "want one of rpi3, rpi4, zero2w"},
		{"role", func(o *Options) { o.Role = "worker" }, `--role "worker"`},
		{"amd64 binary", func(o *Options) { o.Isle = elf(t, 2, 62) }, "not a linux/arm64 executable"},
		{"32-bit arm binary", func(o *Options) { o.Isle = elf(t, 1, 40) }, "not a linux/arm64 executable"},
		{"no binary", func(o *Options) { o.Isle = "/nonexistent/isle" }, "make cross"},
	} {
		o := good
		tc.change(&o)
		if err := o.check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// The overlay writes isle, its units with the image's role, and enables
// what a board needs; the firmware files leave the root for the boot
// partition with the example isle.yaml.
func TestOverlayAndSplit(t *testing.T) {
	root, boot := filepath.Join(t.TempDir(), "root"), filepath.Join(t.TempDir(), "boot")
	for _, f := range []string{
		"usr/lib/systemd/system/systemd-networkd.service", "usr/lib/systemd/system/systemd-networkd-wait-online.service",
		"usr/lib/systemd/system/systemd-networkd.socket", "usr/share/systemd/tmp.mount",
		"boot/firmware/config.txt", "boot/firmware/vmlinuz-6.1.0-50-arm64",
		"etc/ssh/ssh_host_ed25519_key", "etc/ssh/ssh_host_ed25519_key.pub", "boot/firmware/cmdline.txt",
	} {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// As raspi-firmware writes it on a machine that is not a Pi.
	if err := os.WriteFile(filepath.Join(root, "boot/firmware/cmdline.txt"), []byte("console=tty0 root=/dev/mmcblk0p2 rw "+
		"fsck.repair=yes net.ifnames=0 cma=64M rootwait cgroup_enable=memory cgroup_memory=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := Options{Board: "rpi3", Role: "server", Isle: elf(t, 2, 183)}
	built := time.Now().Add(-time.Second) // the file system's times may be coarse
	if err := overlay(root, o); err != nil {
		t.Fatal(err)
	}
	if err := splitBoot(root, boot); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(root, "usr/bin/isle")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("isle: %v, %v", fi, err)
	}
	unit, err := os.ReadFile(filepath.Join(root, "usr/lib/systemd/system/isle-firstboot.service"))
	if err != nil || !strings.Contains(string(unit), "ExecStart=/usr/bin/isle firstboot --role server\n") {
		t.Errorf("isle-firstboot.service with the image's role: %v\n%s", err, unit)
	}
	for _, l := range []string{"multi-user.target.wants/isle-firstboot.service", "multi-user.target.wants/systemd-networkd.service",
		"local-fs.target.wants/tmp.mount"} {
		if target, err := os.Readlink(filepath.Join(root, "etc/systemd/system", l)); err != nil || !strings.HasPrefix(target, "/usr/") {
			t.Errorf("%s: %q, %v", l, target, err)
		}
	}
	if fstab, _ := os.ReadFile(filepath.Join(root, "etc/fstab")); !strings.Contains(string(fstab), "LABEL=RASPIFIRM /boot/firmware vfat") {
		t.Errorf("fstab:\n%s", fstab)
	}
	if journald, _ := os.ReadFile(filepath.Join(root, "etc/systemd/journald.conf.d/isle.conf")); !strings.Contains(string(journald), "Storage=volatile") {
		t.Errorf("journald keeps its journal on the card:\n%s", journald)
	}
	if keys, _ := filepath.Glob(filepath.Join(root, "etc/ssh/ssh_host_*")); len(keys) > 0 {
		t.Errorf("the image keeps SSH host keys, which every card would share: %v", keys)
	}
	if dropIn, _ := os.ReadFile(filepath.Join(root, "etc/systemd/system/ssh.service.d/isle.conf")); !strings.Contains(string(dropIn), "ssh-keygen -A") {
		t.Errorf("sshd does not make its host keys:\n%s", dropIn)
	}
	if fi, err := os.Stat(filepath.Join(root, clockEpoch)); err != nil || fi.ModTime().Before(built) {
		t.Errorf("%s, from which a board without a clock starts: %v, %v; want the build's time", clockEpoch, fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(boot, "cmdline.txt")); string(b) != "console=ttyS1,115200 console=tty0 root=LABEL=RASPIROOT rw "+
		"fsck.repair=yes net.ifnames=0 cma=64M rootwait cgroup_enable=memory cgroup_memory=1\n" {
		t.Errorf("cmdline.txt %q", b)
	}
	if b, err := os.ReadFile(filepath.Join(boot, "isle.yaml.example")); err != nil || string(b) != firstboot.Example {
		t.Errorf("isle.yaml.example on the boot partition: %v", err)
	}
	if _, err := os.Stat(filepath.Join(boot, "vmlinuz-6.1.0-50-arm64")); err != nil {
		t.Errorf("the kernel did not move to the boot partition: %v", err)
	}
	if entries, err := os.ReadDir(filepath.Join(root, "boot/firmware")); err != nil || len(entries) != 0 {
		t.Errorf("the mount point /boot/firmware: %v, %v; want it empty", entries, err)
	}

	// A root filesystem without systemd-networkd is not a board's.
	if err := overlay(t.TempDir(), o); err == nil || !strings.Contains(err.Error(), "systemd-networkd.service") {
		t.Errorf("overlay on an empty root: %v", err)
	}
}
