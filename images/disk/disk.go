package disk

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const (
	mib = 1 << 20
	// align is where partitions start: on 4 MiB boundaries, the first at 4 MiB.
	align = 4 * mib
	// maxImageSize is what an MBR addresses: 2^32 sectors of 512 bytes.
	maxImageSize = 1 << 32 * 512

	defaultBootSize  = 256 * mib
	minBootSize      = 64 * mib
	defaultRootSlack = 256 * mib
	defaultBootLabel = "RASPIFIRM"
	defaultRootLabel = "RASPIROOT"
)

// Layout says how big the partitions are and what they are called. Its zero
// value is Debian's raspi layout.
type Layout struct {
	// BootSize is the size in bytes of the FAT partition, a multiple of
	// 1 MiB and at least 64 MiB; 0: 256 MiB.
	BootSize int64
	// RootSlack is how many bytes the root filesystem has free beyond its
	// content (counting the blocks ext4 reserves for root); 0: 256 MiB.
	RootSlack int64
	// BootLabel is the FAT filesystem's label, at most 11 characters;
	// "": RASPIFIRM.
	BootLabel string
	// RootLabel is the ext4 filesystem's label, at most 16 characters
	// without spaces (the kernel command line says root=LABEL=...);
	// "": RASPIROOT.
	RootLabel string
	// DiskID is the partition table's identifier (sfdisk's label-id; the
	// root partition's PARTUUID is its hex digits and "-02"); 0: random.
	DiskID uint32
}

// Image is a built disk image.
type Image struct {
	Path   string    // the image file
	Size   int64     // its size in bytes
	DiskID uint32    // the partition table's identifier
	Boot   Partition // partition 1: FAT32
	Root   Partition // partition 2: ext4
}

// Partition is where a partition lies in the image file, in bytes.
type Partition struct{ Start, Size int64 }

// validate fills the defaults and rejects bad values, naming the field.
func (l *Layout) validate() error {
	switch {
	case l.BootSize == 0:
		l.BootSize = defaultBootSize
	case l.BootSize < minBootSize:
		return fmt.Errorf("images: disk: layout: BootSize %d is below the minimum of %d (64 MiB)", l.BootSize, minBootSize)
	case l.BootSize%mib != 0:
		return fmt.Errorf("images: disk: layout: BootSize %d is not a multiple of 1 MiB", l.BootSize)
	}
	switch {
	case l.RootSlack == 0:
		l.RootSlack = defaultRootSlack
	case l.RootSlack < 0:
		return fmt.Errorf("images: disk: layout: RootSlack %d is negative", l.RootSlack)
	}
	if l.BootLabel == "" {
		l.BootLabel = defaultBootLabel
	}
	if !fatLabel(l.BootLabel) {
		return fmt.Errorf(`images: disk: layout: BootLabel %q: want at most 11 printable ASCII characters, not starting with a space, none of "*+,./:;<=>?[\]|`, l.BootLabel)
	}
	if l.RootLabel == "" {
		l.RootLabel = defaultRootLabel
	}
	if len(l.RootLabel) > 16 || strings.ContainsFunc(l.RootLabel, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return fmt.Errorf("images: disk: layout: RootLabel %q: want at most 16 printable ASCII characters without spaces", l.RootLabel)
	}
	for l.DiskID == 0 {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			return fmt.Errorf("images: disk: layout: DiskID: %w", err)
		}
		l.DiskID = binary.LittleEndian.Uint32(b[:])
	}
	return nil
}

// Build writes a disk image to out: partition 1 a FAT32 filesystem holding
// bootDir's files, partition 2 an ext4 filesystem holding rootDir's tree
// (owners, modes, symlinks, hard links and device nodes kept; the root
// directory owned by 0:0), sized to rootDir's content plus l.RootSlack.
//
// Build needs no root privileges, but rootDir's files must be readable. Its
// temporary files go to a directory next to out and are removed when it
// returns; out appears only when everything else succeeded, and a failed
// Build leaves no out (it removes an older one). Cancelling ctx kills the
// tools it runs.
func Build(ctx context.Context, out, bootDir, rootDir string, l Layout) (img Image, err error) {
	if fi, err := os.Stat(out); err == nil && fi.IsDir() {
		return Image{}, fmt.Errorf("images: disk: output %s is a directory", out)
	}
	defer func() {
		if err != nil {
			os.Remove(out)
		}
	}()
	if err := l.validate(); err != nil {
		return Image{}, err
	}
	if bootDir, err = directory("boot", bootDir); err != nil {
		return Image{}, err
	}
	if rootDir, err = directory("root", rootDir); err != nil {
		return Image{}, err
	}
	if err := CheckTools(); err != nil {
		return Image{}, err
	}
	bootBytes, err := scanBoot(bootDir)
	if err != nil {
		return Image{}, err
	}
	if bootBytes > l.BootSize {
		return Image{}, fmt.Errorf("images: disk: boot: the files in %s take %d bytes, more than BootSize %d", bootDir, bootBytes, l.BootSize)
	}
	content, err := scanRoot(rootDir)
	if err != nil {
		return Image{}, err
	}

	tmp, err := os.MkdirTemp(filepath.Dir(out), "."+filepath.Base(out)+".tmp-")
	if err != nil {
		return Image{}, fmt.Errorf("images: disk: %w", err)
	}
	defer os.RemoveAll(tmp)

	bootFS := filepath.Join(tmp, "boot.vfat")
	if err := makeFAT(ctx, bootFS, bootDir, l); err != nil {
		return Image{}, err
	}
	rootFS := filepath.Join(tmp, "root.ext4")
	rootSize, err := makeExt4(ctx, rootFS, rootDir, content, l)
	if err != nil {
		return Image{}, err
	}

	img = Image{Path: out, DiskID: l.DiskID, Boot: Partition{Start: align, Size: l.BootSize}}
	img.Root = Partition{Start: roundUp(img.Boot.Start+img.Boot.Size, align), Size: rootSize}
	img.Size = img.Root.Start + img.Root.Size
	if img.Size > maxImageSize {
		return Image{}, fmt.Errorf("images: disk: the image would take %d bytes, more than an MBR partition table addresses (2 TiB)", img.Size)
	}
	file := filepath.Join(tmp, "disk.img")
	if err := writeImage(ctx, file, img, bootFS, rootFS); err != nil {
		return Image{}, err
	}
	if err := os.Rename(file, out); err != nil {
		return Image{}, fmt.Errorf("images: disk: %w", err)
	}
	return img, nil
}

// directory returns dir made absolute (a tool takes no path for an option),
// failing unless it is a directory.
func directory(what, dir string) (string, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("images: disk: %s: %w", what, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("images: disk: %s: %s is not a directory", what, dir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("images: disk: %s: %w", what, err)
	}
	return abs, nil
}

// fatLabel says whether s is a label mkfs.vfat takes as it is.
func fatLabel(s string) bool {
	return len(s) <= 11 && !strings.HasPrefix(s, " ") && !strings.ContainsFunc(s, func(r rune) bool {
		return r < ' ' || r > '~' || strings.ContainsRune(`"*+,./:;<=>?[\]|`, r)
	})
}

// roundUp rounds n up to a multiple of m.
func roundUp(n, m int64) int64 {
	return (n + m - 1) / m * m
}
