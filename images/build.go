// Package images builds isle's flashable SD-card images for Raspberry Pi
// boards: a Debian root filesystem made by mmdebstrap (images/rootfs,
// cached by its package list), isle's static arm64 binary and its units,
// configuration kept off the SD card where it can be, and the first-boot
// settings from the card's FAT partition (images/firstboot), written into
// a disk image without loop devices or mounts (images/disk).
package images

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/isle-cluster/isle/deploy/units"
	"github.com/isle-cluster/isle/images/disk"
	"github.com/isle-cluster/isle/images/firstboot"
	"github.com/isle-cluster/isle/images/rootfs"
	"github.com/isle-cluster/isle/node/containers"
)

// Boards are the boards an image can be built for (all boot the same
// image; the board names it).
var Boards = []string{"rpi3", "rpi4", "zero2w"}

// Options say what to build.
type Options struct {
	Board string // one of Boards
	Role  string // firstboot.RoleAgent or RoleServer
	// Isle is isle's static linux/arm64 binary.
	Isle string
	// Out is the raw image written; Out+".zst" and Out+".zst.sha256" are
	// its compressed form, unless NoCompress.
	Out        string
	NoCompress bool
	// CacheDir keeps root filesystems between builds.
	CacheDir string
	// Mirror is the Debian mirror; "": the machine's apt's.
	Mirror string
	Log    *slog.Logger
}

// Packages are what the image's root filesystem holds besides Debian's
// minimal base.
var Packages = []string{
	"systemd", "systemd-sysv", "systemd-timesyncd", "udev", "dbus", "kmod", "iproute2", "ca-certificates",
	"containerd", "runc", "nftables", "raspi-firmware", "linux-image-arm64", "initramfs-tools",
	"e2fsprogs", "fdisk", "zstd", "openssh-server",
}

// initramfsModules are all the initramfs holds: the root filesystem, and
// the disks of the boards and of QEMU's virt machine. Without the list,
// initramfs-tools takes most modules and a build from scratch takes three
// times as long under qemu-user.
var initramfsModules = []string{"ext4", "virtio_pci", "virtio_blk", "mmc_block", "sdhci_iproc", "sdhci_brcmstb", "bcm2835"}

// spec is the root filesystem of every isle image.
func spec(mirror string) rootfs.Spec {
	return rootfs.Spec{
		Suite: "bookworm", Arch: "arm64", Variant: "minbase",
		Components: []string{"main", "non-free-firmware"},
		Packages:   Packages,
		Mirror:     mirror,
		Setup: map[string]string{
			"/etc/initramfs-tools/conf.d/isle.conf":     "MODULES=list\nCOMPRESS=zstd\n",
			"/usr/share/initramfs-tools/modules.d/isle": strings.Join(initramfsModules, "\n") + "\n",
			// raspi-firmware writes cmdline.txt with these.
			"/etc/default/raspi-extra-cmdline": "cgroup_enable=memory cgroup_memory=1\n",
		},
	}
}

// check says what is wrong with o.
func (o *Options) check() error {
	if !slices.Contains(Boards, o.Board) {
		if o.Board == "rpi5" {
			return errors.New("images: --board rpi5: Debian bookworm's kernel (6.1) has no Raspberry Pi 5 support")
		}
		return fmt.Errorf("images: --board %q: want one of %s", o.Board, strings.Join(Boards, ", "))
	}
	if o.Role != firstboot.RoleAgent && o.Role != firstboot.RoleServer {
		return fmt.Errorf("images: --role %q: want agent or server", o.Role)
	}
	if err := checkARM64(o.Isle); err != nil {
		return err
	}
	if o.Out == "" || o.CacheDir == "" {
		return errors.New("images: an output file and a cache directory are needed")
	}
	return nil
}

