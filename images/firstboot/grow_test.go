package firstboot

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/isle-cluster/isle/images/hosttools"
)

const mib = 1 << 20

// mmcPart is the sysfs directory of a Raspberry Pi 4's SD card's second
// partition, below sys/devices.
const mmcPart = "platform/emmc2bus/fe340000.mmc/mmc_host/mmc0/mmc0:59b4/block/mmcblk0/mmcblk0p2"

// sysBlock makes under root the sysfs entries of the block device whose
// directory below sys/devices is devPath, of device number devNum: its
// directory, the file "partition" holding partition unless empty, and the
// links to it from sys/dev/block and sys/class/block, relative as the
// kernel makes them, and the link to its parent, its disk.
func sysBlock(t *testing.T, root, devPath, devNum, partition string) {
	t.Helper()
	dir := filepath.Join(root, "sys/devices", devPath)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if partition != "" {
		if err := os.WriteFile(filepath.Join(dir, "partition"), []byte(partition+"\n"), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	link := func(at, target string) {
		if err := os.MkdirAll(filepath.Dir(at), 0o755); err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(filepath.Dir(at), target)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(rel, at); err != nil && !errors.Is(err, os.ErrExist) {
			t.Fatal(err)
		}
	}
	link(filepath.Join(root, "sys/dev/block", devNum), dir)
	link(filepath.Join(root, "sys/class/block", filepath.Base(dir)), dir)
	if partition != "" {
		link(filepath.Join(root, "sys/class/block", filepath.Base(filepath.Dir(dir))), filepath.Dir(dir))
	}
}

func TestRootDevice(t *testing.T) {
	const procLine = "22 21 0:20 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n"
	tests := []struct {
		name      string
		mountinfo string // none: no mountinfo
		setup     func(t *testing.T, root string)
		dev, disk string
		partition int
		err       string // the error's text holds it
	}{{
		name:      "SD card mounted by the kernel",
		mountinfo: "21 1 179:2 / / rw,noatime shared:1 - ext4 /dev/root rw\n" + procLine,
		setup: func(t *testing.T, root string) {
			sysBlock(t, root, mmcPart, "179:2", "2")
			sysBlock(t, root, filepath.Dir(mmcPart)+"/mmcblk0p1", "179:1", "1")
		},
		dev: "/dev/mmcblk0p2", disk: "/dev/mmcblk0", partition: 2,
	}, {
		name:      "virtio disk mounted by an initramfs",
		mountinfo: "25 1 254:2 / / rw,relatime - ext4 /dev/vda2 rw,errors=remount-ro\n" + procLine,
		setup: func(t *testing.T, root string) {
			sysBlock(t, root, "pci0000:00/0000:00:02.0/virtio1/block/vda/vda2", "254:2", "2")
		},
		dev: "/dev/vda2", disk: "/dev/vda", partition: 2,
	}, {
		name: "overlay mounted over the SD card",
		mountinfo: "21 1 179:2 / / rw,noatime shared:1 - ext4 /dev/root rw\n" +
			"530 21 0:45 / / rw,relatime master:1 - overlay overlay rw,lowerdir=/lower,upperdir=/upper,workdir=/work\n",
		setup: func(t *testing.T, root string) { sysBlock(t, root, mmcPart, "179:2", "2") },
		err:   "/ is overlay on overlay (device 0:45), not on a block device",
	}, {
		name:      "a whole disk",
		mountinfo: "25 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n",
		setup: func(t *testing.T, root string) {
			sysBlock(t, root, "pci0000:00/0000:00:02.0/virtio1/block/vda", "254:0", "")
		},
		err: "/ is ext4 on /dev/vda (device 254:0): /dev/vda is a whole disk, not a partition",
	}, {
		name:      "a bad partition number",
		mountinfo: "21 1 179:2 / / rw - ext4 /dev/root rw\n",
		setup:     func(t *testing.T, root string) { sysBlock(t, root, mmcPart, "179:2", "two") },
		err:       `/mmcblk0p2/partition: "two" is not a partition number`,
	}, {
		name:      "nothing on /",
		mountinfo: procLine,
		err:       "/proc/self/mountinfo: nothing is mounted on /",
	}, {
		name:      "not a mountinfo line",
		mountinfo: procLine + "21 1 179:2 / / rw\n",
		err:       `/proc/self/mountinfo:2: not a mountinfo line: "21 1 179:2 / / rw"`,
	}, {
		name: "no mountinfo",
		err:  "/proc/self/mountinfo: no such file",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if tc.mountinfo != "" {
				if err := os.MkdirAll(filepath.Join(root, "proc/self"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, "proc/self/mountinfo"), []byte(tc.mountinfo), 0o444); err != nil {
					t.Fatal(err)
				}
			}
			if tc.setup != nil {
				tc.setup(t, root)
			}
			dev, disk, partition, err := RootDevice(root)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "firstboot: root device: ") {
					t.Fatalf("RootDevice: %q, %q, %d, error %v; want an error holding %q", dev, disk, partition, err, tc.err)
				}
				return
			}
			if err != nil || dev != tc.dev || disk != tc.disk || partition != tc.partition {
				t.Fatalf("RootDevice: %q, %q, %d, %v; want %q, %q, %d", dev, disk, partition, err, tc.dev, tc.disk, tc.partition)
			}
		})
	}
}

