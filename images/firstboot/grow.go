package firstboot

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/isle-cluster/isle/images/hosttools"
)

// ErrToolMissing is wrapped by GrowRoot's error when a program it runs is
// not installed.
var ErrToolMissing = hosttools.ErrMissing

// growTools are the programs GrowRoot runs and the Debian packages that
// hold them.
var growTools = []hosttools.Tool{
	{Name: "sfdisk", Package: "fdisk"},
	{Name: "partx", Package: "util-linux"},
	{Name: "resize2fs", Package: "e2fsprogs"},
}

// slack is how far short of the disk's end a partition, or of the
// partition's end a filesystem, may end and still count as filling it:
// partitions are aligned to 1 MiB, and resize2fs may leave a last block
// group too small to be worth having.
const slack = 1 << 20

// Growth is what GrowRoot did. A size that did not change says that part
// was left as it was.
type Growth struct {
	// PartitionBefore and PartitionAfter are the partition's size in bytes
	// before and after.
	PartitionBefore, PartitionAfter int64
	// FilesystemBefore and FilesystemAfter are the filesystem's size in
	// bytes before and after.
	FilesystemBefore, FilesystemAfter int64
	// Skipped says why the partition was not grown, such as "it already
	// fills the disk"; empty when it was.
	Skipped string
}

// RootDevice finds the partition holding the filesystem mounted at / (the
// last mount on / in ROOT/proc/self/mountinfo), its disk and its number.
// It goes by the mount's device number, through the symbolic link
// ROOT/sys/dev/block/MAJOR:MINOR to the partition's sysfs directory, whose
// name is the partition's, whose file "partition" holds its number and
// whose parent directory is the disk's: /dev/mmcblk0p2 is on disk
// /dev/mmcblk0, partition 2; /dev/vda2 on /dev/vda, partition 2. The device
// number, not the mount's source, since a root the kernel mounted itself
// shows as /dev/root. root is "/" on a board.
func RootDevice(root string) (dev, disk string, partition int, err error) {
	path := filepath.Join(root, "proc/self/mountinfo")
	data, err := os.ReadFile(path)
	if err != nil {
		return "", "", 0, fmt.Errorf("firstboot: root device: %w", err)
	}
	m, err := rootMount(path, data)
	if err != nil {
		return "", "", 0, err
	}
	what := fmt.Sprintf("/ is %s on %s (device %s)", m.fstype, m.source, m.devNum)
	link := filepath.Join(root, "sys/dev/block", m.devNum)
	dir, err := filepath.EvalSymlinks(link)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", 0, fmt.Errorf("firstboot: root device: %s, not on a block device (no %s)", what, link)
	}
	if err != nil {
		return "", "", 0, fmt.Errorf("firstboot: root device: %s: %w", what, err)
	}
	name := filepath.Base(dir)
	numFile := filepath.Join(dir, "partition")
	data, err = os.ReadFile(numFile)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", 0, fmt.Errorf("firstboot: root device: %s: /dev/%s is a whole disk, not a partition (no %s)", what, name, numFile)
	}
	if err != nil {
		return "", "", 0, fmt.Errorf("firstboot: root device: %s: %w", what, err)
	}
	partition, err = strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || partition < 1 {
		return "", "", 0, fmt.Errorf("firstboot: root device: %s: %q is not a partition number", numFile, bytes.TrimSpace(data))
	}
	diskName := filepath.Base(filepath.Dir(dir))
	if _, err := os.Stat(filepath.Join(root, "sys/class/block", diskName)); err != nil {
		return "", "", 0, fmt.Errorf("firstboot: root device: %s: partition %d of %s, which is not a block device: %w", what, partition, diskName, err)
	}
	return "/dev/" + name, "/dev/" + diskName, partition, nil
}

// mount is a line of /proc/self/mountinfo.
type mount struct {
	devNum, fstype, source string
}

// rootMount is the last mount on / of mountinfo's text data, read from path:
// the one on top, which / is.
func rootMount(path string, data []byte) (mount, error) {
	var m mount
	found := false
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		// ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS
		f := strings.Fields(line)
		sep := -1
		for j := 6; j < len(f); j++ {
			if f[j] == "-" {
				sep = j
				break
			}
		}
		if sep < 0 || len(f) < sep+3 || strings.Count(f[2], ":") != 1 {
			return mount{}, fmt.Errorf("firstboot: root device: %s:%d: not a mountinfo line: %q", path, i+1, line)
		}
		if f[4] == "/" {
			m, found = mount{devNum: f[2], fstype: f[sep+1], source: f[sep+2]}, true
		}
	}
	if !found {
		return mount{}, fmt.Errorf("firstboot: root device: %s: nothing is mounted on /", path)
	}
	return m, nil
}