// Build builds the image o asks for, logging each step with its duration.
func Build(ctx context.Context, o Options) (disk.Image, error) {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if err := o.check(); err != nil {
		return disk.Image{}, err
	}
	if os.Geteuid() != 0 {
		return disk.Image{}, errors.New("images: building an image needs root (mmdebstrap installs packages as root; binfmt_misc)")
	}
	if err := disk.CheckTools(); err != nil {
		return disk.Image{}, err
	}
	if o.Mirror == "" {
		m, err := rootfs.HostMirror("/")
		if err != nil {
			return disk.Image{}, fmt.Errorf("images: %w (or give --mirror)", err)
		}
		o.Mirror = m
	}
	step := func(what string, start time.Time) {
		o.Log.Info("image: "+what, "took", time.Since(start).Round(time.Millisecond))
	}
	start := time.Now()
	if err := rootfs.EnsureBinfmt("arm64"); err != nil {
		return disk.Image{}, err
	}
	tarball, cached, err := rootfs.Build(ctx, spec(o.Mirror), o.CacheDir, o.Log)
	if err != nil {
		return disk.Image{}, err
	}
	step(fmt.Sprintf("root filesystem (cached: %v)", cached), start)

	work, err := os.MkdirTemp(filepath.Dir(o.Out), ".isle-image-")
	if err != nil {
		return disk.Image{}, fmt.Errorf("images: %w", err)
	}
	defer os.RemoveAll(work)
	root, boot := filepath.Join(work, "root"), filepath.Join(work, "boot")
	start = time.Now()
	if err := extract(ctx, tarball, root); err != nil {
		return disk.Image{}, err
	}
	if err := overlay(root, o); err != nil {
		return disk.Image{}, err
	}
	if err := splitBoot(root, boot); err != nil {
		return disk.Image{}, err
	}
	step("root and boot trees", start)

	start = time.Now()
	img, err := disk.Build(ctx, o.Out, boot, root, disk.Layout{})
	if err != nil {
		return disk.Image{}, err
	}
	step(fmt.Sprintf("disk image %s (%d MiB)", o.Out, img.Size>>20), start)
	if o.NoCompress {
		return img, nil
	}
	start = time.Now()
	last := time.Now()
	progress := func(done, total int64) {
		if time.Since(last) > 2*time.Second || done == total {
			o.Log.Info("image: compressing", "percent", done*100/max(total, 1))
			last = time.Now()
		}
	}
	if err := disk.Compress(ctx, o.Out, o.Out+".zst", progress); err != nil {
		return disk.Image{}, err
	}
	step("compressed "+o.Out+".zst", start)
	return img, nil
}

// checkARM64 checks that path is a static linux/arm64 executable.
func checkARM64(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("images: isle's arm64 binary: %w (make cross builds out/isle-linux-arm64)", err)
	}
	defer f.Close()
	var h [20]byte
	if _, err := f.ReadAt(h[:], 0); err != nil {
		return fmt.Errorf("images: isle's arm64 binary %s: %w", path, err)
	}
	// ELF, 64-bit, little-endian, machine 183 (EM_AARCH64).
	if string(h[:4]) != "\x7fELF" || h[4] != 2 || h[5] != 1 || h[18] != 183 || h[19] != 0 {
		return fmt.Errorf("images: %s is not a linux/arm64 executable (make cross builds out/isle-linux-arm64)", path)
	}
	return nil
}

// extract unpacks the root filesystem's tarball into dir, keeping owners,
// modes and extended attributes (file capabilities).
func extract(ctx context.Context, tarball, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("images: %w", err)
	}
	out, err := exec.CommandContext(ctx, "tar", "-x", "-p", "--numeric-owner", "--xattrs", "--xattrs-include=*",
		"-f", tarball, "-C", dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("images: unpack %s: %w: %s", tarball, err, out)
	}
	return nil
}

// clockEpoch is the file whose modification time systemd sets the clock
// to at boot when the clock is behind it.
const clockEpoch = "/usr/lib/clock-epoch"

// file is one file the overlay writes.
type file struct {
	path string
	mode fs.FileMode
	data string
}