// needTools skips the test where a program is missing under qemu-user or
// outside CI, but fails it on amd64 under CI, which installs them all.
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
	msg := "this test needs " + strings.Join(missing, ", ") + " (Debian packages fdisk util-linux e2fsprogs)"
	if os.Getenv("CI") == "" || runtime.GOARCH != "amd64" {
		t.Skip(msg)
	}
	t.Fatal(msg)
}

var testTools = []string{"sfdisk", "partx", "resize2fs", "mke2fs", "dumpe2fs", "e2fsck"}

// runTool runs a program and returns its standard output, failing the test
// when it fails.
func runTool(t *testing.T, stdin, name string, args ...string) string {
	t.Helper()
	out, err := run(context.Background(), stdin, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// card makes an image file of size bytes holding the partition table of
// the sfdisk script and returns its name.
func card(t *testing.T, size int64, script string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "card.img")
	fh, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(file, size); err != nil {
		t.Fatal(err)
	}
	runTool(t, script, "sfdisk", "--no-reread", "--no-tell-kernel", file)
	return file
}

// The layout of the tests' card: a FAT partition of 8 MiB at 1 MiB, the
// root partition of 16 MiB after it.
const (
	cardScript = "label: dos\nlabel-id: 0x1234abcd\nstart=2048, size=16384, type=c, bootable\nstart=18432, size=32768, type=83\n"
	rootStart  = 9 * mib
	rootSize   = 16 * mib
)

// sfdiskTable is what the tests read of sfdisk --json.
type sfdiskTable struct {
	PartitionTable struct {
		ID         string `json:"id"`
		SectorSize int64  `json:"sectorsize"`
		Partitions []struct {
			Start, Size int64
			Type        string
			Bootable    bool
		} `json:"partitions"`
	} `json:"partitiontable"`
}

func readSfdisk(t *testing.T, file string) sfdiskTable {
	t.Helper()
	var table sfdiskTable
	out := runTool(t, "", "sfdisk", "--json", file)
	if err := json.Unmarshal([]byte(out), &table); err != nil {
		t.Fatalf("sfdisk --json %s: %v\n%s", file, err, out)
	}
	return table
}

// mkfs makes an ext4 filesystem of size bytes in a file of its own.
func mkfs(t *testing.T, size int64) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "root.ext4")
	runTool(t, "", "mke2fs", "-q", "-F", "-t", "ext4", "-L", "RASPIROOT", file, strconv.FormatInt(size>>10, 10)+"k")
	return file
}