// GrowRoot grows partition number partition of disk, the partition of the
// block device dev, which holds an ext4 filesystem, mounted or not, to the
// end of the disk, and the filesystem to the partition's end. In turn:
//
//   - it checks that dev holds ext2, ext3 or ext4, before anything is
//     changed;
//   - it grows the partition, unless it already ends within 1 MiB of the
//     disk's end or is not the disk's last, with sfdisk (see
//     growPartition), which keeps the partition's start and type;
//   - it tells the kernel the partition's new size with partx, as the
//     partition is in use and sfdisk's own re-read of the table would fail
//     (not for a disk that is an image file);
//   - it checks that dev is now as large as the partition;
//   - it grows the filesystem with resize2fs (online if mounted), unless it
//     already ends within 1 MiB of the partition's end. So a run after a
//     power cut between the two grows the filesystem.
//
// Only primary partitions of DOS partition tables are grown. dev and disk
// may be image files: in the tests, and to grow an image. On an error, the
// Growth says what was done before it.
func GrowRoot(ctx context.Context, dev, disk string, partition int) (Growth, error) {
	var g Growth
	if err := missingTools(hosttools.Look); err != nil {
		return g, err
	}
	fsSize, err := ext4Size(dev)
	if err != nil {
		return g, err
	}
	g.FilesystemBefore, g.FilesystemAfter = fsSize, fsSize
	g.PartitionBefore, g.PartitionAfter, g.Skipped, err = growPartition(ctx, disk, partition)
	if err != nil {
		return g, err
	}
	if g.Skipped == "" {
		if err := tellKernel(ctx, disk, partition); err != nil {
			return g, err
		}
	}
	devSize, err := deviceSize(dev)
	if err != nil {
		return g, err
	}
	if devSize != g.PartitionAfter {
		return g, fmt.Errorf("firstboot: grow root: %s is %d bytes, but partition %d of %s is %d bytes: "+
			"reboot for the kernel to read the partition table, then run resize2fs %s", dev, devSize, partition, disk, g.PartitionAfter, dev)
	}
	if devSize-fsSize < slack {
		return g, nil
	}
	if _, err := run(ctx, "", "resize2fs", dev); err != nil {
		return g, fmt.Errorf("firstboot: grow root: filesystem: %w", err)
	}
	grown, err := ext4Size(dev)
	if err != nil {
		return g, err
	}
	g.FilesystemAfter = grown
	return g, nil
}

// growPartition grows the primary partition number n of the DOS partition
// table of disk, a block device or an image file, to the disk's end, with
// sfdisk -N N and the script ", +", which keeps the partition's start and
// type; unless it already ends within 1 MiB of the disk's end, or another
// partition follows it: then skipped says so and nothing is written. It
// reads the table again after writing it and fails, showing the old table,
// if anything but the partition's size changed. It does not tell the
// kernel. before and after are the partition's size in bytes.
func growPartition(ctx context.Context, disk string, n int) (before, after int64, skipped string, err error) {
	old, err := readTable(ctx, disk)
	if err != nil {
		return 0, 0, "", err
	}
	if old.Label != "dos" {
		return 0, 0, "", fmt.Errorf("firstboot: grow root: %s has a %s partition table: only DOS ones are grown", disk, old.Label)
	}
	if n < 1 || n > 4 {
		return 0, 0, "", fmt.Errorf("firstboot: grow root: partition %d of %s is not a primary partition (1 to 4): not grown", n, disk)
	}
	i, err := old.find(n)
	if err != nil {
		return 0, 0, "", err
	}
	p, ss := old.Partitions[i], old.SectorSize
	before = p.Size * ss
	size, err := deviceSize(disk)
	if err != nil {
		return 0, 0, "", err
	}
	end := (p.Start + p.Size) * ss
	if end > size {
		return 0, 0, "", fmt.Errorf("firstboot: grow root: partition %d of %s ends at byte %d, past the disk's end at %d: "+
			"the card is smaller than the image written on it", n, disk, end, size)
	}
	for _, q := range old.Partitions {
		if q.Start > p.Start {
			return before, before, fmt.Sprintf("it is not the disk's last: %s follows it", q.Node), nil
		}
	}
	if size-end < slack {
		return before, before, "it already fills the disk", nil
	}
	if _, err := run(ctx, ", +\n", "sfdisk", "-N", strconv.Itoa(n), "--no-reread", "--no-tell-kernel", disk); err != nil {
		return 0, 0, "", fmt.Errorf("firstboot: grow root: partition %d of %s: %w", n, disk, err)
	}
	table, err := readTable(ctx, disk)
	if err != nil {
		return 0, 0, "", err
	}
	if err := table.checkGrown(old, i, size); err != nil {
		return 0, 0, "", fmt.Errorf("firstboot: grow root: partition %d of %s: %w", n, disk, err)
	}
	return before, table.Partitions[i].Size * ss, "", nil
}