// overlay puts isle and its configuration into the root tree: the binary,
// the units (the role's enabled by isle firstboot), containerd's
// configuration, the SD card's mounts, a journal kept in memory, the
// clock's epoch, sshd without the image's host keys, the order of two USB
// Ethernet drivers, the services a board needs enabled, and the firmware's
// kernel command line.
func overlay(root string, o Options) error {
	bin, err := os.ReadFile(o.Isle)
	if err != nil {
		return fmt.Errorf("images: %w", err)
	}
	files := []file{
		{"/usr/bin/isle", 0o755, string(bin)},
		{"/etc/containerd/config.toml", 0o644, string(containers.DaemonConfig("/var/lib/containerd", "/run/containerd", "/run/containerd/containerd.sock"))},
		// Both partitions by label; the firmware partition readable by
		// root only (isle.yaml holds the token until the first boot).
		{"/etc/fstab", 0o644, "LABEL=RASPIROOT / ext4 rw,noatime,commit=60 0 1\n" +
			"LABEL=RASPIFIRM /boot/firmware vfat rw,noatime,umask=0077 0 2\n"},
		// SD-card wear: the journal in memory, capped; no swap (none is
		// made).
		{"/etc/systemd/journald.conf.d/isle.conf", 0o644, "[Journal]\nStorage=volatile\nRuntimeMaxUse=32M\n"},
		{"/etc/hostname", 0o644, "isle\n"},
		// A Pi has no clock battery: until NTP answers, its clock starts
		// from systemd's epoch, this file's modification time (the
		// build's), rather than from a time before the cluster's
		// certificates.
		{clockEpoch, 0o644, ""},
		// sshd: keys only (isle.yaml's ssh-authorized-keys), and host
		// keys of the board's own, made at its first start: the image's
		// are removed below, or every card would share them.
		{"/etc/ssh/sshd_config.d/isle.conf", 0o644, "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"},
		// The firmware's kernel command line as raspi-firmware writes it
		// again at each kernel update: see bootCmdline.
		{"/etc/default/raspi-firmware", 0o644, "# Written by isle's image builder: see raspi-firmware's own for the settings.\n" +
			"ROOTPART=LABEL=RASPIROOT\nCONSOLES=\"ttyS1,115200 tty0\"\n"},
		// USB Ethernet that speaks CDC and has a Linux gadget's IDs (a Pi
		// Zero as a USB gadget, QEMU's usb-net) is claimed by cdc_ether,
		// which reads its MAC address, and by cdc_subset, which makes up
		// a random one: whichever udev loads first wins, and a board
		// named from its MAC would get a different name each time. So
		// cdc_ether first.
		{"/etc/modprobe.d/isle.conf", 0o644, "softdep cdc_subset pre: cdc_ether\n"},
		{"/etc/systemd/system/ssh.service.d/isle.conf", 0o644, "[Service]\nExecStartPre=\nExecStartPre=/usr/bin/ssh-keygen -A\nExecStartPre=/usr/sbin/sshd -t\n"},
	}
	for _, name := range []string{"isle-agent.service", "isle-server.service", "isle-firstboot.service"} {
		b, err := units.Files.ReadFile(name)
		if err != nil {
			return fmt.Errorf("images: unit %s: %w", name, err)
		}
		files = append(files, file{"/usr/lib/systemd/system/" + name, 0o644, strings.ReplaceAll(string(b), "@ROLE@", o.Role)})
	}
	for _, f := range files {
		p := filepath.Join(root, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("images: %w", err)
		}
		if err := os.WriteFile(p, []byte(f.data), f.mode); err != nil {
			return fmt.Errorf("images: %w", err)
		}
	}
	now := time.Now()
	if err := os.Chtimes(filepath.Join(root, clockEpoch), now, now); err != nil {
		return fmt.Errorf("images: %w", err)
	}
	hostKeys, err := filepath.Glob(filepath.Join(root, "etc/ssh/ssh_host_*"))
	if err != nil {
		return fmt.Errorf("images: %w", err)
	}
	for _, k := range hostKeys {
		if err := os.Remove(k); err != nil {
			return fmt.Errorf("images: %w", err)
		}
	}
	// Enabled as systemctl enable would: links in the targets' wants.
	for _, l := range []struct{ target, unit string }{
		{"multi-user.target", "/usr/lib/systemd/system/isle-firstboot.service"},
		{"multi-user.target", "/usr/lib/systemd/system/systemd-networkd.service"},
		{"network-online.target", "/usr/lib/systemd/system/systemd-networkd-wait-online.service"},
		{"sockets.target", "/usr/lib/systemd/system/systemd-networkd.socket"},
		{"local-fs.target", "/usr/share/systemd/tmp.mount"},
	} {
		if _, err := os.Lstat(filepath.Join(root, l.unit)); err != nil {
			return fmt.Errorf("images: unit %s not in the root filesystem: %w", l.unit, err)
		}
		dir := filepath.Join(root, "/etc/systemd/system", l.target+".wants")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("images: %w", err)
		}
		link := filepath.Join(dir, filepath.Base(l.unit))
		if err := os.Remove(link); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("images: %w", err)
		}
		if err := os.Symlink(l.unit, link); err != nil {
			return fmt.Errorf("images: %w", err)
		}
	}
	return bootCmdline(filepath.Join(root, "boot/firmware/cmdline.txt"))
}

// bootCmdline rewrites the kernel command line raspi-firmware wrote when
// it was installed, which took its defaults from the build machine: the
// root by its label, not /dev/mmcblk0p2 (a Pi 4's SD card is not always
// mmcblk0, and a Pi 4 may boot from USB), and the consoles on the GPIO
// header's UART (ttyS1 on the Pi 3, 4 and Zero 2 W) and on the screen,
// the last the boot's. /etc/default/raspi-firmware says the same for its
// later rewrites.
func bootCmdline(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("images: the firmware's kernel command line: %w", err)
	}
	args := []string{"console=ttyS1,115200", "console=tty0"}
	root := false
	for _, a := range strings.Fields(string(b)) {
		switch {
		case strings.HasPrefix(a, "console="):
		case strings.HasPrefix(a, "root="):
			args, root = append(args, "root=LABEL=RASPIROOT"), true
		default:
			args = append(args, a)
		}
	}
	if !root {
		return fmt.Errorf("images: %s: no root= in %q", path, b)
	}
	if err := os.WriteFile(path, []byte(strings.Join(args, " ")+"\n"), 0o644); err != nil {
		return fmt.Errorf("images: %w", err)
	}
	return nil
}

// splitBoot moves the firmware partition's files (root's /boot/firmware,
// where raspi-firmware put them) into boot, leaving the mount point, and
// adds the example isle.yaml.
func splitBoot(root, boot string) error {
	fw := filepath.Join(root, "boot/firmware")
	if err := os.Rename(fw, boot); err != nil {
		return fmt.Errorf("images: the firmware files: %w", err)
	}
	if err := os.Mkdir(fw, 0o755); err != nil {
		return fmt.Errorf("images: %w", err)
	}
	if err := os.WriteFile(filepath.Join(boot, "isle.yaml.example"), []byte(firstboot.Example), 0o644); err != nil {
		return fmt.Errorf("images: %w", err)
	}
	return nil
}