// copyFile copies size bytes at offset from of file src to offset to of
// file dst.
func copyFile(t *testing.T, dst string, to int64, src string, from, size int64) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.NewOffsetWriter(out, to), io.NewSectionReader(in, from, size)); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// ext4Blocks is the size in bytes dumpe2fs shows of the filesystem in file.
func ext4Blocks(t *testing.T, file string) int64 {
	t.Helper()
	out := runTool(t, "", "dumpe2fs", "-h", file)
	field := func(name string) int64 {
		for _, line := range strings.Split(out, "\n") {
			if v, ok := strings.CutPrefix(line, name+":"); ok {
				n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				if err != nil {
					t.Fatalf("dumpe2fs %s: %s: %v", file, line, err)
				}
				return n
			}
		}
		t.Fatalf("dumpe2fs %s shows no %s:\n%s", file, name, out)
		return 0
	}
	return field("Block count") * field("Block size")
}

// checksum is a checksum of file's content, to see it changed: CRC-32C,
// as SHA-256 takes seconds for the tests' files under qemu-user.
func checksum(t *testing.T, file string) uint32 {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))
}

// TestGrowRoot grows the root partition of an image file whose "card"
// grew from 64 to 128 MiB, and then the root filesystem, in a file of
// its own as large as the partition, since its kernel notification is
// for block devices only.
func TestGrowRoot(t *testing.T) {
	needTools(t, testTools...)
	ctx := context.Background()
	img := card(t, 64*mib, cardScript)
	copyFile(t, img, rootStart, mkfs(t, rootSize), 0, rootSize)
	if err := os.Truncate(img, 128*mib); err != nil {
		t.Fatal(err)
	}
	old := readSfdisk(t, img)

	before, after, skipped, err := growPartition(ctx, img, 2)
	if err != nil {
		t.Fatal(err)
	}
	const grown = 128*mib - rootStart
	if before != rootSize || after != grown || skipped != "" {
		t.Errorf("growPartition: %d, %d, %q; want %d, %d, \"\"", before, after, skipped, rootSize, grown)
	}
	table := readSfdisk(t, img)
	want := old
	want.PartitionTable.Partitions[1].Size = grown / 512
	if table.PartitionTable.ID != "0x1234abcd" || len(table.PartitionTable.Partitions) != 2 ||
		table.PartitionTable.Partitions[0] != want.PartitionTable.Partitions[0] ||
		table.PartitionTable.Partitions[1] != want.PartitionTable.Partitions[1] {
		t.Errorf("sfdisk --json after growPartition: %+v; want %+v", table, want)
	}

	// The root filesystem, as the kernel would show the grown partition.
	root := filepath.Join(t.TempDir(), "root.part")
	copyFile(t, root, 0, img, rootStart, rootSize)
	if err := os.Truncate(root, grown); err != nil {
		t.Fatal(err)
	}
	g, err := GrowRoot(ctx, root, img, 2)
	if err != nil {
		t.Fatal(err)
	}
	if g.PartitionBefore != grown || g.PartitionAfter != grown || g.Skipped != "it already fills the disk" ||
		g.FilesystemBefore != rootSize || g.FilesystemAfter <= grown-slack || g.FilesystemAfter > grown {
		t.Errorf("GrowRoot: %+v; want the partition of %d bytes left as it is and the filesystem grown from %d to it", g, grown, rootSize)
	}
	if size := ext4Blocks(t, root); size != g.FilesystemAfter {
		t.Errorf("dumpe2fs: %d bytes, GrowRoot says %d", size, g.FilesystemAfter)
	}
	runTool(t, "", "e2fsck", "-fn", root)

	// Already full: nothing changes.
	imgHash, rootHash := checksum(t, img), checksum(t, root)
	again, err := GrowRoot(ctx, root, img, 2)
	if err != nil {
		t.Fatal(err)
	}
	if again != (Growth{grown, grown, g.FilesystemAfter, g.FilesystemAfter, "it already fills the disk"}) {
		t.Errorf("GrowRoot again: %+v; want nothing changed", again)
	}
	if checksum(t, img) != imgHash || checksum(t, root) != rootHash {
		t.Error("GrowRoot again changed the image or the filesystem")
	}
}