// partitionTable is the partition table of a disk as sfdisk --json shows it.
type partitionTable struct {
	Label      string           `json:"label"`
	ID         string           `json:"id"`
	Device     string           `json:"device"`
	Unit       string           `json:"unit"`
	SectorSize int64            `json:"sectorsize"`
	Partitions []tablePartition `json:"partitions"`
}

// tablePartition is a partition of a partitionTable, in sectors.
type tablePartition struct {
	Node     string `json:"node"`
	Start    int64  `json:"start"`
	Size     int64  `json:"size"`
	Type     string `json:"type"`
	Bootable bool   `json:"bootable"`
}

// String is the partition as a line of an sfdisk script.
func (p tablePartition) String() string {
	s := fmt.Sprintf("%s : start=%d, size=%d, type=%s", p.Node, p.Start, p.Size, p.Type)
	if p.Bootable {
		s += ", bootable"
	}
	return s
}

// readTable reads disk's partition table with sfdisk --json.
func readTable(ctx context.Context, disk string) (partitionTable, error) {
	out, err := run(ctx, "", "sfdisk", "--json", disk)
	if err != nil {
		return partitionTable{}, fmt.Errorf("firstboot: grow root: partition table: %w", err)
	}
	var doc struct {
		Table *partitionTable `json:"partitiontable"`
	}
	if err := json.Unmarshal(out, &doc); err != nil || doc.Table == nil {
		return partitionTable{}, fmt.Errorf("firstboot: grow root: sfdisk --json %s: not a partition table (%v): %s", disk, err, bytes.TrimSpace(out))
	}
	t := *doc.Table
	if t.Unit != "sectors" || t.SectorSize < 512 || t.SectorSize&(t.SectorSize-1) != 0 {
		return partitionTable{}, fmt.Errorf("firstboot: grow root: sfdisk --json %s: unit %q, sector size %d: want sectors of a power of two bytes from 512",
			disk, t.Unit, t.SectorSize)
	}
	return t, nil
}

// find is the index in t.Partitions of partition number n, going by the
// partitions' device names: the disk's with n, or p and n, after it.
func (t partitionTable) find(n int) (int, error) {
	for i, p := range t.Partitions {
		num, ok := strings.CutPrefix(p.Node, t.Device)
		if ok && strings.TrimPrefix(num, "p") == strconv.Itoa(n) {
			return i, nil
		}
	}
	return 0, fmt.Errorf("firstboot: grow root: %s has no partition %d", t.Device, n)
}

// checkGrown checks that t is old with the partition of index i grown
// within a disk of size bytes, and nothing else changed.
func (t partitionTable) checkGrown(old partitionTable, i int, size int64) error {
	same := t.Label == old.Label && t.ID == old.ID && t.SectorSize == old.SectorSize && len(t.Partitions) == len(old.Partitions)
	for j := 0; same && j < len(t.Partitions); j++ {
		p, q := t.Partitions[j], old.Partitions[j]
		if j == i {
			same = p.Node == q.Node && p.Start == q.Start && p.Type == q.Type && p.Bootable == q.Bootable &&
				p.Size >= q.Size && (p.Start+p.Size)*t.SectorSize <= size
		} else {
			same = p == q
		}
	}
	if same {
		return nil
	}
	return fmt.Errorf("sfdisk changed more than its size: the table was %s, it is %s: write the old one back with sfdisk", old, t)
}

