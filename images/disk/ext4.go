package disk

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// What bookworm's mke2fs.conf gives an ext4 filesystem of the "default"
// usage type.
const (
	blockSize     = 4096
	inodeSize     = 256
	bytesPerInode = 16384
)

// rootContent is what a tree needs in an ext4 filesystem.
type rootContent struct {
	bytes  int64 // blocks of file data, directories and long symlinks, in bytes
	inodes int64 // files, directories, symlinks and nodes; hard links once
}

// scanRoot measures the tree at dir without following symlinks.
func scanRoot(dir string) (rootContent, error) {
	var c rootContent
	type inode struct{ dev, ino uint64 }
	linked := map[inode]bool{}     // files with more than one name, seen
	dirBytes := map[string]int64{} // directory: its entries' size
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			// An ext4 directory entry: 8 bytes and the name, padded to 4.
			dirBytes[filepath.Dir(p)] += 8 + roundUp(int64(len(d.Name())), 4)
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 && !fi.IsDir() {
			key := inode{uint64(st.Dev), st.Ino}
			if linked[key] {
				return nil
			}
			linked[key] = true
		}
		c.inodes++
		switch t := fi.Mode().Type(); {
		case t.IsDir():
			dirBytes[p] += 24 // "." and ".."
		case t.IsRegular():
			c.bytes += roundUp(fi.Size(), blockSize)
		case t&fs.ModeSymlink != 0 && fi.Size() >= 60:
			c.bytes += blockSize // targets shorter than 60 bytes live in the inode
		}
		return nil
	})
	if err != nil {
		return rootContent{}, fmt.Errorf("images: disk: root: %w", err)
	}
	for _, n := range dirBytes {
		// Hashed directories leave their blocks a quarter empty on average.
		c.bytes += roundUp(n+n/3, blockSize)
	}
	return c, nil
}

// rootSize returns the size in bytes (a multiple of 4 MiB) and the inode
// count of an ext4 filesystem that holds c with slack bytes free: c, the
// inode tables, the journal, and the other metadata (bitmaps, group
// descriptors and the blocks reserved to grow them, the superblock's
// backups) within a 64th of the size, plus 4 MiB.
func rootSize(c rootContent, slack int64) (size, inodes int64) {
	need := func(size int64) (int64, int64) {
		inodes := max(c.inodes+c.inodes/4+1024, size/bytesPerInode)
		return c.bytes + slack + inodes*inodeSize + journalSize(size) + size/64 + 4*mib, inodes
	}
	// The metadata grows with the size: grow the size until it holds them.
	size = roundUp(c.bytes+slack, align)
	for {
		next, inodes := need(size)
		if next <= size {
			return size, inodes
		}
		size = roundUp(next, align)
	}
}

// journalSize is the size of the journal mke2fs gives an ext4 filesystem of
// size bytes with 4 KiB blocks (measured with bookworm's mke2fs 1.47.0).
func journalSize(size int64) int64 {
	switch {
	case size < 8*mib:
		return 0
	case size < 128*mib:
		return 4 * mib
	case size < 1<<30:
		return 16 * mib
	case size < 2<<30:
		return 32 * mib
	case size < 16<<30:
		return 64 * mib
	case size < 32<<30:
		return 128 * mib
	case size < 64<<30:
		return 256 * mib
	case size < 128<<30:
		return 512 * mib
	}
	return 1 << 30
}

// errNoSpace is what mke2fs says when the filesystem is too small for the
// tree: out of blocks or out of inodes.
const errNoSpace = "Could not allocate"

// makeExt4 makes an ext4 filesystem labelled l.RootLabel in the new file file
// holding dir's tree, sized for c plus l.RootSlack; if mke2fs runs out of
// space there, it tries once more half as big again with twice the inodes.
// It returns the filesystem's size in bytes.
func makeExt4(ctx context.Context, file, dir string, c rootContent, l Layout) (int64, error) {
	size, inodes := rootSize(c, l.RootSlack)
	err := mke2fs(ctx, file, dir, size, inodes, l.RootLabel)
	if err == nil || !strings.Contains(err.Error(), errNoSpace) {
		return size, err
	}
	slog.WarnContext(ctx, "images: disk: root filesystem too small, trying bigger", "dir", dir, "size", size, "inodes", inodes, "err", err)
	if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("images: disk: root: %w", err)
	}
	size = roundUp(size+size/2, align)
	return size, mke2fs(ctx, file, dir, size, 2*inodes, l.RootLabel)
}

// mke2fs runs mke2fs with bookworm's defaults for ext4, but for the usage
// type: "default" pins 4 KiB blocks, where a filesystem under 512 MiB would
// get the "small" type's 1 KiB blocks, a poor start for a root that first
// boot grows to fill the card, and not what rootSize counts on.
func mke2fs(ctx context.Context, file, dir string, size, inodes int64, label string) error {
	err := run(ctx, nil, "", "mke2fs", "-q", "-F", "-t", "ext4", "-T", "default", "-L", label,
		"-N", strconv.FormatInt(inodes, 10), "-d", dir, "-E", "root_owner=0:0",
		file, strconv.FormatInt(size/1024, 10)+"k")
	if err != nil {
		return fmt.Errorf("images: disk: root: %w", err)
	}
	return nil
}