func TestGrowRootRefuses(t *testing.T) {
	needTools(t, testTools...)
	ctx := context.Background()
	zeros := filepath.Join(t.TempDir(), "zeros")
	if err := os.WriteFile(zeros, make([]byte, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		script  string // the partition table of the card, of 32 MiB
		shrink  int64  // of the card after partitioning, if not 0
		dev     string // for GrowRoot, "ext4" for a new 8 MiB one; empty: growPartition
		n       int
		skipped string
		err     string
	}{{
		name:    "not the last partition",
		script:  cardScript + "start=51200, size=4096, type=83\n",
		n:       2,
		skipped: "it is not the disk's last: ",
	}, {
		name:   "card smaller than the image",
		script: cardScript,
		shrink: 20 * mib,
		n:      2,
		err:    "ends at byte 26214400, past the disk's end at 20971520: the card is smaller than the image",
	}, {
		name:   "GPT",
		script: "label: gpt\nstart=2048, size=16384\nstart=18432, size=32768\n",
		n:      2,
		err:    "has a gpt partition table: only DOS ones are grown",
	}, {
		name:   "logical partition",
		script: cardScript,
		n:      5,
		err:    "is not a primary partition (1 to 4): not grown",
	}, {
		name:   "no such partition",
		script: cardScript,
		n:      3,
		err:    "has no partition 3",
	}, {
		name:   "not ext4",
		script: cardScript,
		dev:    zeros,
		n:      2,
		err:    "zeros holds no ext4 filesystem",
	}, {
		name:   "a device not the partition",
		script: cardScript,
		dev:    "ext4",
		n:      2,
		err:    "is 8388608 bytes, but partition 2 of ",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			img := card(t, 32*mib, tc.script)
			if tc.shrink != 0 {
				if err := os.Truncate(img, tc.shrink); err != nil {
					t.Fatal(err)
				}
			}
			old := checksum(t, img)
			var skipped string
			var err error
			switch tc.dev {
			case "":
				_, _, skipped, err = growPartition(ctx, img, tc.n)
			case "ext4":
				_, err = GrowRoot(ctx, mkfs(t, 8*mib), img, tc.n)
			default:
				_, err = GrowRoot(ctx, tc.dev, img, tc.n)
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "firstboot: grow root: ") {
					t.Fatalf("error %v; want one holding %q", err, tc.err)
				}
			} else if err != nil || !strings.HasPrefix(skipped, tc.skipped) {
				t.Fatalf("skipped %q, error %v; want skipped %q", skipped, err, tc.skipped)
			}
			if tc.dev != "ext4" && checksum(t, img) != old {
				t.Error("the image changed")
			}
		})
	}
}

func TestExt4Size(t *testing.T) {
	sb := func(logBlockSize, lo, hi, incompat uint32) string {
		data := make([]byte, superblockOffset+superblockSize)
		s := data[superblockOffset:]
		le := binary.LittleEndian
		le.PutUint16(s[sbMagic:], ext4Magic)
		le.PutUint32(s[sbLogBlockSize:], logBlockSize)
		le.PutUint32(s[sbBlocksCountLo:], lo)
		le.PutUint32(s[sbBlocksCountHi:], hi)
		le.PutUint32(s[sbFeatureIncompat:], incompat)
		return writeTemp(t, data)
	}
	tests := []struct {
		name string
		file string
		size int64
		err  string
	}{
		{"64-bit", sb(2, 5, 1, incompat64Bit), (1<<32 + 5) * 4096, ""},
		{"32-bit ignores the high word", sb(0, 300, 7, 0), 300 * 1024, ""},
		{"bad block size", sb(9, 5, 0, 0), 0, "block size 2^9 KiB"},
		{"not ext4", writeTemp(t, make([]byte, 4096)), 0, "holds no ext4 filesystem"},
		{"too short", writeTemp(t, make([]byte, 1100)), 0, "superblock: EOF"},
		{"no file", filepath.Join(t.TempDir(), "none"), 0, "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			size, err := ext4Size(tc.file)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ext4Size: %d, %v; want an error holding %q", size, err, tc.err)
				}
				return
			}
			if err != nil || size != tc.size {
				t.Fatalf("ext4Size: %d, %v; want %d", size, err, tc.size)
			}
		})
	}
}