// String is the table as a one-line sfdisk script.
func (t partitionTable) String() string {
	parts := []string{"label: " + t.Label, "label-id: " + t.ID}
	for _, p := range t.Partitions {
		parts = append(parts, p.String())
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

// tellKernel has the kernel read the new size of partition n of disk, a
// block device, with partx; there is nothing to tell about an image file.
func tellKernel(ctx context.Context, disk string, n int) error {
	fi, err := os.Stat(disk)
	if err != nil {
		return fmt.Errorf("firstboot: grow root: %w", err)
	}
	if fi.Mode().IsRegular() {
		return nil
	}
	if _, err := run(ctx, "", "partx", "-u", "--nr", strconv.Itoa(n), disk); err != nil {
		return fmt.Errorf("firstboot: grow root: telling the kernel partition %d of %s grew: %w", n, disk, err)
	}
	return nil
}

// deviceSize is the size in bytes of path, a block device or a file.
func deviceSize(path string) (int64, error) {
	fh, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("firstboot: grow root: %w", err)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return 0, fmt.Errorf("firstboot: grow root: %w", err)
	}
	if m := fi.Mode(); !m.IsRegular() && (m&fs.ModeDevice == 0 || m&fs.ModeCharDevice != 0) {
		return 0, fmt.Errorf("firstboot: grow root: %s is neither a block device nor a file", path)
	}
	size, err := fh.Seek(0, io.SeekEnd) // a block device's size, too
	if err != nil {
		return 0, fmt.Errorf("firstboot: grow root: %s: size: %w", path, err)
	}
	return size, nil
}

// The fields of an ext2/3/4 superblock that ext4Size reads, at their
// offsets in it; the superblock is at byte 1024 of the filesystem.
const (
	superblockOffset  = 1024
	sbBlocksCountLo   = 0x04
	sbLogBlockSize    = 0x18
	sbMagic           = 0x38
	sbFeatureIncompat = 0x60
	sbBlocksCountHi   = 0x150
	superblockSize    = 0x154 // of the fields read

	ext4Magic       = 0xef53
	incompat64Bit   = 0x80
	maxLogBlockSize = 6 // 64 KiB blocks
)

// ext4Size is the size in bytes of the ext2, ext3 or ext4 filesystem on
// dev, from its superblock.
func ext4Size(dev string) (int64, error) {
	fh, err := os.Open(dev)
	if err != nil {
		return 0, fmt.Errorf("firstboot: grow root: %w", err)
	}
	defer fh.Close()
	sb := make([]byte, superblockSize)
	if _, err := fh.ReadAt(sb, superblockOffset); err != nil {
		return 0, fmt.Errorf("firstboot: grow root: %s: superblock: %w", dev, err)
	}
	le := binary.LittleEndian
	if le.Uint16(sb[sbMagic:]) != ext4Magic {
		return 0, fmt.Errorf("firstboot: grow root: %s holds no ext4 filesystem", dev)
	}
	logSize := le.Uint32(sb[sbLogBlockSize:])
	if logSize > maxLogBlockSize {
		return 0, fmt.Errorf("firstboot: grow root: %s: ext4 superblock: block size 2^%d KiB", dev, logSize)
	}
	blocks := uint64(le.Uint32(sb[sbBlocksCountLo:]))
	if le.Uint32(sb[sbFeatureIncompat:])&incompat64Bit != 0 {
		blocks |= uint64(le.Uint32(sb[sbBlocksCountHi:])) << 32
	}
	return int64(blocks) << (10 + logSize), nil
}

// missingTools reports, in one error wrapping ErrToolMissing, every program
// GrowRoot runs that look does not find, with the Debian packages to
// install.
func missingTools(look func(string) (string, error)) error {
	if err := hosttools.Missing(growTools, look); err != nil {
		return fmt.Errorf("firstboot: grow root: %w", err)
	}
	return nil
}

// run runs a program with standard input stdin and returns its standard
// output; its error names the command and shows its output. ctx kills it.
func run(ctx context.Context, stdin, name string, args ...string) ([]byte, error) {
	p, err := hosttools.Look(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrToolMissing, name)
	}
	cmd := exec.CommandContext(ctx, p, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	slog.DebugContext(ctx, "firstboot: ran", "tool", name, "args", args, "took", time.Since(start).Round(time.Millisecond))
	line := strings.Join(append([]string{name}, args...), " ")
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", line, ctx.Err())
		}
		return nil, fmt.Errorf("%s: %w: %s", line, err, bytes.TrimSpace(append(stdout.Bytes(), stderr.Bytes()...)))
	}
	return stdout.Bytes(), nil
}
