package disk

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/isle-cluster/isle/images/hosttools"
)

// needTools skips the test where a host tool is missing, but fails it on
// amd64 under CI, which installs them all.
func needTools(t *testing.T, names ...string) {
	t.Helper()
	var missing []string
	for _, n := range names {
		if _, err := hosttools.Look(n); err != nil {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := "this test needs " + strings.Join(missing, ", ") + " (Debian packages dosfstools mtools e2fsprogs fdisk coreutils)"
	if os.Getenv("CI") == "" || runtime.GOARCH != "amd64" {
		t.Skip(msg)
	}
	t.Fatal(msg)
}

// buildTools are what Build and the checks of its image run.
var buildTools = []string{"mkfs.vfat", "fsck.vfat", "fatlabel", "mcopy", "mdir", "mtype", "mke2fs", "debugfs", "e2fsck", "dumpe2fs", "sfdisk"}

// output runs a tool and returns its standard output, failing the test when
// it exits non-zero.
func output(t *testing.T, name string, args ...string) string {
	t.Helper()
	p, err := hosttools.Look(name)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(p, args...)
	cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return string(out)
}

func writeFile(t *testing.T, path string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // umask aside
		t.Fatal(err)
	}
}

// extract copies the partition p of the image file to a file of its own.
func extract(t *testing.T, file string, p Partition) string {
	t.Helper()
	in, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	dst := filepath.Join(t.TempDir(), "part")
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := io.Copy(out, io.NewSectionReader(in, p.Start, p.Size)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// onlyEntry fails the test unless dir holds just the file name: Build left
// no temporary files.
func onlyEntry(t *testing.T, dir, name string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{}
	if name != "" {
		want = []string{name}
	}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("%s holds %q, want %q", dir, names, want)
	}
}

func TestBuild(t *testing.T) {
	needTools(t, buildTools...)
	boot, root := t.TempDir(), t.TempDir()
	config := []byte("arm_64bit=1\nkernel=vmlinuz\n")
	writeFile(t, filepath.Join(boot, "config.txt"), config, 0o644)
	writeFile(t, filepath.Join(boot, "cmdline.txt"), []byte("console=tty1 root=LABEL=RASPIROOT\n"), 0o644)
	writeFile(t, filepath.Join(boot, "overlays", "sub", "x.dtbo"), []byte("overlay\n"), 0o644)

	writeFile(t, filepath.Join(root, "etc", "hostname"), []byte("isle\n"), 0o644)
	writeFile(t, filepath.Join(root, "secret"), []byte("key\n"), 0o600)
	big := make([]byte, 1<<20)
	rand.Read(big)
	writeFile(t, filepath.Join(root, "usr", "big"), big, 0o755)
	if err := os.Link(filepath.Join(root, "usr", "big"), filepath.Join(root, "usr", "big2")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "etc", "empty"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("etc/hostname", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	for i := range 400 { // many small files: the inode estimate must hold
		writeFile(t, filepath.Join(root, "many", "file-with-a-longish-name-"+strconv.Itoa(i)), []byte{byte(i)}, 0o644)
	}

	dir := t.TempDir()
	out := filepath.Join(dir, "disk.img")
	const slack = 16 << 20
	l := Layout{BootSize: 64 << 20, RootSlack: slack, DiskID: 0x1234abcd}
	img, err := Build(context.Background(), out, boot, root, l)
	if err != nil {
		t.Fatal(err)
	}
	onlyEntry(t, dir, "disk.img")

	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if img.Path != out || img.Size != fi.Size() || img.Size != img.Root.Start+img.Root.Size || img.DiskID != 0x1234abcd {
		t.Errorf("image %+v, file of %d bytes", img, fi.Size())
	}
	if img.Boot != (Partition{Start: 4 << 20, Size: 64 << 20}) || img.Root.Start != 68<<20 || img.Root.Size%(4<<20) != 0 {
		t.Errorf("partitions: boot %+v, root %+v", img.Boot, img.Root)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Blocks*512 > fi.Size()/4 {
		t.Errorf("image takes %d bytes on disk of %d: not sparse", st.Blocks*512, fi.Size())
	}

	t.Run("table", func(t *testing.T) {
		var table struct {
			PartitionTable struct {
				Label      string
				ID         string
				SectorSize int
				Partitions []struct {
					Start, Size int64
					Type        string
				}
			}
		}
		js := output(t, "sfdisk", "--json", out)
		if err := json.Unmarshal([]byte(js), &table); err != nil {
			t.Fatalf("sfdisk --json: %v\n%s", err, js)
		}
		pt := table.PartitionTable
		type part struct {
			Start, Size int64
			Type        string
		}
		var got []part
		for _, p := range pt.Partitions {
			got = append(got, part{p.Start * 512, p.Size * 512, p.Type})
		}
		want := []part{{img.Boot.Start, img.Boot.Size, "c"}, {img.Root.Start, img.Root.Size, "83"}}
		if pt.Label != "dos" || pt.ID != "0x1234abcd" || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("sfdisk: label %q id %q partitions %v, want dos 0x1234abcd %v\n%s", pt.Label, pt.ID, got, want, js)
		}
	})

	t.Run("boot", func(t *testing.T) {
		at := out + "@@" + strconv.FormatInt(img.Boot.Start, 10)
		list := output(t, "mdir", "-/", "-b", "-i", at, "::/")
		want := "::/cmdline.txt\n::/config.txt\n::/overlays/\n::/overlays/sub/\n::/overlays/sub/x.dtbo\n"
		if list != want {
			t.Errorf("mdir -/ -b ::/ lists\n%s\nwant\n%s", list, want)
		}
		if vol := output(t, "mdir", "-i", at, "::/"); !strings.Contains(vol, "Volume in drive : is RASPIFIRM") {
			t.Errorf("mdir shows no label RASPIFIRM:\n%s", vol)
		}
		if got := output(t, "mtype", "-i", at, "::/config.txt"); got != string(config) {
			t.Errorf("config.txt holds %q, want %q", got, config)
		}
		if got := output(t, "mtype", "-i", at, "::/overlays/sub/x.dtbo"); got != "overlay\n" {
			t.Errorf("overlays/sub/x.dtbo holds %q", got)
		}
		part := extract(t, out, img.Boot)
		if got := strings.TrimSpace(output(t, "fatlabel", part)); got != "RASPIFIRM" {
			t.Errorf("FAT label %q, want RASPIFIRM", got)
		}
		output(t, "fsck.vfat", "-n", part)
	})

	t.Run("root", func(t *testing.T) {
		part := extract(t, out, img.Root)
		output(t, "e2fsck", "-fn", part)
		debugfs := func(req string) string { return output(t, "debugfs", "-R", req, part) }
		if got := debugfs("cat /etc/hostname"); got != "isle\n" {
			t.Errorf("/etc/hostname holds %q", got)
		}
		if got := debugfs("cat /usr/big"); got != string(big) {
			t.Errorf("/usr/big differs: %d bytes, want %d", len(got), len(big))
		}
		owner := func(uid, gid int) string { return fmt.Sprintf("User: %5d   Group: %5d", uid, gid) }
		checks := []struct{ path, want string }{
			{"/link", `Fast link dest: "etc/hostname"`},
			{"/secret", "Mode:  0600"},
			{"/usr/big", "Links: 2"},
			{"/etc/empty", "Type: directory"},
			{"/etc/hostname", owner(os.Getuid(), os.Getgid())},
			{"/", owner(0, 0)},
		}
		for _, c := range checks {
			if got := debugfs("stat " + c.path); !strings.Contains(got, c.want) {
				t.Errorf("stat %s lacks %q:\n%s", c.path, c.want, got)
			}
		}
		if got := debugfs("ls -l /many"); strings.Count(got, "file-with-a-longish-name-") != 400 {
			t.Errorf("/many lacks files:\n%s", got)
		}
		head := output(t, "dumpe2fs", "-h", part)
		field := func(name string) string {
			m := regexp.MustCompile(`(?m)^` + name + `:\s*(.*)$`).FindStringSubmatch(head)
			if m == nil {
				t.Fatalf("dumpe2fs -h lacks %s:\n%s", name, head)
			}
			return m[1]
		}
		if got := field("Filesystem volume name"); got != "RASPIROOT" {
			t.Errorf("ext4 label %q, want RASPIROOT", got)
		}
		bs, _ := strconv.ParseInt(field("Block size"), 10, 64)
		free, _ := strconv.ParseInt(field("Free blocks"), 10, 64)
		count, _ := strconv.ParseInt(field("Block count"), 10, 64)
		if bs != 4096 || count*bs != img.Root.Size || free*bs < slack || free*bs > slack+img.Root.Size/8+16<<20 {
			t.Errorf("ext4: %d blocks of %d bytes, %d free; want %d bytes, about %d free", count, bs, free, img.Root.Size, slack)
		}
	})
}

func TestBuildFailsClean(t *testing.T) {
	needTools(t, buildTools...)
	tests := []struct {
		name    string
		setup   func(t *testing.T, boot string)
		cancel  bool
		want    string
		wantErr error
	}{
		{name: "symlink", setup: func(t *testing.T, boot string) {
			if err := os.Symlink("../config.txt", filepath.Join(boot, "overlays", "link")); err != nil {
				t.Fatal(err)
			}
		}, want: filepath.Join("overlays", "link") + " is a symlink"},
		{name: "case", setup: func(t *testing.T, boot string) {
			writeFile(t, filepath.Join(boot, "CONFIG.TXT"), nil, 0o644)
		}, want: "differ only in case"},
		{name: "full", setup: func(t *testing.T, boot string) {
			// Less than BootSize, more than the FAT's clusters hold.
			if err := os.Truncate(filepath.Join(boot, "config.txt"), 64<<20-4096); err != nil {
				t.Fatal(err)
			}
		}, want: "mcopy"},
		{name: "canceled", cancel: true, wantErr: context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			boot, root := t.TempDir(), t.TempDir()
			writeFile(t, filepath.Join(boot, "config.txt"), []byte("x\n"), 0o644)
			if err := os.Mkdir(filepath.Join(boot, "overlays"), 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.setup != nil {
				tc.setup(t, boot)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				cancel()
			}
			dir := t.TempDir()
			out := filepath.Join(dir, "disk.img")
			writeFile(t, out, []byte("an older image"), 0o644)
			_, err := Build(ctx, out, boot, root, Layout{BootSize: 64 << 20, RootSlack: 4 << 20})
			if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
				t.Fatalf("Build: %v, want an error with %q", err, tc.want)
			}
			t.Log(err)
			onlyEntry(t, dir, "")
		})
	}
}

func TestLayoutValidate(t *testing.T) {
	var l Layout
	if err := l.validate(); err != nil {
		t.Fatal(err)
	}
	if l.BootSize != 256<<20 || l.RootSlack != 256<<20 || l.BootLabel != "RASPIFIRM" || l.RootLabel != "RASPIROOT" || l.DiskID == 0 {
		t.Errorf("defaults: %+v", l)
	}
	bad := []struct {
		l    Layout
		want string
	}{
		{Layout{BootSize: 32 << 20}, "BootSize"},
		{Layout{BootSize: 100<<20 + 512}, "BootSize"},
		{Layout{RootSlack: -1}, "RootSlack"},
		{Layout{BootLabel: "TWELVE-CHARS"}, "BootLabel"},
		{Layout{BootLabel: "A/B"}, "BootLabel"},
		{Layout{RootLabel: "root fs"}, "RootLabel"},
		{Layout{RootLabel: "seventeen-chars-x"}, "RootLabel"},
	}
	for _, b := range bad {
		if err := b.l.validate(); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("validate(%+v): %v, want an error naming %s", b.l, err, b.want)
		}
	}
}

func TestMissingTools(t *testing.T) {
	look := func(name string) (string, error) {
		if name == "mcopy" || name == "sfdisk" {
			return "", exec.ErrNotFound
		}
		return "/bin/" + name, nil
	}
	err := missingTools(look)
	if !errors.Is(err, ErrToolMissing) {
		t.Fatalf("missingTools: %v, want ErrToolMissing", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "mcopy, sfdisk") || !strings.Contains(msg, "apt-get install mtools fdisk") || strings.Contains(msg, "dosfstools") {
		t.Errorf("missingTools: %q", msg)
	}
	if err := missingTools(func(name string) (string, error) { return name, nil }); err != nil {
		t.Errorf("missingTools with all found: %v", err)
	}
}

func TestRootSize(t *testing.T) {
	for _, c := range []rootContent{{}, {bytes: 200 << 20, inodes: 3000}, {bytes: 1900 << 20, inodes: 40000}, {bytes: 10 << 20, inodes: 200000}} {
		for _, slack := range []int64{1 << 20, 256 << 20} {
			size, inodes := rootSize(c, slack)
			meta := inodes*inodeSize + journalSize(size)
			if size%(4<<20) != 0 || size < c.bytes+slack+meta || size > (c.bytes+slack+meta)*11/10+8<<20 {
				t.Errorf("rootSize(%+v, %d) = %d: not a multiple of 4 MiB, or far from %d", c, slack, size, c.bytes+slack+meta)
			}
			if inodes < c.inodes || inodes < size/bytesPerInode {
				t.Errorf("rootSize(%+v, %d): %d inodes for %d bytes", c, slack, inodes, size)
			}
		}
	}
}

func TestMakeExt4Retry(t *testing.T) {
	needTools(t, "mke2fs", "e2fsck")
	root := t.TempDir()
	data := make([]byte, 12<<20)
	rand.Read(data)
	writeFile(t, filepath.Join(root, "data"), data, 0o644)
	// An estimate a third of the truth: mke2fs runs out of blocks at the
	// first try, and the second, half as big again, holds the tree.
	small := rootContent{bytes: 4 << 20, inodes: 2}
	l := Layout{RootSlack: 1}
	first, _ := rootSize(small, l.RootSlack)
	file := filepath.Join(t.TempDir(), "root.ext4")
	size, err := makeExt4(context.Background(), file, root, small, l)
	if err != nil {
		t.Fatal(err)
	}
	if want := roundUp(first+first/2, align); size != want {
		t.Errorf("size %d, want %d: the estimate of %d, half as big again", size, want, first)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != size {
		t.Errorf("filesystem file of %d bytes, want %d", fi.Size(), size)
	}
	output(t, "e2fsck", "-fn", file)
}