func writeTemp(t *testing.T, data []byte) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

func TestMissingTools(t *testing.T) {
	look := func(name string) (string, error) {
		if name == "sfdisk" || name == "resize2fs" {
			return "", errors.New("not found")
		}
		return "/usr/bin/" + name, nil
	}
	err := missingTools(look)
	if !errors.Is(err, ErrToolMissing) {
		t.Fatalf("missingTools: %v; want ErrToolMissing", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "sfdisk, resize2fs not found") ||
		!strings.Contains(msg, "apt-get install fdisk e2fsprogs") || strings.Contains(msg, "util-linux") {
		t.Errorf("missingTools: %q; want sfdisk and resize2fs named, with their packages only", msg)
	}
	if err := missingTools(func(name string) (string, error) { return name, nil }); err != nil {
		t.Errorf("missingTools with every tool: %v", err)
	}
}

// TestCheckGrown checks the check of the table sfdisk wrote: only the
// grown partition's size may change.
func TestCheckGrown(t *testing.T) {
	old := partitionTable{Label: "dos", ID: "0x1234abcd", Device: "/dev/mmcblk0", Unit: "sectors", SectorSize: 512,
		Partitions: []tablePartition{
			{Node: "/dev/mmcblk0p1", Start: 8192, Size: 1048576, Type: "c", Bootable: true},
			{Node: "/dev/mmcblk0p2", Start: 1056768, Size: 4194304, Type: "83"},
		}}
	const disk = 31116288 * 512
	tests := []struct {
		name   string
		change func(t *partitionTable)
		ok     bool
	}{
		{"grown", func(t *partitionTable) { t.Partitions[1].Size = 31116288 - 1056768 }, true},
		{"unchanged", func(*partitionTable) {}, true},
		{"start moved", func(t *partitionTable) { t.Partitions[1].Start += 2048 }, false},
		{"type changed", func(t *partitionTable) { t.Partitions[1].Type = "7" }, false},
		{"made bootable", func(t *partitionTable) { t.Partitions[1].Bootable = true }, false},
		{"shrunk", func(t *partitionTable) { t.Partitions[1].Size-- }, false},
		{"past the disk's end", func(t *partitionTable) { t.Partitions[1].Size = 31116288 }, false},
		{"other partition changed", func(t *partitionTable) { t.Partitions[0].Size++ }, false},
		{"disk identifier changed", func(t *partitionTable) { t.ID = "0x00000001" }, false},
		{"partition added", func(t *partitionTable) {
			t.Partitions = append(t.Partitions, tablePartition{Node: "/dev/mmcblk0p3", Start: 9000000, Size: 2048, Type: "83"})
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			table := old
			table.Partitions = append([]tablePartition(nil), old.Partitions...)
			tc.change(&table)
			err := table.checkGrown(old, 1, disk)
			if tc.ok != (err == nil) {
				t.Fatalf("checkGrown: %v; want ok %v", err, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "the table was [label: dos; label-id: 0x1234abcd; /dev/mmcblk0p1 : start=8192, size=1048576, type=c, bootable; ") {
				t.Errorf("checkGrown: %v; want the old table shown", err)
			}
		})
	}
}
